"""The shared fake LLM is a usable crewai BaseLLM and fails loudly when over-called."""

from __future__ import annotations

import pytest
from crewai import BaseLLM

from researchcrew.testing.llm import FakeLLM, FakeLLMExhausted


async def test_queued_responses_and_history() -> None:
    llm = FakeLLM(["one", lambda messages: f"echo {messages[-1]['content']}"])
    assert isinstance(llm, BaseLLM)
    assert llm.call("hello") == "one"
    assert await llm.acall([{"role": "user", "content": "x"}]) == "echo x"
    assert [c.asynchronous for c in llm.calls] == [False, True]
    assert llm.calls[0].messages == [{"role": "user", "content": "hello"}]
    with pytest.raises(FakeLLMExhausted):
        llm.call("again")


def test_scripted_exception_is_raised() -> None:
    llm = FakeLLM([TimeoutError("model too slow")])
    with pytest.raises(TimeoutError, match="too slow"):
        llm.call("q")
