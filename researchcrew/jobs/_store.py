"""``JobStore``: jobs, runs and per-question results in the memory database (SQLite or PostgreSQL).

It stands on the runtime's memory store (its engine; no second connection pool) and holds the guarantees:

* **one result per question**: a question is researched by whoever holds its *lease* (``claim_item``: an atomic
  UPDATE that only succeeds on a pending question, or on one whose lease ran out — its worker died), and its
  result is written only while that lease is still the writer's (``finish_item`` is fenced on ``lease_owner``,
  a token drawn per claim). A redelivered question finds its row answered and does nothing; a second worker whose
  copy arrived early waits for the first one's lease instead of working in parallel.
* **nothing stuck after a crash**: a lease names its holder process (``jobs/_leases.py``); ``reclaim_dead_leases``
  gives back at once the questions of a holder on this host that is provably dead, and ``release_expired`` those
  whose lease ran out, each with a conditional UPDATE on the claim's token, so exactly one sweeper re-sends it.
* **one run per schedule slot**: ``create_run`` inserts ``(job_id, slot_key)`` under a unique constraint.
* **one finisher per run**: ``finalize_run`` moves a run to its final status with a conditional UPDATE, so exactly
  one caller learns that it ended the run (and sends its webhook).

Times are the writers' clocks (UTC); leases are long enough (``settings.jobs.lease_s``) that ordinary clock skew
between machines does not matter.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

from sqlalchemy import ColumnElement, and_, delete, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from researchcrew.contracts.cost import AnswerCost
from researchcrew.contracts.synthesizer import FinalResponse
from researchcrew.db.failures import guarded
from researchcrew.db.job_tables import JobRow, RunItemRow, RunRow
from researchcrew.db.session import Sessions
from researchcrew.errors import JobConflictError, JobNotFoundError
from researchcrew.jobs._leases import LeaseHolder, this_process
from researchcrew.jobs._schedule import next_slot, slot_key
from researchcrew.jobs.contracts import (
    FINISHED_ITEM_STATUSES,
    CreatedJob,
    ItemFailure,
    JobInfo,
    JobSpec,
    QuestionOptions,
    QuestionResult,
    RunCounts,
    RunInfo,
    Schedule,
    SourceFailureCount,
)

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")
ACTIVE_RUN_STATUSES = ("queued", "running")


def _now() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    return uuid.uuid4().hex


@dataclass
class ItemOutcome:
    """What researching one question produced, as it is stored."""

    status: Literal["answered", "uncertain", "failed"]
    response: FinalResponse | None = None
    failure: ItemFailure | None = None
    sources_failed: list[dict[str, str]] = field(default_factory=list)

    def values(self) -> dict[str, Any]:
        response = self.response
        return {
            "status": self.status,
            "response": response.model_dump(mode="json") if response is not None else None,
            "failure": self.failure.model_dump(mode="json") if self.failure is not None else None,
            "confidence_level": response.confidence_level if response is not None else None,
            "citation_count": len(response.citations) if response is not None else 0,
            "sources_used": _sources_used(response),
            "sources_failed": self.sources_failed,
        }


@dataclass(frozen=True)
class Claim:
    """The answer to "may I research this question now?"."""

    state: Literal["claimed", "finished", "busy", "missing"]
    item: RunItemRow | None = None  # when claimed
    lease_until: datetime | None = None  # when busy: until when the other holder's lease runs


@dataclass(frozen=True)
class Reclaimed:
    """A question given back by a sweep (pending again): which run, which question, and how the run executes."""

    run_id: str
    index: int
    executor: str


_NO_LEASE: dict[str, Any] = {
    "lease_owner": None,
    "lease_until": None,
    "lease_host": None,
    "lease_pid": None,
    "lease_boot": None,
    "lease_process": None,
}


@dataclass(frozen=True)
class ScheduledJob:
    """What a scheduler needs of one scheduled job."""

    job_id: str
    owner: str
    cron: str
    timezone: str
    created_at: datetime


_Method = Callable[Concatenate["JobStore", P], Coroutine[Any, Any, T]]


def _guarded(operation: str) -> Callable[[_Method[P, T]], _Method[P, T]]:
    """``db.failures.guarded`` for the job store: failures name "job store <operation>" (job errors pass through)."""
    return guarded(f"job store {operation}")


def _leased_to(run_id: str, index: int, worker: str) -> tuple[ColumnElement[bool], ...]:
    """The conditions of every write that only the question's lease holder may make (renew, give back, store)."""
    return (
        RunItemRow.run_id == run_id,
        RunItemRow.idx == index,
        RunItemRow.status == "running",
        RunItemRow.lease_owner == worker,
    )


class JobStore:
    """Jobs, runs and results of every user; every user-facing read is filtered by owner."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._read, self._write = Sessions.of(engine)

    # Jobs -------------------------------------------------------------------------------------------------------
    @_guarded("create_job")
    async def create_job(self, owner: str, spec: JobSpec) -> CreatedJob:
        secret = secrets.token_urlsafe(32) if spec.webhook_url is not None else None
        row = JobRow(
            id=new_id(),
            owner=owner,
            name=spec.name,
            created_at=_now(),
            source=spec.source,
            questions=[question.model_dump(mode="json", exclude_none=True) for question in spec.questions],
            columns=list(spec.columns),
            options=spec.options.given(),
            schedule_cron=spec.schedule.cron if spec.schedule else None,
            schedule_tz=spec.schedule.timezone if spec.schedule else None,
            webhook_url=str(spec.webhook_url) if spec.webhook_url is not None else None,
            webhook_secret=secret,
            remember=spec.remember,
        )
        try:
            async with self._write.begin() as session:
                session.add(row)
        except IntegrityError:
            raise JobConflictError(
                f"a job named {spec.name!r} exists already; remove it first or pick another name"
            ) from None
        return CreatedJob(job=_job_info(row), webhook_secret=secret)

    @_guarded("list_jobs")
    async def list_jobs(self, owner: str) -> list[JobInfo]:
        async with self._read() as session:
            rows = (await session.execute(select(JobRow).where(JobRow.owner == owner).order_by(JobRow.name))).scalars()
            return [_job_info(row) for row in rows]

    @_guarded("get_job")
    async def job_row(self, owner: str, ref: str) -> JobRow:
        """The owner's job named (or with id) ``ref``."""
        async with self._read() as session:
            stmt = select(JobRow).where(JobRow.owner == owner, or_(JobRow.name == ref, JobRow.id == ref))
            row = (await session.execute(stmt)).scalars().first()
        if row is None:
            raise JobNotFoundError(f"no job {ref!r} for user {owner!r}")
        return row

    async def get_job(self, owner: str, ref: str) -> JobInfo:
        return _job_info(await self.job_row(owner, ref))

    @_guarded("job_by_id")
    async def job_by_id(self, job_id: str) -> JobRow | None:
        async with self._read() as session:
            return await session.get(JobRow, job_id)

    @_guarded("delete_job")
    async def delete_job(self, owner: str, ref: str) -> JobInfo:
        """Delete a job with its runs and results (a run in progress stops: its questions are gone)."""
        row = await self.job_row(owner, ref)
        async with self._write.begin() as session:
            await session.execute(delete(JobRow).where(JobRow.id == row.id, JobRow.owner == owner))
        return _job_info(row)

    @_guarded("scheduled_jobs")
    async def scheduled_jobs(self) -> list[ScheduledJob]:
        async with self._read() as session:
            stmt = select(JobRow.id, JobRow.owner, JobRow.schedule_cron, JobRow.schedule_tz, JobRow.created_at).where(
                JobRow.schedule_cron.is_not(None)
            )
            return [
                ScheduledJob(job_id, owner, cron or "", tz or "UTC", created)
                for job_id, owner, cron, tz, created in (await session.execute(stmt)).all()
            ]

    @_guarded("slots_run")
    async def slots_run(self, job_slots: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which of the (job id, slot key) pairs already have a run."""
        if not job_slots:
            return set()
        job_ids = sorted({job_id for job_id, _ in job_slots})
        keys = sorted({key for _, key in job_slots})
        async with self._read() as session:
            stmt = select(RunRow.job_id, RunRow.slot_key).where(RunRow.job_id.in_(job_ids), RunRow.slot_key.in_(keys))
            return {(job_id, key) for job_id, key in (await session.execute(stmt)).all() if key is not None}

    # Runs -------------------------------------------------------------------------------------------------------
    @_guarded("create_run")
    async def create_run(
        self,
        job: JobRow,
        *,
        trigger: str,
        executor: str,
        slot: datetime | None = None,
    ) -> tuple[str, bool]:
        """A new run of ``job`` with one pending row per question; for a slot, the run that slot already has
        (``created`` False) if another scheduler or a redelivery created it first. Returns (run id, created)."""
        key = slot_key(slot) if slot is not None else None
        run_id = new_id()
        defaults = QuestionOptions.model_validate(job.options)
        items = []
        for index, question in enumerate(job.questions):
            options = QuestionOptions.model_validate(question.get("options", {})).over(defaults)
            items.append(
                {
                    "run_id": run_id,
                    "idx": index,
                    "question": question["question"],
                    "options": options.given(),
                    "carried": question.get("carried", {}),
                    "status": "pending",
                    "attempts": 0,
                    "citation_count": 0,
                    "sources_used": [],
                    "sources_failed": [],
                }
            )
        run = RunRow(
            id=run_id,
            job_id=job.id,
            owner=job.owner,
            trigger=trigger,
            slot_key=key,
            slot_at=slot,
            executor=executor,
            status="queued",
            total=len(items),
            created_at=_now(),
            webhook_state="pending" if job.webhook_url else "none",
            webhook_attempts=0,
        )
        try:
            async with self._write.begin() as session:
                session.add(run)
                await session.flush()
                if items:
                    await session.execute(insert(RunItemRow), items)
        except IntegrityError:
            if key is None:
                raise
            async with self._read() as session:
                stmt = select(RunRow.id).where(RunRow.job_id == job.id, RunRow.slot_key == key)
                existing = (await session.execute(stmt)).scalar_one_or_none()
            if existing is None:
                raise
            return existing, False
        return run_id, True

    @_guarded("run_row")
    async def run_row(self, run_id: str, *, owner: str | None = None) -> RunRow:
        async with self._read() as session:
            row = await session.get(RunRow, run_id)
        if row is None or (owner is not None and row.owner != owner):
            raise JobNotFoundError(f"no run {run_id!r}" + (f" for user {owner!r}" if owner is not None else ""))
        return row

    async def get_run(self, run_id: str, *, owner: str | None = None) -> RunInfo:
        row = await self.run_row(run_id, owner=owner)
        return await self._run_info(row)

    @_guarded("list_runs")
    async def list_runs(self, owner: str, job_id: str | None = None, *, limit: int = 50) -> list[RunInfo]:
        async with self._read() as session:
            stmt = select(RunRow).where(RunRow.owner == owner)
            if job_id is not None:
                stmt = stmt.where(RunRow.job_id == job_id)
            stmt = stmt.order_by(RunRow.created_at.desc(), RunRow.id).limit(limit)
            rows = list((await session.execute(stmt)).scalars())
        return [await self._run_info(row) for row in rows]

    @_guarded("previous_run")
    async def previous_run(self, run: RunRow) -> RunRow | None:
        """The job's last finished run created before ``run`` (what "new since the previous run" compares to)."""
        async with self._read() as session:
            stmt = (
                select(RunRow)
                .where(
                    RunRow.job_id == run.job_id,
                    RunRow.id != run.id,
                    RunRow.created_at <= run.created_at,
                    RunRow.status.in_(("completed", "partial")),
                )
                .order_by(RunRow.created_at.desc())
                .limit(1)
            )
            return (await session.execute(stmt)).scalars().first()

    @_guarded("unfinished_runs")
    async def unfinished_runs(self, executor: str) -> list[str]:
        async with self._read() as session:
            stmt = select(RunRow.id).where(RunRow.executor == executor, RunRow.status.in_(ACTIVE_RUN_STATUSES))
            return list((await session.execute(stmt.order_by(RunRow.created_at))).scalars())

    @_guarded("claim_dispatch")
    async def claim_dispatch(self, run_id: str, lease_s: float, *, force: bool = False) -> bool:
        """Whether this caller should send the run's question messages now: True for exactly one caller while
        none has finished doing so (a dispatcher that died loses its claim after ``lease_s``). ``force`` claims
        even a dispatched run (an operator's resume)."""
        now = _now()
        conditions = [RunRow.id == run_id, RunRow.status.in_(ACTIVE_RUN_STATUSES)]
        if not force:
            conditions += [
                RunRow.dispatched_at.is_(None),
                or_(RunRow.dispatch_until.is_(None), RunRow.dispatch_until < now),
            ]
        async with self._write.begin() as session:
            claimed = await session.execute(
                update(RunRow).where(*conditions).values(dispatch_until=now + timedelta(seconds=lease_s))
            )
            return bool(claimed.rowcount == 1)  # type: ignore[attr-defined]

    @_guarded("mark_dispatched")
    async def mark_dispatched(self, run_id: str) -> None:
        async with self._write.begin() as session:
            await session.execute(update(RunRow).where(RunRow.id == run_id).values(dispatched_at=_now()))

    @_guarded("open_items")
    async def open_items(self, run_id: str) -> list[int]:
        """Indexes of the questions of a run still to be researched (pending, or running under a lease that ran
        out), in order."""
        now = _now()
        async with self._read() as session:
            stmt = select(RunItemRow.idx).where(
                RunItemRow.run_id == run_id,
                or_(
                    RunItemRow.status == "pending",
                    and_(RunItemRow.status == "running", RunItemRow.lease_until < now),
                ),
            )
            return sorted((await session.execute(stmt)).scalars())

    @_guarded("cancel_run")
    async def cancel_run(self, run_id: str, *, owner: str | None = None) -> RunInfo:
        """Stop the questions not yet started; those being researched finish. A finished run is a conflict."""
        row = await self.run_row(run_id, owner=owner)
        if row.status not in ACTIVE_RUN_STATUSES:
            raise JobConflictError(f"run {run_id} has finished already ({row.status}); nothing to cancel")
        now = _now()
        async with self._write.begin() as session:
            await session.execute(update(RunRow).where(RunRow.id == run_id).values(cancel_requested_at=now))
            await session.execute(
                update(RunItemRow)
                .where(RunItemRow.run_id == run_id, RunItemRow.status == "pending")
                .values(
                    status="cancelled",
                    finished_at=now,
                    failure=ItemFailure(kind="cancelled", message="the run was cancelled").model_dump(),
                )
            )
        await self.finalize_run(run_id)
        return await self.get_run(run_id)

    # Questions --------------------------------------------------------------------------------------------------
    @_guarded("claim_item")
    async def claim_item(
        self, run_id: str, index: int, worker: str, lease_s: float, *, holder: LeaseHolder | None = None
    ) -> Claim:
        """Lease a question to ``worker`` (a token of this claim) for ``lease_s``, recording ``holder`` (this
        process unless given) so that a process on its host can tell when it died."""
        holder = holder or this_process()
        now = _now()
        async with self._write.begin() as session:
            claimed = await session.execute(
                update(RunItemRow)
                .where(
                    RunItemRow.run_id == run_id,
                    RunItemRow.idx == index,
                    or_(
                        RunItemRow.status == "pending",
                        and_(RunItemRow.status == "running", RunItemRow.lease_until < now),
                    ),
                )
                .values(
                    status="running",
                    lease_owner=worker,
                    lease_until=now + timedelta(seconds=lease_s),
                    lease_host=holder.host,
                    lease_pid=holder.pid,
                    lease_boot=holder.boot,
                    lease_process=holder.process,
                    attempts=RunItemRow.attempts + 1,
                    started_at=now,
                )
            )
            if claimed.rowcount == 1:  # type: ignore[attr-defined]
                await session.execute(
                    update(RunRow)
                    .where(RunRow.id == run_id, RunRow.status == "queued")
                    .values(status="running", started_at=now)
                )
                item = await session.get(RunItemRow, (run_id, index))
                return Claim("claimed", item=item)
            item = await session.get(RunItemRow, (run_id, index))
        if item is None:
            return Claim("missing")
        if item.status in FINISHED_ITEM_STATUSES:
            return Claim("finished")
        return Claim("busy", lease_until=item.lease_until)

    @_guarded("renew_lease")
    async def renew_lease(self, run_id: str, index: int, worker: str, lease_s: float) -> bool:
        """Extend the lease; False when it is no longer ``worker``'s (it ran out and was taken over)."""
        async with self._write.begin() as session:
            renewed = await session.execute(
                update(RunItemRow)
                .where(*_leased_to(run_id, index, worker))
                .values(lease_until=_now() + timedelta(seconds=lease_s))
            )
            return bool(renewed.rowcount == 1)  # type: ignore[attr-defined]

    @_guarded("release_item")
    async def release_item(self, run_id: str, index: int, worker: str) -> None:
        """Give a question back (this process is stopping): pending again, for the next worker or restart."""
        async with self._write.begin() as session:
            await session.execute(
                update(RunItemRow).where(*_leased_to(run_id, index, worker)).values(status="pending", **_NO_LEASE)
            )

    @_guarded("reclaim_dead_leases")
    async def reclaim_dead_leases(self, me: LeaseHolder | None = None) -> list[Reclaimed]:
        """Give back (pending again) the questions leased by processes of this host that are provably dead
        (``LeaseHolder.outlived``): at start-up, and on every sweep, so that nobody waits for their leases."""
        me = me or this_process()
        async with self._read() as session:
            holders_stmt = (
                select(RunItemRow.lease_pid, RunItemRow.lease_boot, RunItemRow.lease_process)
                .where(
                    RunItemRow.status == "running",
                    RunItemRow.lease_host == me.host,
                    RunItemRow.lease_process.is_not(None),
                    RunItemRow.lease_process != me.process,
                )
                .distinct()
            )
            holders = (await session.execute(holders_stmt)).all()
            dead = [process for pid, boot, process in holders if me.outlived(pid, boot, process)]
            if not dead:
                return []
            stmt = (
                select(RunItemRow.run_id, RunItemRow.idx, RunItemRow.lease_owner, RunRow.executor)
                .join(RunRow, RunRow.id == RunItemRow.run_id)
                .where(RunItemRow.status == "running", RunItemRow.lease_process.in_(dead))
            )
            held = (await session.execute(stmt)).all()
        reclaimed = await self._give_back(held)
        if reclaimed:
            logger.warning(
                "took back %d question(s) leased by %d dead process(es) of this host", len(reclaimed), len(dead)
            )
        return reclaimed

    @_guarded("release_expired")
    async def release_expired(self, executor: str | None = None, *, limit: int = 500) -> list[Reclaimed]:
        """Give back (pending again) the questions whose lease ran out — their holder died or lost touch —
        of runs executed by ``executor`` (any when None)."""
        async with self._read() as session:
            stmt = (
                select(RunItemRow.run_id, RunItemRow.idx, RunItemRow.lease_owner, RunRow.executor)
                .join(RunRow, RunRow.id == RunItemRow.run_id)
                .where(RunItemRow.status == "running", RunItemRow.lease_until < _now())
            )
            if executor is not None:
                stmt = stmt.where(RunRow.executor == executor)
            held = (await session.execute(stmt.limit(limit))).all()
        reclaimed = await self._give_back(held, expired=True)
        if reclaimed:
            logger.warning("took back %d question(s) whose lease ran out", len(reclaimed))
        return reclaimed

    async def _give_back(self, held: Sequence[Any], *, expired: bool = False) -> list[Reclaimed]:
        """Each (run, index, lease token, executor) pending again if that lease still holds it: one UPDATE per
        question, fenced on the token, so that of several sweepers exactly one gives each question back."""
        reclaimed = []
        for run_id, index, owner, executor in held:
            conditions = [
                RunItemRow.run_id == run_id,
                RunItemRow.idx == index,
                RunItemRow.status == "running",
                RunItemRow.lease_owner.is_(None) if owner is None else RunItemRow.lease_owner == owner,
            ]
            if expired:
                conditions.append(RunItemRow.lease_until < _now())
            async with self._write.begin() as session:
                given = await session.execute(
                    update(RunItemRow).where(*conditions).values(status="pending", **_NO_LEASE)
                )
            if given.rowcount == 1:  # type: ignore[attr-defined]
                reclaimed.append(Reclaimed(run_id, index, executor))
        return reclaimed

    @_guarded("finish_item")
    async def finish_item(self, run_id: str, index: int, worker: str, outcome: ItemOutcome) -> bool:
        """Store the one result of a question; False (nothing written) when ``worker`` lost its lease."""
        async with self._write.begin() as session:
            stored = await session.execute(
                update(RunItemRow)
                .where(*_leased_to(run_id, index, worker))
                .values(
                    **outcome.values(),
                    finished_at=_now(),
                    answered_by=worker.rsplit(":", 1)[0],
                    **_NO_LEASE,
                )
            )
            return bool(stored.rowcount == 1)  # type: ignore[attr-defined]

    @_guarded("finalize_run")
    async def finalize_run(self, run_id: str) -> RunInfo | None:
        """If every question has ended, give the run its final status; the RunInfo when *this* call did it."""
        async with self._read() as session:
            open_stmt = select(RunItemRow.idx).where(
                RunItemRow.run_id == run_id, RunItemRow.status.in_(("pending", "running"))
            )
            if (await session.execute(open_stmt.limit(1))).first() is not None:
                return None  # the common case, answered by one indexed lookup
            counts = await _counts(session, run_id)
            run = await session.get(RunRow, run_id)
        if run is None or counts.pending or counts.running or run.status not in ACTIVE_RUN_STATUSES:
            return None
        if run.cancel_requested_at is not None:
            status = "cancelled"
        elif counts.failed == 0:
            status = "completed"
        elif counts.answered + counts.uncertain == 0:
            status = "failed"
        else:
            status = "partial"
        async with self._write.begin() as session:
            ended = await session.execute(
                update(RunRow)
                .where(RunRow.id == run_id, RunRow.status.in_(ACTIVE_RUN_STATUSES))
                .values(status=status, finished_at=_now())
            )
            if ended.rowcount != 1:  # type: ignore[attr-defined]
                return None
        logger.info("run %s ended %s: %s", run_id, status, counts.model_dump())
        return await self.get_run(run_id)

    @_guarded("results")
    async def results(self, run_id: str, *, owner: str | None = None, full: bool = True) -> list[QuestionResult]:
        """The results of a run, in question order (``full=False`` leaves the full responses out)."""
        await self.run_row(run_id, owner=owner)
        async with self._read() as session:
            stmt = select(RunItemRow).where(RunItemRow.run_id == run_id).order_by(RunItemRow.idx)
            return [_result(row, full=full) for row in (await session.execute(stmt)).scalars()]

    @_guarded("set_webhook_state")
    async def set_webhook_state(self, run_id: str, state: str, attempts: int, error: str | None) -> None:
        async with self._write.begin() as session:
            await session.execute(
                update(RunRow)
                .where(RunRow.id == run_id)
                .values(webhook_state=state, webhook_attempts=attempts, webhook_error=error)
            )

    # Helpers ----------------------------------------------------------------------------------------------------
    async def _run_info(self, row: RunRow) -> RunInfo:
        async with self._read() as session:
            counts = await _counts(session, row.id)
            job_name = (await session.execute(select(JobRow.name).where(JobRow.id == row.job_id))).scalar_one()
            failed_stmt = select(RunItemRow.sources_failed).where(
                RunItemRow.run_id == row.id, RunItemRow.status.in_(FINISHED_ITEM_STATUSES)
            )
            failures = [entry for (listed,) in (await session.execute(failed_stmt)).all() for entry in listed or []]
            # Only the answers' cost objects are read (a JSON path, not the full responses): a run's total is the
            # sum of what each stored answer cost (``jobs/_exports.run_cost`` sums the same from full results).
            cost_stmt = select(RunItemRow.response["cost"]).where(
                RunItemRow.run_id == row.id, RunItemRow.status.in_(FINISHED_ITEM_STATUSES)
            )
            costs = [AnswerCost.model_validate(cost) for (cost,) in (await session.execute(cost_stmt)).all() if cost]
        return RunInfo(
            id=row.id,
            job_id=row.job_id,
            job_name=job_name,
            owner=row.owner,
            trigger=row.trigger,
            slot_at=row.slot_at,
            executor=row.executor,
            status=row.status,
            created_at=row.created_at,
            started_at=row.started_at,
            finished_at=row.finished_at,
            cancel_requested=row.cancel_requested_at is not None,
            counts=counts,
            source_failures=_failure_counts(failures),
            webhook_state=row.webhook_state,
            webhook_error=row.webhook_error,
            cost=sum(costs, AnswerCost()),
        )


async def _counts(session: AsyncSession, run_id: str) -> RunCounts:
    stmt = select(RunItemRow.status, func.count()).where(RunItemRow.run_id == run_id).group_by(RunItemRow.status)
    by_status = {status: int(count) for status, count in (await session.execute(stmt)).all()}
    return RunCounts(total=sum(by_status.values()), **by_status)


def _failure_counts(failures: list[dict[str, str]]) -> list[SourceFailureCount]:
    counted = Counter((entry.get("source", "?"), entry.get("kind", "?")) for entry in failures)
    examples = {(entry.get("source", "?"), entry.get("kind", "?")): entry.get("message", "") for entry in failures}
    return [
        SourceFailureCount(source=source, kind=kind, count=count, example=examples[(source, kind)])
        for (source, kind), count in sorted(counted.items(), key=lambda pair: (-pair[1], pair[0]))
    ]


def _job_info(row: JobRow) -> JobInfo:
    schedule = Schedule(cron=row.schedule_cron, timezone=row.schedule_tz or "UTC") if row.schedule_cron else None
    return JobInfo(
        id=row.id,
        owner=row.owner,
        name=row.name,
        created_at=row.created_at,
        source=row.source,
        question_count=len(row.questions),
        columns=list(row.columns),
        options=QuestionOptions.model_validate(row.options),
        schedule=schedule,
        next_run_at=next_slot(schedule.cron, schedule.timezone, _now()) if schedule else None,
        webhook_url=row.webhook_url,
        remember=row.remember,
    )


def _result(row: RunItemRow, *, full: bool) -> QuestionResult:
    return QuestionResult(
        index=row.idx,
        question=row.question,
        carried=dict(row.carried or {}),
        status=row.status,
        attempts=row.attempts,
        confidence_level=row.confidence_level,
        citation_count=row.citation_count,
        sources_used=list(row.sources_used or []),
        sources_failed=list(row.sources_failed or []),
        response=FinalResponse.model_validate(row.response) if full and row.response is not None else None,
        failure=ItemFailure.model_validate(row.failure) if row.failure is not None else None,
        started_at=row.started_at,
        finished_at=row.finished_at,
        answered_by=row.answered_by,
    )


def _sources_used(response: FinalResponse | None) -> list[str]:
    if response is None:
        return []
    return [report.source_type for report in response.source_reports if report.status == "success"]
