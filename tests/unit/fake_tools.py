"""Misbehaving retrieval tools for the Retriever's and the Tool base class's tests, built on the shipped
``researchcrew.testing.FakeTool`` (which records calls, starts and cancellations)."""

from __future__ import annotations

import asyncio
from typing import Any

from researchcrew.contracts import ContextChunk
from researchcrew.errors import FailureKind, ToolError
from researchcrew.testing.tools import FakeTool
from researchcrew.tools.base import ToolResult


class HangingTool(FakeTool):
    """Never answers (until cancelled)."""

    async def _behave(self) -> None:
        await asyncio.Event().wait()


class FailingTool(FakeTool):
    """Raises the ToolError a well-behaved tool raises for a failure it understands."""

    def __init__(self, source_type: str, kind: FailureKind, message: str, **kwargs: Any) -> None:
        super().__init__(source_type, **kwargs)
        self.kind: FailureKind = kind
        self.message = message

    async def _behave(self) -> None:
        raise ToolError(self.kind, self.message)


class BuggyTool(FakeTool):
    """A bug inside ``_search``: the base class turns it into ``internal_error``."""

    async def _behave(self) -> None:
        raise KeyError("missing field")


class StrictTool(FakeTool):
    """Takes only the standard keyword arguments, so any tool option is an invalid request."""

    async def _search(  # type: ignore[override]
        self, query: str, *, num_results: int = 5, user_id: str | None = None, session_id: str | None = None
    ) -> list[ContextChunk]:
        self.calls.append((query, {"num_results": num_results}))
        return list(self.chunks)


class BarrierTool(FakeTool):
    """Answers only once every tool sharing the barrier has started: proves the calls run concurrently."""

    def __init__(self, source_type: str, barrier: asyncio.Barrier) -> None:
        super().__init__(source_type)
        self.barrier = barrier

    async def _behave(self) -> None:
        await self.barrier.wait()


# Tools that override search() itself and misbehave in ways the base class cannot prevent ---------------------


class RaisingSearchTool(FakeTool):
    """Overrides ``search`` and raises out of it, breaking the never-raises contract."""

    async def search(self, query: str, *, timeout: float | None = None, **kwargs: Any) -> ToolResult:  # noqa: ASYNC109
        self.started += 1
        raise RuntimeError("search exploded")


class GarbageTool(FakeTool):
    """Overrides ``search`` and returns ``payload`` instead of a ToolResult."""

    def __init__(self, source_type: str, payload: Any, **kwargs: Any) -> None:
        super().__init__(source_type, **kwargs)
        self.payload = payload

    async def search(self, query: str, *, timeout: float | None = None, **kwargs: Any) -> Any:  # noqa: ASYNC109
        self.started += 1
        return self.payload


class IgnoresTimeoutTool(FakeTool):
    """Overrides ``search``, ignores ``timeout=`` and never answers: only the Retriever's guard can stop it."""

    async def search(self, query: str, *, timeout: float | None = None, **kwargs: Any) -> ToolResult:  # noqa: ASYNC109
        self.started += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        raise AssertionError("unreachable")


class StubbornTool(FakeTool):
    """Ignores ``timeout=`` and swallows its first cancellation, lingering ``linger_s`` before it answers."""

    def __init__(self, source_type: str, linger_s: float, **kwargs: Any) -> None:
        super().__init__(source_type, **kwargs)
        self.linger_s = linger_s
        self.finished = asyncio.Event()

    async def search(self, query: str, *, timeout: float | None = None, **kwargs: Any) -> ToolResult:  # noqa: ASYNC109
        self.started += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            await asyncio.sleep(self.linger_s)  # the bug: cancellation swallowed
        finally:
            self.finished.set()
        return ToolResult(tool_name=self.name, source_type=self.source_type, chunks=list(self.chunks))


class SelfCancellingTool(FakeTool):
    """Raises CancelledError although nobody cancelled it (e.g. a leaked cancellation from an inner task)."""

    async def search(self, query: str, *, timeout: float | None = None, **kwargs: Any) -> ToolResult:  # noqa: ASYNC109
        self.started += 1
        raise asyncio.CancelledError
