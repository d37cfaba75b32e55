"""A fake LLM for tests: a real ``crewai.BaseLLM`` subclass with queued responses and a call history.

    llm = FakeLLM(["first answer", lambda messages: "computed from " + messages[-1]["content"]])
    agent = Agent(..., llm=llm)          # crewAI accepts it like any provider
    ...
    assert llm.calls[0].messages[0]["role"] == "system"

A response may be a string, a callable of the messages returning a string, or an exception instance (raised, to
test failure paths). A streaming call (``stream=True`` or crewAI's ``call_stream_override``) also emits the reply as
``LLMStreamChunkEvent``s, word by word, like a provider. When the queue is empty the fake raises
``FakeLLMExhausted`` instead of inventing text, so a test that makes an unexpected extra call fails loudly.
``delay_s`` simulates a slow model in ``acall``.

Token usage is reported the way crewAI's own providers report it: every answered call adds to the LLM's lifetime
counter (``get_token_usage_summary()``) and emits ``LLMCallStartedEvent`` / ``LLMCallCompletedEvent`` with a
``usage`` dict in OpenAI's shape, so code that meters usage (``researchcrew.llm.usage``) is tested on the same path
as with a real model. The counts are ``estimate_tokens`` of the messages and of the reply (one token per four
characters, at least one), recorded per call in ``LLMCall.usage``; ``report_usage=False`` models a provider that
reports none (the completed event then carries ``usage=None``).
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from crewai import BaseLLM
from crewai.events.types.llm_events import LLMCallType
from crewai.events.utils.console_formatter import set_suppress_console_output
from crewai.llms.base_llm import llm_call_context
from pydantic import PrivateAttr

Message = dict[str, Any]
CHARS_PER_TOKEN = 4  # the usual rule of thumb for English text
Response = str | Callable[[list[Message]], str] | BaseException


class FakeLLMExhausted(AssertionError):
    """The test's script of responses ran out: the code under test called the LLM more often than expected."""


def estimate_tokens(text: str) -> int:
    """The fake's token count for a text: one token per four characters, at least one."""
    return max(1, math.ceil(len(text) / 4))


def _message_text(messages: list[Message]) -> str:
    return "".join(str(message.get("content") or "") for message in messages)


@dataclass(frozen=True)
class LLMCall:
    messages: list[Message]
    response_model: type[Any] | None
    asynchronous: bool
    usage: dict[str, int] | None = None  # what the call reported (None: it failed, or usage reporting is off)


class FakeLLM(BaseLLM):
    model: str = "fake/scripted"
    delay_s: float = 0.0
    report_usage: bool = True
    _queue: deque[Response] = PrivateAttr(default_factory=deque)
    _calls: list[LLMCall] = PrivateAttr(default_factory=list)

    def __init__(self, responses: list[Response] | None = None, **data: Any) -> None:
        data.setdefault("model", "fake/scripted")
        super().__init__(**data)
        self._queue = deque(responses or [])
        self._calls = []

    @property
    def calls(self) -> list[LLMCall]:
        return list(self._calls)

    @property
    def remaining(self) -> int:
        return len(self._queue)

    def push(self, *responses: Response) -> None:
        self._queue.extend(responses)

    def _answer(self, messages: str | list[Any], response_model: type[Any] | None, asynchronous: bool) -> str:
        normalized: list[Message] = (
            [{"role": "user", "content": messages}] if isinstance(messages, str) else [dict(m) for m in messages]
        )
        with llm_call_context():
            self._emit_call_started_event(messages=normalized)  # type: ignore[arg-type]
            index = len(self._calls)
            self._calls.append(LLMCall(normalized, response_model, asynchronous))
            try:
                if not self._queue:
                    raise FakeLLMExhausted(f"FakeLLM has no response left for call #{len(self._calls)}")
                response = self._queue.popleft()
                if isinstance(response, BaseException):
                    raise response
                reply = response(normalized) if callable(response) else response
            except BaseException as error:
                # A scripted failure is a test of a failure path: close the call's event scope as a provider would,
                # without crewAI's "LLM Error" console panel (the suppression is a context variable: this call only).
                quiet = set_suppress_console_output(True)
                try:
                    self._emit_call_failed_event(error=f"{type(error).__name__}: {error}")
                finally:
                    quiet.var.reset(quiet)  # type: ignore[attr-defined]
                raise
            usage: dict[str, int] | None = None
            if self.report_usage:
                prompt, completion = estimate_tokens(_message_text(normalized)), estimate_tokens(reply)
                usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
                self._track_token_usage_internal(usage)
            self._calls[index] = LLMCall(normalized, response_model, asynchronous, usage)
            self._emit_call_completed_event(
                response=reply,
                call_type=LLMCallType.LLM_CALL,
                messages=normalized,  # type: ignore[arg-type]
                usage=usage,
            )
        return reply

    def call(
        self,
        messages: Any,
        tools: Any = None,
        callbacks: Any = None,
        available_functions: Any = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> str:
        if self.delay_s:
            time.sleep(self.delay_s)
        return self._streamed(self._answer(messages, response_model, asynchronous=False), from_task, from_agent)

    async def acall(
        self,
        messages: Any,
        tools: Any = None,
        callbacks: Any = None,
        available_functions: Any = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> str:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return self._streamed(self._answer(messages, response_model, asynchronous=True), from_task, from_agent)

    def _streamed(self, reply: str, from_task: Any, from_agent: Any) -> str:
        """When this call streams (``stream=True``, or crewAI's per-call override), emit the reply as crewAI's
        providers do: one ``LLMStreamChunkEvent`` per token (here, per word and its following space)."""
        if self._effective_stream():
            for token in re.findall(r"\S+\s*|\s+", reply):
                self._emit_stream_chunk_event(chunk=token, from_task=from_task, from_agent=from_agent)
        return reply

    def supports_function_calling(self) -> bool:
        return False

    def supports_stop_words(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        return 8192
