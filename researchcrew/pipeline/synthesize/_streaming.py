"""The LLM's answer as it is written: streamed tokens turned into readable text for progress events.

When a caller watches progress (server-sent events, ``stream()``), the Synthesizer asks crewAI to stream this one
call (``call_stream_override``: nothing changes for plain ``ask`` calls) and crewAI emits an ``LLMStreamChunkEvent``
per token on its event bus, synchronously on the thread that reads the stream. One bus handler, registered once,
routes each chunk by its crewAI task id to the run that made the task.

The model writes the ``AnswerDraft`` JSON, not prose, so the chunks are parsed as partial JSON (pydantic-core's
``allow_partial``) and what a person would read — headings and statements — is sent as it grows. It is a preview:
citations are validated afterwards, and the final response carries the checked answer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pydantic_core

from researchcrew.pipeline.progress import ProgressReporter

logger = logging.getLogger(__name__)


def draft_prose(partial_json: str) -> str:
    """The readable text of a partial ``AnswerDraft`` JSON: ``## heading`` lines and statements, as far as written.
    Growing the JSON only ever extends this text (what the streamed pieces rely on)."""
    start = partial_json.find("{")
    if start < 0:
        return ""
    try:
        data = pydantic_core.from_json(partial_json[start:], allow_partial="trailing-strings")
    except ValueError:
        return ""
    sections = data.get("sections") if isinstance(data, dict) else data if isinstance(data, list) else None
    if not isinstance(sections, list):
        return ""
    blocks: list[str] = []
    for section in sections:
        if not isinstance(section, dict):
            continue
        heading = _heading_before_claims(section)
        if heading:
            blocks.append(f"## {heading}")
        claims = section.get("claims")
        texts = (
            [claim.get("text", "") for claim in claims if isinstance(claim, dict)] if isinstance(claims, list) else []
        )
        paragraph = " ".join(text for text in texts if isinstance(text, str) and text)
        if paragraph:
            blocks.append(paragraph)
    return "\n\n".join(blocks)


def _heading_before_claims(section: dict[str, Any]) -> str:
    """The section's heading when the model wrote it before the section's statements (text already sent cannot
    be taken back, so a heading written after them stays out of the preview; the final answer has it)."""
    for key, value in section.items():
        if key == "claims":
            return ""
        if key in ("heading", "title") and isinstance(value, str) and value.strip():
            return value
    return ""


class DraftTextStream:
    """Accumulates one call's chunks and reports the readable text that is new since the last chunk."""

    def __init__(self, reporter: ProgressReporter) -> None:
        self._reporter = reporter
        self._buffer: list[str] = []
        self._sent = ""
        self._lock = threading.Lock()

    def feed(self, chunk: str) -> None:
        with self._lock:
            self._buffer.append(chunk)
            text = draft_prose("".join(self._buffer))
            if len(text) <= len(self._sent) or not text.startswith(self._sent):
                return  # nothing new, or the model rewrote what was shown (the final answer corrects it)
            piece, self._sent = text[len(self._sent) :], text
        self._reporter.text(piece, writer="llm", mode="token")


_streams: dict[str, DraftTextStream] = {}
_streams_lock = threading.Lock()
_handler_registered = False


def _on_chunk(_source: Any, event: Any) -> None:
    task_id = getattr(event, "task_id", None)
    chunk = getattr(event, "chunk", None)
    if task_id is None or not isinstance(chunk, str) or getattr(event, "tool_call", None):
        return
    with _streams_lock:
        stream = _streams.get(str(task_id))
    if stream is not None:
        stream.feed(chunk)


def _register_handler() -> None:
    global _handler_registered
    with _streams_lock:
        if _handler_registered:
            return
        from crewai.events.event_bus import crewai_event_bus
        from crewai.events.types.llm_events import LLMStreamChunkEvent

        crewai_event_bus.on(LLMStreamChunkEvent)(_on_chunk)
        _handler_registered = True


@contextmanager
def streaming_task(task_id: str, llm: Any, reporter: ProgressReporter | None) -> Iterator[bool]:
    """While inside, ``llm`` streams this call and its text goes to ``reporter`` (a no-op without a reporter).
    Yields whether streaming is on."""
    if reporter is None:
        yield False
        return
    from crewai.llms.base_llm import call_stream_override

    _register_handler()
    with _streams_lock:
        _streams[task_id] = DraftTextStream(reporter)
    try:
        with call_stream_override(llm, True):
            yield True
    finally:
        with _streams_lock:
            _streams.pop(task_id, None)
