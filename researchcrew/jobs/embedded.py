"""The embedded scheduler: fires job schedules and runs their questions in this process (no Redis, no workers).

``researchcrew serve`` starts one in its lifespan::

    async with EmbeddedScheduler(jobs):      # jobs = Jobs(runtime)
        ...                                  # serve requests; slots fire meanwhile

It is taskiq's own scheduler loop (``SchedulerLoop``) over the same schedule source as the scheduler process
(``scheduling.JobScheduleSource``: slot identities, catch-up policy), sending to taskiq's ``InMemoryBroker``, whose
one task creates the slot's run (once per slot, by the unique constraint) and researches it in the background
with ``jobs.concurrency`` questions at once. On start it also resumes the in-process runs an earlier process left
unfinished (taking back at once the questions a dead process of this host held), and every ``jobs.lease_poll_s``
it takes over runs with questions nobody is researching; on stop it cancels the loop, the sweep and the
background runs (questions in progress go back to pending).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING

from researchcrew.jobs.api import Jobs
from researchcrew.jobs.queue import TASK_FIRE
from researchcrew.jobs.scheduling import JobScheduleSource

if TYPE_CHECKING:
    from taskiq import TaskiqScheduler

logger = logging.getLogger(__name__)


class EmbeddedScheduler:
    """Start/stop (or ``async with``) around a process's lifetime."""

    def __init__(self, jobs: Jobs, *, refresh_s: float | None = None, resume: bool = True) -> None:
        self.jobs = jobs
        self.refresh_s = refresh_s if refresh_s is not None else jobs.settings.jobs.schedule_refresh_s
        self.resume = resume
        self._scheduler: TaskiqScheduler | None = None
        self._loop: asyncio.Task[None] | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self.fired: list[str] = []  # run ids created by this scheduler, in order (for status and tests)

    @property
    def running(self) -> bool:
        return self._loop is not None and not self._loop.done()

    async def start(self) -> None:
        if self.running:
            return
        from taskiq import InMemoryBroker, TaskiqScheduler
        from taskiq.cli.scheduler.run import SchedulerLoop

        async def fire_slot(job_id: str, slot: str, trigger: str) -> None:
            await self._fire(job_id, slot, trigger)  # a plain function: taskiq renames what it registers

        broker = InMemoryBroker(await_inplace=True)  # the task only creates a run and starts it in the background
        broker.register_task(fire_slot, task_name=TASK_FIRE)
        source = JobScheduleSource(self.jobs.store, self.jobs.settings.jobs)
        scheduler = TaskiqScheduler(broker, [source])
        await scheduler.startup()
        self._scheduler = scheduler
        if self.resume:
            store = await self.jobs.store()
            await store.reclaim_dead_leases()  # the questions a crashed process of this host held: pending again
            for run_id in await store.unfinished_runs("in_process"):
                logger.info("resuming run %s, left unfinished by an earlier process", run_id)
                self.jobs.run_in_background(run_id)
            self._sweeper = asyncio.create_task(self._sweep(), name="researchcrew-lease-sweep")
        loop = SchedulerLoop(scheduler)
        self._loop = asyncio.create_task(
            loop.run(update_interval=timedelta(seconds=self.refresh_s), loop_interval=timedelta(seconds=1)),
            name="researchcrew-scheduler",
        )
        logger.info("embedded scheduler started (schedules re-read every %.0f s)", self.refresh_s)

    async def _sweep(self) -> None:
        """Every ``jobs.lease_poll_s``: take back the leases of dead processes of this host, and research here
        the in-process runs with open questions (pending, or leased by a holder whose lease ran out) that this
        process is not researching yet — a run another process started and then died with, for one."""
        from researchcrew.errors import MemoryStoreError

        every_s = self.jobs.settings.jobs.lease_poll_s
        while True:
            await asyncio.sleep(every_s)
            try:
                store = await self.jobs.store()
                await store.reclaim_dead_leases()
                for run_id in await store.unfinished_runs("in_process"):
                    if not self.jobs.running_here(run_id) and await store.open_items(run_id):
                        logger.info("taking over run %s: it has questions nobody is researching", run_id)
                        self.jobs.run_in_background(run_id)
            except MemoryStoreError as error:
                logger.warning("the lease sweep failed (tried again in %.0f s): %s", every_s, error)
            except Exception:  # the outermost guard of a background loop: a bug must not end the sweeps for good
                logger.exception("the lease sweep failed unexpectedly")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
            self._sweeper = None
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.gather(self._loop, return_exceptions=True)
            self._loop = None
        await self.jobs.aclose()
        if self._scheduler is not None:
            scheduler, self._scheduler = self._scheduler, None
            await scheduler.shutdown()

    async def _fire(self, job_id: str, slot: str, trigger: str) -> None:
        store = await self.jobs.store()
        job = await store.job_by_id(job_id)
        if job is None or job.schedule_cron is None:
            return
        run_id, created = await store.create_run(
            job, trigger=trigger, executor="in_process", slot=datetime.fromisoformat(slot)
        )
        if created:
            logger.info("slot %s of job %s fired: run %s", slot, job.name, run_id)
            self.fired.append(run_id)
            self.jobs.run_in_background(run_id)

    async def __aenter__(self) -> EmbeddedScheduler:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
