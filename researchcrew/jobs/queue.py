"""The at-scale queue: taskiq on Redis streams (taskiq-redis ``RedisStreamBroker``).

Why taskiq (the choice is argued in full in the README's "Batch jobs" section): it is asyncio-native like the
pipeline; its Redis *stream* broker reads through a consumer group and acknowledges a message only after the task
has run (``AcknowledgeType.WHEN_SAVED``, the default), and a live worker claims (``XAUTOCLAIM``) what a dead one
left unacknowledged after ``idle_timeout`` — so a worker SIGKILLed mid-question has that question redelivered; its
scheduler reads schedules from a pluggable ``ScheduleSource`` (ours reads the jobs table, ``scheduling.py``); and
its ``InMemoryBroker`` runs the same tasks in process for the embedded default.

Four tasks, each a small message (ids only; the database holds the state):

* ``fire_slot(job_id, slot, trigger)`` — sent by the scheduler: creates the slot's run (unique per slot) and
  dispatches it;
* ``dispatch_run(run_id)`` — sends one ``answer_question`` per open question; a dispatch *claim* on the run makes a
  slot fired by two schedulers, or a redelivered dispatch, send the questions once;
* ``answer_question(run_id, index)`` — researches one question (``execute.QuestionExecutor``);
* ``deliver_webhook(run_id)`` — the finished-run webhook, with its retries, redelivered if its worker dies.

Each worker process opens one ``Runtime`` at start-up (``WORKER_STARTUP``) and closes it at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from taskiq import AsyncBroker, Context, TaskiqDepends, TaskiqState

from researchcrew.errors import QueueUnavailableError
from researchcrew.settings import Settings

if TYPE_CHECKING:
    from taskiq_redis import RedisStreamBroker

    from researchcrew.jobs._execute import QuestionExecutor
    from researchcrew.jobs._store import JobStore
    from researchcrew.jobs.contracts import RunInfo
    from researchcrew.runtime import Runtime

logger = logging.getLogger(__name__)

TASK_FIRE = "researchcrew.jobs.fire_slot"
TASK_DISPATCH = "researchcrew.jobs.dispatch_run"
TASK_ANSWER = "researchcrew.jobs.answer_question"
TASK_WEBHOOK = "researchcrew.jobs.deliver_webhook"
STATE_KEY = "researchcrew"
STREAM_MAXLEN = 1_000_000  # entries kept in the stream (acknowledged ones included); approximate trimming


def process_name() -> str:
    """How this process signs its leases and results: host and pid (``leases.this_process`` has the rest)."""
    from researchcrew.jobs._leases import this_process

    return this_process().name


def redis_broker(settings: Settings) -> RedisStreamBroker:
    """The Redis stream broker of the job queue (no connection is made until it is used)."""
    if settings.redis.url is None:
        raise QueueUnavailableError(
            "the job queue needs Redis: set RESEARCHCREW_REDIS__URL (e.g. redis://localhost:6379/0), or run jobs in "
            "process with `researchcrew jobs run`"
        )
    from taskiq_redis import RedisStreamBroker

    prefix = settings.redis.key_prefix
    return RedisStreamBroker(
        settings.redis.url,
        queue_name=f"{prefix}:{settings.jobs.queue_name}",
        consumer_group_name=f"{prefix}:workers",
        idle_timeout=int(settings.jobs.redelivery_after_s * 1000),
        xread_count=1,  # one message per read: none waits in a busy worker while another worker is idle
        xread_block=1000,
        maxlen=STREAM_MAXLEN,
        unacknowledged_lock_timeout=max(5.0, settings.redis.timeout_s),
        socket_connect_timeout=settings.redis.timeout_s,
        # Above redis-py's 5 s default: a blocking read returns after xread_block, but a busy event loop may
        # read its answer late, and a read timeout ends taskiq's listener (and so the worker process).
        socket_timeout=max(30.0, settings.redis.timeout_s),
    )


async def kick(broker: AsyncBroker, task_name: str, **kwargs: Any) -> None:
    """Send one task message by name (the sender need not have the task registered)."""
    from taskiq.kicker import AsyncKicker

    await AsyncKicker(task_name, broker, {}).kiq(**kwargs)


# Tasks ----------------------------------------------------------------------------------------------------------
@dataclass
class WorkerResources:
    """What the tasks of one worker process use: its runtime, the job store on it, the question executor."""

    settings: Settings
    runtime: Runtime
    store: JobStore
    executor: QuestionExecutor
    sweeper: asyncio.Task[None] | None = None


async def sweep_once(store: JobStore, broker: AsyncBroker) -> int:
    """Give back the questions of queue runs whose holder died on this host or whose lease ran out, and send each
    to the workers again (exactly one sweeper gives a question back, so it is sent once). In-process runs' questions
    are given back too; the process that resumes them finds them pending."""
    reclaimed = [*await store.reclaim_dead_leases(), *await store.release_expired("queue")]
    sent = 0
    for item in reclaimed:
        if item.executor == "queue":
            await kick(broker, TASK_ANSWER, run_id=item.run_id, index=item.index)
            sent += 1
    if sent:
        logger.info("%d question(s) of dead or silent workers sent to the workers again", sent)
    return sent


async def sweep_leases(store: JobStore, broker: AsyncBroker, every_s: float) -> None:
    """``sweep_once`` at start-up and every ``every_s`` until cancelled (a failed sweep is retried next time)."""
    from researchcrew.errors import MemoryStoreError

    while True:
        try:
            await sweep_once(store, broker)
        except (MemoryStoreError, OSError) as error:
            logger.warning("the lease sweep failed (tried again in %.0f s): %s", every_s, error)
        except Exception:  # the outermost guard of a background loop: a bug must not end the sweeps for good
            logger.exception("the lease sweep failed unexpectedly")
        await asyncio.sleep(every_s)


def _resources(context: Context) -> WorkerResources:
    found = getattr(context.state, STATE_KEY, None)
    if not isinstance(found, WorkerResources):
        raise RuntimeError("the researchcrew worker resources were not opened (WORKER_STARTUP did not run)")
    return found


async def fire_slot(
    job_id: str,
    slot: str,
    trigger: str,
    context: Context = TaskiqDepends(),  # noqa: B008  (taskiq's dependency injection)
) -> str | None:
    """Create the run of a schedule slot (once per slot) and dispatch it."""
    resources = _resources(context)
    job = await resources.store.job_by_id(job_id)
    if job is None or job.schedule_cron is None:
        logger.info("slot %s of job %s: the job is gone or no longer scheduled", slot, job_id)
        return None
    run_id, created = await resources.store.create_run(
        job, trigger=trigger, executor="queue", slot=datetime.fromisoformat(slot)
    )
    logger.info("slot %s of job %s: run %s (%s)", slot, job.name, run_id, "new" if created else "exists already")
    await _dispatch(resources, context.broker, run_id, force=False)
    return run_id


async def dispatch_run(
    run_id: str,
    force: bool = False,
    context: Context = TaskiqDepends(),  # noqa: B008
) -> int:
    """Send the open questions of a run to the workers (once, unless ``force``)."""
    return await _dispatch(_resources(context), context.broker, run_id, force=force)


async def _dispatch(resources: WorkerResources, broker: AsyncBroker, run_id: str, *, force: bool) -> int:
    store = resources.store
    if not await store.claim_dispatch(run_id, resources.settings.jobs.lease_s, force=force):
        return 0
    indexes = await store.open_items(run_id)
    for index in indexes:
        await kick(broker, TASK_ANSWER, run_id=run_id, index=index)
    await store.mark_dispatched(run_id)
    logger.info("run %s: %d question(s) sent to the workers", run_id, len(indexes))
    return len(indexes)


async def answer_question(
    run_id: str,
    index: int,
    context: Context = TaskiqDepends(),  # noqa: B008
) -> str | None:
    """Research one question (acknowledged only once its result is stored)."""
    return await _resources(context).executor.research(run_id, index)


async def deliver_webhook(
    run_id: str,
    context: Context = TaskiqDepends(),  # noqa: B008
) -> bool:
    """POST a finished run to its job's webhook (retried with backoff inside; redelivered if this worker dies)."""
    from researchcrew.jobs.webhooks import deliver, webhook_policy

    resources = _resources(context)
    run = await resources.store.get_run(run_id)
    job = await resources.store.job_by_id(run.job_id)
    if job is None or not job.webhook_url or not job.webhook_secret or run.webhook_state != "pending":
        return False
    return await deliver(
        run,
        url=job.webhook_url,
        secret=job.webhook_secret,
        store=resources.store,
        settings=resources.settings.jobs,
        policy=webhook_policy(resources.settings),
    )


def register_tasks(broker: AsyncBroker) -> None:
    """Register the four tasks on ``broker`` under their fixed names (taskiq's dependency injection hands each
    its ``Context``)."""
    for name, function in (
        (TASK_FIRE, fire_slot),
        (TASK_DISPATCH, dispatch_run),
        (TASK_ANSWER, answer_question),
        (TASK_WEBHOOK, deliver_webhook),
    ):
        broker.register_task(function, task_name=name)


# Worker processes -----------------------------------------------------------------------------------------------
def worker_broker() -> AsyncBroker:
    """The broker of one ``researchcrew worker`` process (taskiq's worker calls this factory in each process):
    settings from the environment, the tasks registered, the runtime opened at start-up and closed at shutdown."""
    from taskiq import TaskiqEvents

    from researchcrew.redaction import install_log_redaction, remember_settings_secrets

    settings = Settings()
    install_log_redaction()  # a worker process's log lines carry no credential either
    remember_settings_secrets(settings)
    broker = redis_broker(settings)
    register_tasks(broker)

    async def open_resources(state: TaskiqState) -> None:
        from researchcrew.jobs._execute import QuestionExecutor
        from researchcrew.jobs._store import JobStore
        from researchcrew.runtime import open_runtime

        runtime = open_runtime(settings)
        await runtime.stages()  # load the model and open the stores now, not on the first question
        store = JobStore((await runtime.memory_store()).engine)

        async def on_run_finished(run: RunInfo) -> None:
            if run.webhook_state == "pending":
                await kick(broker, TASK_WEBHOOK, run_id=run.id)

        executor = QuestionExecutor(runtime, store, settings.jobs, name=process_name(), on_run_finished=on_run_finished)
        resources = WorkerResources(settings, runtime, store, executor)
        resources.sweeper = asyncio.create_task(sweep_leases(store, broker, settings.jobs.lease_poll_s))
        setattr(state, STATE_KEY, resources)
        logger.info("researchcrew worker %s ready", process_name())

    async def close_resources(state: TaskiqState) -> None:
        resources = getattr(state, STATE_KEY, None)
        if isinstance(resources, WorkerResources):
            if resources.sweeper is not None:
                resources.sweeper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await resources.sweeper
            await resources.runtime.aclose()

    broker.add_event_handler(TaskiqEvents.WORKER_STARTUP, open_resources)
    broker.add_event_handler(TaskiqEvents.WORKER_SHUTDOWN, close_resources)
    return broker


def run_workers(settings: Settings, *, processes: int, log_level: str = "INFO") -> int | None:
    """Run ``processes`` worker processes until SIGINT/SIGTERM (taskiq's process manager restarts one that dies;
    a running question finishes before a process exits, or its lease is released)."""
    from taskiq.cli.worker.args import WorkerArgs
    from taskiq.cli.worker.run import run_worker

    redis_broker(settings)  # fail fast, in the parent, when Redis is not configured
    args = WorkerArgs(
        broker=f"{__name__}:worker_broker",
        modules=[],
        workers=processes,
        max_async_tasks=settings.jobs.concurrency,
        max_prefetch=0,
        log_level=log_level,  # type: ignore[arg-type]
        shutdown_timeout=10,
        wait_tasks_timeout=settings.retrieval.run_deadline_s + 5,
    )
    return run_worker(args)
