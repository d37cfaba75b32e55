"""Batch jobs in the service process: the one ``Jobs`` of the process and, when it is on, the embedded scheduler.

The app's lifespan starts this after the runtime is warm and stops it before the runtime closes::

    batch = ServiceBatch(runtime, settings)
    await batch.start()            # Jobs(runtime) and, if on, EmbeddedScheduler(jobs): schedules fire here
    ...                            # routes use batch.jobs (ServiceState.jobs)
    await batch.stop()             # the scheduler loop, then the background runs (questions in progress go back
                                   # to pending and resume at the next start)

The embedded scheduler is on unless ``jobs.embedded_scheduler`` says otherwise; left unset, it is off when
``redis.url`` is set, because such a deployment runs ``researchcrew scheduler`` (docker-compose's ``scheduler``
service) and workers. Several server processes (``serve --workers N``) each run one: a slot still runs once,
because ``job_runs`` is unique per job and slot and only the process whose insert won starts it
(``tests/jobs/test_scheduling.py`` runs two embedded schedulers on one database).
"""

from __future__ import annotations

import logging

from researchcrew.jobs.api import Jobs
from researchcrew.jobs.embedded import EmbeddedScheduler
from researchcrew.runtime import Runtime
from researchcrew.settings import Settings

logger = logging.getLogger(__name__)


def embedded_scheduler_enabled(settings: Settings) -> bool:
    """Whether the service process fires schedules itself (see the module docstring)."""
    chosen = settings.jobs.embedded_scheduler
    return chosen if chosen is not None else settings.redis.url is None


class ServiceBatch:
    """The service's ``Jobs`` and its embedded scheduler, started and stopped with the app."""

    def __init__(self, runtime: Runtime, settings: Settings) -> None:
        self.jobs = Jobs(runtime)
        self.scheduler: EmbeddedScheduler | None = (
            EmbeddedScheduler(self.jobs) if embedded_scheduler_enabled(settings) else None
        )

    async def start(self) -> None:
        if self.scheduler is not None:
            await self.scheduler.start()

    async def stop(self) -> None:
        """Stop the scheduler loop and every background run of this process (safe to call twice)."""
        if self.scheduler is not None:
            await self.scheduler.stop()  # it closes the Jobs too
        else:
            await self.jobs.aclose()
