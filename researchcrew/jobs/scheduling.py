"""Schedules on taskiq's scheduler: a ``ScheduleSource`` that reads the jobs table, and the scheduler process.

taskiq's ``SchedulerLoop`` asks its sources for schedules every ``jobs.schedule_refresh_s`` and sends each one
when it is due (checked every second). Our source turns each scheduled job into one-off *time* schedules, one per
slot, each with the slot in its arguments and its own schedule id (``<job id>@<slot key>``):

* the job's next slot; and
* per the catch-up policy (``_schedule.py``), its latest past slot when that slot has no run yet — so a scheduler
  that was down, or started late, runs a missed slot once.

Why not taskiq's own cron schedules: a cron schedule carries no slot identity (two schedulers, or a restarted
one, could not tell a slot they already fired from a new one) and has no catch-up. With slot identities, the
unique ``(job_id, slot_key)`` of ``job_runs`` makes a slot run once however many schedulers send it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from taskiq import ScheduledTask, ScheduleSource

from researchcrew.jobs._schedule import due_slots, slot_key
from researchcrew.jobs._store import JobStore
from researchcrew.jobs.queue import TASK_FIRE
from researchcrew.settings import JobsSettings, Settings

if TYPE_CHECKING:
    from taskiq import TaskiqScheduler

    from researchcrew.runtime import Runtime

logger = logging.getLogger(__name__)

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class JobScheduleSource(ScheduleSource):
    """The jobs table as a taskiq schedule source (read-only: jobs are scheduled by creating them)."""

    def __init__(
        self, store: Callable[[], Awaitable[JobStore]], settings: JobsSettings, *, clock: Clock = _utcnow
    ) -> None:
        self._store = store
        self.settings = settings
        self._clock = clock

    async def get_schedules(self) -> list[ScheduledTask]:
        store = await self._store()
        now = self._clock()
        plans = []
        for job in await store.scheduled_jobs():
            try:
                missed, upcoming = due_slots(
                    job.cron, job.timezone, now=now, created_at=job.created_at, catch_up=self.settings.catch_up
                )
            except (ValueError, KeyError) as error:  # validated on creation; a zone database change could do it
                logger.warning(
                    "job %s: its schedule %r (%s) cannot be read: %s", job.job_id, job.cron, job.timezone, error
                )
                continue
            plans.append((job.job_id, missed, upcoming))
        already = await store.slots_run([(job_id, slot_key(missed)) for job_id, missed, _ in plans if missed])
        on_time = timedelta(seconds=2 * self.settings.schedule_refresh_s)
        schedules: list[ScheduledTask] = []
        for job_id, missed, upcoming in plans:
            if missed is not None and (job_id, slot_key(missed)) not in already:
                trigger = "schedule" if now - missed <= on_time else "catch_up"
                schedules.append(_slot_task(job_id, missed, trigger))
            schedules.append(_slot_task(job_id, upcoming, "schedule"))
        return schedules


def _slot_task(job_id: str, slot: datetime, trigger: str) -> ScheduledTask:
    return ScheduledTask(
        task_name=TASK_FIRE,
        labels={},
        args=[],
        kwargs={"job_id": job_id, "slot": slot.isoformat(), "trigger": trigger},
        time=slot,
        schedule_id=f"{job_id}@{slot_key(slot)}",
    )


def runtime_store(runtime: Runtime) -> Callable[[], Awaitable[JobStore]]:
    """The job store on ``runtime``'s memory database, opened on first use."""
    cached: list[JobStore] = []

    async def store() -> JobStore:
        if not cached:
            cached.append(JobStore((await runtime.memory_store()).engine))
        return cached[0]

    return store


class _RuntimeSource(JobScheduleSource):
    """The source of the scheduler process: it owns a runtime (for the memory database) and closes it."""

    def __init__(self, runtime: Runtime, settings: JobsSettings) -> None:
        super().__init__(runtime_store(runtime), settings)
        self._runtime = runtime

    async def shutdown(self) -> None:
        await self._runtime.aclose()


def queue_scheduler(settings: Settings) -> TaskiqScheduler:
    """The scheduler of `researchcrew scheduler`: the job schedules, sent to the Redis queue."""
    from taskiq import TaskiqScheduler

    from researchcrew.jobs.queue import redis_broker
    from researchcrew.runtime import open_runtime

    broker = redis_broker(settings)
    return TaskiqScheduler(broker, [_RuntimeSource(open_runtime(settings, remember=False), settings.jobs)])


async def run_scheduler_process(settings: Settings) -> None:
    """Run the scheduler until cancelled (SIGINT), with taskiq's scheduler loop."""
    from taskiq.cli.scheduler.args import SchedulerArgs
    from taskiq.cli.scheduler.run import run_scheduler

    args = SchedulerArgs(
        scheduler=queue_scheduler(settings),
        modules=[],
        configure_logging=False,
        update_interval=max(1, round(settings.jobs.schedule_refresh_s)),
        loop_interval=1,
        send_timeout=max(1.0, settings.redis.timeout_s * 2),
    )
    await run_scheduler(args)
