"""Progress notifications and elicitation: the two ways the MCP door talks to the client while a tool runs.

The pipeline reports progress through a plain callback (``on_event``), called from inside the research; MCP progress
is an async notification. ``ProgressRelay`` bridges them with a queue and one sender, so notifications leave in the
order the events happened and their ``progress`` counts up by one each (the spec asks it to increase). A client that
sent no ``progressToken`` gets none (``Context.report_progress`` drops them).

``research`` asks the user through elicitation (``elicitation/create``) only when the client declared the
capability in ``initialize``; otherwise it does not ask and the run approves its own plan.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from types import TracebackType
from typing import Any

import anyio
from mcp.server.fastmcp import Context
from pydantic import BaseModel, Field

from researchcrew.contracts.deep import DeepProgressEvent, DeepRun
from researchcrew.contracts.progress import ProgressEvent

logger = logging.getLogger(__name__)

_DRAIN_S = 5.0  # at the end of a tool call, notifications still queued get this long to leave


class ProgressRelay:
    """Sends each reported step as an MCP progress notification, in order. Use as ``async with``."""

    def __init__(self, ctx: Context[Any, Any, Any]) -> None:
        self._ctx = ctx
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._sender: asyncio.Task[None] | None = None
        self.sent = 0

    def step(self, message: str) -> None:
        """Report one step (callable from synchronous callbacks)."""
        self._queue.put_nowait(message)

    def stage(self, event: ProgressEvent) -> None:
        """A question's stage or source event (answer text pieces are not progress)."""
        if event.kind == "text":
            return
        if event.kind == "source" and event.source is not None:
            self.step(f"source {event.source.source_type}: {event.source.status}")
        else:
            self.step(f"{event.stage} {event.status}")

    def deep(self, event: DeepProgressEvent) -> None:
        """A deep run's phase event (its answer text pieces are not progress)."""
        if event.status == "text":
            return
        where = f" (sub-question {event.sub_question})" if event.sub_question is not None else ""
        self.step(f"{event.phase} {event.status}{where}")

    async def _send(self) -> None:
        while (message := await self._queue.get()) is not None:
            self.sent += 1
            try:
                await self._ctx.report_progress(self.sent, None, message)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError) as error:  # the client went away
                logger.debug("progress notification not sent: %r", error)

    async def __aenter__(self) -> ProgressRelay:
        self._sender = asyncio.create_task(self._send())
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._queue.put_nowait(None)
        if self._sender is None:
            return
        if exc is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._sender), _DRAIN_S)
        if not self._sender.done():
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender


def can_elicit(ctx: Context[Any, Any, Any]) -> bool:
    """Whether the client declared the elicitation capability when it connected."""
    params = ctx.session.client_params
    return params is not None and params.capabilities.elicitation is not None


class PlanApproval(BaseModel):
    """What the user answers to a proposed plan (elicitation schemas hold primitive fields only)."""

    approve: bool = Field(default=True, description="Research this plan; false cancels the run.")
    leave_out: str = Field(
        default="", max_length=200, description="Numbers of plan items to leave out, comma-separated (e.g. 2, 4)."
    )

    def items_left_out(self) -> list[int]:
        parts = [part.strip() for part in self.leave_out.replace(";", ",").split(",") if part.strip()]
        if not all(part.isdigit() for part in parts):
            raise ValueError(f"leave_out must be plan item numbers separated by commas, got {self.leave_out!r}")
        return [int(part) for part in parts]


class ClarificationReply(BaseModel):
    """The user's answer to a deep run's clarifying questions."""

    answer: str = Field(
        min_length=1, max_length=2_000, description='Your answer; "just answer" researches the question as asked.'
    )


def plan_message(run: DeepRun) -> str:
    lines = [f"Research plan for: {run.question}"]
    lines += [f"{item.id}. {item.question}" for item in (run.plan.items if run.plan else [])]
    lines.append("Approve it, or name items to leave out.")
    return "\n".join(lines)


def clarification_message(run: DeepRun) -> str:
    lines = [f"Before researching {run.question!r}:"]
    for question in run.clarification.questions if run.clarification else []:
        options = f" (e.g. {', '.join(question.options[:4])})" if question.options else ""
        lines.append(f"- {question.question}{options}")
    return "\n".join(lines)
