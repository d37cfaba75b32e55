"""``researchcrew.llm.calls.complete``: the one way the pipeline calls a model from async code — the model's async
call, or, for a custom ``BaseLLM`` with only the blocking ``call``, that call in a worker thread while the event loop
goes on (every stage that asks a model goes through it: follow-ups, reformulation, adjudication, entities, plans)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from pydantic import BaseModel

from researchcrew.llm.calls import complete
from researchcrew.llm.replies import ask_for
from researchcrew.testing import FakeLLM

MESSAGES = [{"role": "user", "content": "Say yes."}]


class SyncOnly(FakeLLM):
    """A model that implements only the blocking call, and blocks for a while in it."""

    def __init__(self, replies: list[str], delay_s: float = 0.0) -> None:
        super().__init__(replies)
        self._delay_s = delay_s
        self.threads: list[int] = []

    async def acall(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        raise NotImplementedError

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        self.threads.append(threading.get_ident())
        time.sleep(self._delay_s)
        return super().call(messages, *args, **kwargs)


async def test_a_model_with_an_async_call_is_awaited() -> None:
    llm = FakeLLM(["yes"])
    assert await complete(llm, MESSAGES) == "yes"
    assert [call.asynchronous for call in llm.calls] == [True]


async def test_a_sync_only_model_runs_in_a_thread_and_the_loop_goes_on() -> None:
    llm = SyncOnly(["yes"], delay_s=0.3)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        assert await complete(llm, MESSAGES) == "yes"
    finally:
        ticker.cancel()
    assert [call.asynchronous for call in llm.calls] == [False]
    assert llm.threads != [threading.get_ident()]
    assert ticks >= 10  # the loop kept running while the model blocked for 0.3 s


class Answer(BaseModel):
    answer: str


async def test_ask_for_reads_a_sync_only_models_reply_into_the_model() -> None:
    reply = await ask_for(SyncOnly(['{"answer": "yes"}']), MESSAGES, Answer, timeout_s=5)
    assert reply == Answer(answer="yes")
