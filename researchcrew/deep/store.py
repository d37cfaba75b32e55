"""Deep research runs in researchcrew's database (table ``memory_deep_runs``, revision 0007).

A run is *running* while a process works on it, *awaiting_human_feedback* while paused (its crewAI Flow state and
pending-feedback context are stored with it), and then *completed*, *cancelled* or *failed*. Every transition
that two processes could race for is one conditional ``UPDATE``:

* ``submit_feedback`` stores the user's answer or plan decision only while the run waits for exactly that kind
  of feedback, for this user, and the pause has not expired;
* ``claim`` takes a paused run with its feedback for one process (status back to running, with a lease); a second
  claimer finds nothing to update. A run whose process died mid-way keeps its last pause: once its lease has run
  out it can be claimed again and resumes from that pause.

Rows are keyed by ``user_id`` like every other table, so export and forget cover them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import and_, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from researchcrew.db.failures import guarded
from researchcrew.db.models import DeepRunRow
from researchcrew.db.session import Sessions

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

RUNNING = "running"
AWAITING = "awaiting_human_feedback"
FINISHED = ("completed", "cancelled", "failed")
_TABLE: Any = DeepRunRow.__table__


class DeepRunRecord(BaseModel):
    """One stored run, as read back."""

    model_config = ConfigDict(extra="ignore")

    run_id: str = Field(description="The run's id (the Flow state's id).")
    user_id: str = Field(description="Whose run it is.")
    session_id: str = Field(description="The conversation it belongs to.")
    question: str = Field(description="The question as first asked.")
    status: str = Field(description="running, awaiting_human_feedback, completed, cancelled or failed.")
    awaiting: str | None = Field(default=None, description="clarification or plan_approval while paused.")
    state: dict[str, Any] | None = Field(default=None, description="The Flow state at the last pause (JSON).")
    pending: dict[str, Any] | None = Field(default=None, description="crewAI's pending-feedback context (JSON).")
    feedback: str | None = Field(default=None, description="The answer or decision to resume with.")
    report: dict[str, Any] | None = Field(default=None, description="The report (JSON), once completed.")
    error: str | None = Field(default=None, description="Why it failed.")
    created_at: datetime = Field(description="When it started (UTC).")
    updated_at: datetime = Field(description="Last change (UTC).")
    expires_at: datetime | None = Field(default=None, description="While paused: when the pause expires (UTC).")
    lease_until: datetime | None = Field(default=None, description="While running: until when a process owns it.")


_Method = Callable[Concatenate["DeepRunStore", P], Coroutine[Any, Any, T]]


def _guarded(operation: str) -> Callable[[_Method[P, T]], _Method[P, T]]:
    """``db.failures.guarded`` for the deep-run store: failures name "deep run store <operation>"."""
    return guarded(f"deep run store {operation}")


def _now() -> datetime:
    return datetime.now(UTC)


class DeepRunStore:
    """The repository of deep runs, on the database's engine: ``DeepRunStore(memory_store.engine)``."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._read, self._write = Sessions.of(engine)

    @_guarded("create")
    async def create(self, *, run_id: str, user_id: str, session_id: str, question: str, lease_until: datetime) -> None:
        now = _now()
        async with self._write.begin() as session:
            await session.execute(
                insert(DeepRunRow).values(
                    run_id=run_id,
                    user_id=user_id,
                    session_id=session_id,
                    question=question,
                    status=RUNNING,
                    created_at=now,
                    updated_at=now,
                    lease_until=lease_until,
                )
            )

    @_guarded("get")
    async def get(self, run_id: str) -> DeepRunRecord | None:
        async with self._read() as session:
            row = (await session.execute(select(_TABLE).where(_TABLE.c.run_id == run_id))).first()
        return DeepRunRecord.model_validate(dict(row._mapping)) if row is not None else None

    @_guarded("list")
    async def of_user(self, user_id: str, *, limit: int = 50) -> list[DeepRunRecord]:
        """The user's runs, newest first."""
        stmt = select(_TABLE).where(_TABLE.c.user_id == user_id).order_by(_TABLE.c.created_at.desc()).limit(limit)
        async with self._read() as session:
            rows = (await session.execute(stmt)).all()
        return [DeepRunRecord.model_validate(dict(row._mapping)) for row in rows]

    @_guarded("pause")
    async def pause(
        self, run_id: str, *, state: dict[str, Any], pending: dict[str, Any], awaiting: str, expires_at: datetime
    ) -> None:
        """Store the pause: the run now waits for ``awaiting`` until ``expires_at``."""
        await self._set(
            run_id,
            status=AWAITING,
            awaiting=awaiting,
            state=state,
            pending=pending,
            feedback=None,
            expires_at=expires_at,
            lease_until=None,
        )

    @_guarded("submit_feedback")
    async def submit_feedback(self, run_id: str, *, user_id: str, awaiting: str, feedback: str) -> bool:
        """Store the answer or decision while the run waits for it (this user, that kind, pause not expired).
        False when the run was not in that state any more (another process was quicker, or it expired)."""
        now = _now()
        stmt = (
            update(_TABLE)
            .where(
                _TABLE.c.run_id == run_id,
                _TABLE.c.user_id == user_id,
                _TABLE.c.status == AWAITING,
                _TABLE.c.awaiting == awaiting,
                _TABLE.c.expires_at > now,
            )
            .values(feedback=feedback, updated_at=now)
        )
        async with self._write.begin() as session:
            return int((await session.execute(stmt)).rowcount) == 1  # type: ignore[attr-defined]

    @_guarded("claim")
    async def claim(self, run_id: str, *, user_id: str, lease_until: datetime) -> bool:
        """Take a paused run that has its feedback, for this process (or one whose previous owner died: status
        running, lease run out). True when this call got it."""
        now = _now()
        stmt = (
            update(_TABLE)
            .where(
                _TABLE.c.run_id == run_id,
                _TABLE.c.user_id == user_id,
                _TABLE.c.feedback.is_not(None),
                _TABLE.c.pending.is_not(None),
                _TABLE.c.expires_at > now,
                or_(
                    _TABLE.c.status == AWAITING,
                    and_(_TABLE.c.status == RUNNING, _TABLE.c.lease_until < now),
                ),
            )
            .values(status=RUNNING, lease_until=lease_until, updated_at=now)
        )
        async with self._write.begin() as session:
            return int((await session.execute(stmt)).rowcount) == 1  # type: ignore[attr-defined]

    @_guarded("cancel")
    async def cancel(self, run_id: str, *, user_id: str) -> bool:
        """Cancel a paused run of this user (not one a process is working on). True when this call did."""
        stmt = (
            update(_TABLE)
            .where(_TABLE.c.run_id == run_id, _TABLE.c.user_id == user_id, _TABLE.c.status == AWAITING)
            .values(
                status="cancelled",
                awaiting=None,
                state=None,
                pending=None,
                feedback=None,
                expires_at=None,
                lease_until=None,
                updated_at=_now(),
            )
        )
        async with self._write.begin() as session:
            return int((await session.execute(stmt)).rowcount) == 1  # type: ignore[attr-defined]

    @_guarded("finish")
    async def finish(
        self, run_id: str, *, status: str, report: dict[str, Any] | None = None, error: str | None = None
    ) -> None:
        """The run ended: completed (with its report), cancelled or failed (with the reason). The pause's state
        is dropped; the report stays."""
        if status not in FINISHED:
            raise ValueError(f"a run finishes as one of {FINISHED}, not {status!r}")
        await self._set(
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

    async def _set(self, run_id: str, **values: Any) -> None:
        async with self._write.begin() as session:
            await session.execute(update(_TABLE).where(_TABLE.c.run_id == run_id).values(updated_at=_now(), **values))
