"""Counting the tokens an answer's LLM stages spent, per stage, even when many questions share one LLM.

crewAI's LLMs report usage two ways (crewAI 1.15, ``crewai/llms/base_llm.py``): a lifetime counter on the LLM
object (``_token_usage``, ``get_token_usage_summary()``), and an ``LLMCallCompletedEvent`` with the provider's
``usage`` dict for every call. The counter cannot be split between questions that run at the same time on one
runtime (a snapshot before and after a stage would count the other questions' calls too), so the meter reads the
events instead: every event crewAI emits is first handed, synchronously and in the emitting context, to the
"stream sinks" registered in that context (``crewai.events.stream_context.add_stream_sink``, a context variable).
``UsageMeter.stage(name)`` registers one for the duration of a stage; because context variables follow asyncio
tasks and ``asyncio.to_thread``, the sink sees exactly the calls made by that stage of that question — a crewAI
``Crew.akickoff``, a direct ``llm.acall``, a blocking ``llm.call`` in a worker thread — and nothing else.

The provider's dict is normalised with crewAI's own ``UsageMetrics.from_provider_dict`` (OpenAI's
``prompt_tokens``, Anthropic's ``input_tokens``, Gemini's ``prompt_token_count``, ...). A call whose provider
reports no usage counts as a call with zero tokens; a call that fails reports nothing.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from researchcrew.contracts.follow_up import USAGE_STAGES, TokenCount, TokenUsage, UsageStage

logger = logging.getLogger(__name__)


class UsageMeter:
    """The token usage of one research run, per stage. Thread-safe (sinks may run in worker threads)."""

    def __init__(self) -> None:
        self._counts: dict[UsageStage, TokenCount] = {}
        self._lock = threading.Lock()

    @contextmanager
    def stage(self, name: UsageStage) -> Iterator[None]:
        """Count the LLM calls made inside this block (and in tasks and threads it starts) as ``name``'s.

        crewAI's console panels for these calls (an "LLM Error" box when a provider fails) are suppressed in the
        block too: a failure is already reported as data and logged, and the CLI's stdout may be a JSON document.
        Both are context variables, so neither leaks into other questions."""
        if name not in USAGE_STAGES:
            raise ValueError(f"unknown usage stage {name!r}; expected one of {USAGE_STAGES}")
        if "crewai" not in sys.modules:
            # No crewAI LLM exists in this process (the LLM is built before a run starts), so this stage makes no
            # LLM call to count: an extractive answer does not import crewAI for nothing (issue 19).
            yield
            return
        from crewai.events.stream_context import add_stream_sink, reset_stream_sinks
        from crewai.events.utils.console_formatter import set_suppress_console_output, should_suppress_console_output

        def sink(_source: Any, event: Any) -> None:
            self._observe(name, event)

        token = add_stream_sink(sink)
        quiet_before = should_suppress_console_output()
        set_suppress_console_output(True)
        try:
            yield
        finally:
            set_suppress_console_output(quiet_before)
            reset_stream_sinks(token)

    def _observe(self, name: UsageStage, event: Any) -> None:
        from crewai.events.types.llm_events import LLMCallCompletedEvent
        from crewai.types.usage_metrics import UsageMetrics

        if not isinstance(event, LLMCallCompletedEvent):
            return
        metrics = UsageMetrics.from_provider_dict(event.usage)
        count = (
            TokenCount.of(0, 0)
            if metrics is None
            else TokenCount.of(max(0, metrics.prompt_tokens), max(0, metrics.completion_tokens))
        )
        with self._lock:
            self._counts[name] = self._counts.get(name, TokenCount()) + count

    def record(self, name: UsageStage, count: TokenCount) -> None:
        """Add a count measured some other way (for LLMs that do not emit crewAI's events)."""
        with self._lock:
            self._counts[name] = self._counts.get(name, TokenCount()) + count

    def usage(self) -> TokenUsage:
        """What was counted so far."""
        with self._lock:
            return TokenUsage.from_stages(dict(self._counts))


__all__ = ["UsageMeter"]
