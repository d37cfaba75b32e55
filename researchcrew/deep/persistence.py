"""Where paused deep runs live: crewAI's ``FlowPersistence`` for the deep Flow, durable in the memory database.

crewAI saves a paused Flow through ``FlowPersistence.save_pending_feedback`` and restores it through
``load_pending_feedback`` (``Flow.from_pending``). Those methods are synchronous and crewAI calls them on the event
loop's thread, where database I/O would block every other request of the process. So ``StagedFlowPersistence``
keeps them in memory for the moment of the call, and the runner moves them to and from the database
asynchronously right around crewAI's calls: ``take_pause`` after ``kickoff_async``/``resume_async`` returned a
pause (then ``DeepRuns.pause`` writes it), ``stage`` before ``from_pending`` (with what ``DeepRuns.get`` read).
The durable copy is the database's ``memory_deep_runs`` row (``researchcrew.deep.store``) — on
PostgreSQL shared by every process, so any of them can resume a run, also after a restart.

``DeepRuns`` is what the runner needs of that table; ``InProcessDeepRuns`` implements it in memory for runtimes
without a memory store (``remember=False``): such runs pause and resume within the process only.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, Protocol

from crewai.flow.async_feedback.types import PendingFeedbackContext
from crewai.flow.persistence.base import FlowPersistence
from pydantic import BaseModel, PrivateAttr

from researchcrew.deep.store import AWAITING, FINISHED, RUNNING, DeepRunRecord


class StagedFlowPersistence(FlowPersistence):
    """crewAI's persistence interface for one deep run at a time, staged in memory (see the module docstring)."""

    persistence_type: str = "researchcrew-memory-store"
    _paused: dict[str, tuple[dict[str, Any], PendingFeedbackContext]] = PrivateAttr(default_factory=dict)
    _staged: dict[str, tuple[dict[str, Any], PendingFeedbackContext]] = PrivateAttr(default_factory=dict)
    _states: dict[str, dict[str, Any]] = PrivateAttr(default_factory=dict)

    def init_db(self) -> None:
        """Nothing to create: the memory store migrates its schema when it opens."""

    def save_state(self, flow_uuid: str, method_name: str, state_data: dict[str, Any] | BaseModel) -> None:
        self._states[flow_uuid] = _as_dict(state_data)

    def load_state(self, flow_uuid: str) -> dict[str, Any] | None:
        return self._states.get(flow_uuid)

    def save_pending_feedback(
        self, flow_uuid: str, context: PendingFeedbackContext, state_data: dict[str, Any] | BaseModel
    ) -> None:
        self._paused[flow_uuid] = (_as_dict(state_data), context)

    def load_pending_feedback(self, flow_uuid: str) -> tuple[dict[str, Any], PendingFeedbackContext] | None:
        return self._staged.get(flow_uuid)

    def clear_pending_feedback(self, flow_uuid: str) -> None:
        self._staged.pop(flow_uuid, None)

    # The runner's side ---------------------------------------------------------------------------------------------
    def take_pause(self, flow_uuid: str) -> tuple[dict[str, Any], PendingFeedbackContext] | None:
        """The pause crewAI just saved (state as crewAI dumped it, context), removed from the stage."""
        return self._paused.pop(flow_uuid, None)

    def stage(self, flow_uuid: str, state: dict[str, Any], context: PendingFeedbackContext) -> None:
        """Put a stored pause where ``Flow.from_pending`` will look for it."""
        self._staged[flow_uuid] = (state, context)


def _as_dict(state_data: dict[str, Any] | BaseModel) -> dict[str, Any]:
    return state_data.model_dump() if isinstance(state_data, BaseModel) else dict(state_data)


class DeepRuns(Protocol):
    """The deep runs table, as the runner uses it (``deep/store.DeepRunStore`` implements it)."""

    async def create(
        self, *, run_id: str, user_id: str, session_id: str, question: str, lease_until: datetime
    ) -> None: ...

    async def get(self, run_id: str) -> DeepRunRecord | None: ...

    async def of_user(self, user_id: str, *, limit: int = 50) -> list[DeepRunRecord]: ...

    async def pause(
        self, run_id: str, *, state: dict[str, Any], pending: dict[str, Any], awaiting: str, expires_at: datetime
    ) -> None: ...

    async def submit_feedback(self, run_id: str, *, user_id: str, awaiting: str, feedback: str) -> bool: ...

    async def claim(self, run_id: str, *, user_id: str, lease_until: datetime) -> bool: ...

    async def cancel(self, run_id: str, *, user_id: str) -> bool: ...

    async def finish(
        self, run_id: str, *, status: str, report: dict[str, Any] | None = None, error: str | None = None
    ) -> None: ...


class InProcessDeepRuns:
    """``DeepRuns`` in this process's memory, with the same state rules as the database table."""

    def __init__(self) -> None:
        self._rows: dict[str, DeepRunRecord] = {}
        self._lock = asyncio.Lock()

    async def create(self, *, run_id: str, user_id: str, session_id: str, question: str, lease_until: datetime) -> None:
        now = datetime.now(UTC)
        async with self._lock:
            if run_id in self._rows:
                raise ValueError(f"deep run {run_id} exists already")
            self._rows[run_id] = DeepRunRecord(
                run_id=run_id,
                user_id=user_id,
                session_id=session_id,
                question=question,
                status=RUNNING,
                created_at=now,
                updated_at=now,
                lease_until=lease_until,
            )

    async def get(self, run_id: str) -> DeepRunRecord | None:
        row = self._rows.get(run_id)
        return row.model_copy(deep=True) if row is not None else None

    async def of_user(self, user_id: str, *, limit: int = 50) -> list[DeepRunRecord]:
        """The user's runs, newest first."""
        rows = sorted((r for r in self._rows.values() if r.user_id == user_id), key=lambda r: r.created_at)
        return [row.model_copy(deep=True) for row in reversed(rows)][:limit]

    async def _update(self, run_id: str, **values: Any) -> None:
        row = self._rows[run_id]
        self._rows[run_id] = row.model_copy(update={**values, "updated_at": datetime.now(UTC)})

    async def pause(
        self, run_id: str, *, state: dict[str, Any], pending: dict[str, Any], awaiting: str, expires_at: datetime
    ) -> None:
        async with self._lock:
            await self._update(
                run_id,
                status=AWAITING,
                awaiting=awaiting,
                state=state,
                pending=pending,
                feedback=None,
                expires_at=expires_at,
                lease_until=None,
            )

    async def submit_feedback(self, run_id: str, *, user_id: str, awaiting: str, feedback: str) -> bool:
        async with self._lock:
            row = self._rows.get(run_id)
            now = datetime.now(UTC)
            if (
                row is None
                or row.user_id != user_id
                or row.status != AWAITING
                or row.awaiting != awaiting
                or row.expires_at is None
                or row.expires_at <= now
            ):
                return False
            await self._update(run_id, feedback=feedback)
            return True

    async def claim(self, run_id: str, *, user_id: str, lease_until: datetime) -> bool:
        async with self._lock:
            row = self._rows.get(run_id)
            now = datetime.now(UTC)
            if row is None or row.user_id != user_id or row.feedback is None or row.pending is None:
                return False
            if row.expires_at is None or row.expires_at <= now:
                return False
            crashed = row.status == RUNNING and row.lease_until is not None and row.lease_until < now
            if row.status != AWAITING and not crashed:
                return False
            await self._update(run_id, status=RUNNING, lease_until=lease_until)
            return True

    async def cancel(self, run_id: str, *, user_id: str) -> bool:
        async with self._lock:
            row = self._rows.get(run_id)
            if row is None or row.user_id != user_id or row.status != AWAITING:
                return False
            await self._update(
                run_id, status="cancelled", awaiting=None, state=None, pending=None, feedback=None, expires_at=None
            )
            return True

    async def finish(
        self, run_id: str, *, status: str, report: dict[str, Any] | None = None, error: str | None = None
    ) -> None:
        if status not in FINISHED:
            raise ValueError(f"a run finishes as one of {FINISHED}, not {status!r}")
        async with self._lock:
            await self._update(
                run_id,
                status=status,
                awaiting=None,
                state=None,
                pending=None,
                feedback=None,
                report=report,
                error=error,
                expires_at=None,
                lease_until=None,
            )
