"""``Jobs``: every batch-job operation as one async API on the process's ``Runtime``, owned by a user id.

The CLI (``researchcrew jobs ...``), the SDK (``ResearchAssistant.jobs``) and the HTTP routers call these methods
and nothing else; a user only ever sees their own jobs and runs (``JobNotFoundError`` otherwise, the same as for
an id that does not exist).

    jobs = Jobs(runtime)
    created = await jobs.create("ada", name="weekly-testing", questions=Path("questions.csv"),
                                schedule="0 6 * * MON", timezone="Europe/Berlin")
    run = await jobs.run("ada", "weekly-testing", on_progress=print)         # now, in process, bounded concurrency
    report = await jobs.export("ada", run.id, "md")

Runs execute in process (``run``, ``start(..., executor="in_process")``: background tasks of this object,
stopped by ``aclose``) or on Redis-backed workers (``executor="queue"``). Input problems raise
``JobInputError`` before anything is stored or queued.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from researchcrew.errors import JobInputError
from researchcrew.jobs._execute import QuestionExecutor
from researchcrew.jobs._exports import ExportFormat, to_csv, to_jsonl, to_markdown
from researchcrew.jobs._store import JobStore
from researchcrew.jobs.contracts import (
    CreatedJob,
    JobInfo,
    JobQuestion,
    JobSpec,
    QuestionOptions,
    QuestionResult,
    RunInfo,
)
from researchcrew.jobs.sources import LoadedQuestions, inline_questions, load_questions

if TYPE_CHECKING:
    from taskiq import AsyncBroker

    from researchcrew.runtime import Runtime

logger = logging.getLogger(__name__)

Progress = Callable[[int, str | None], None]  # (question index, its stored status or None) after each question
ExecutorChoice = Literal["auto", "in_process", "queue"]


class Jobs:
    """Batch jobs on one runtime. Close it (``aclose``) to stop its background runs."""

    def __init__(self, runtime: Runtime) -> None:
        from researchcrew.jobs.queue import process_name

        self.runtime = runtime
        self.settings = runtime.settings
        self._store: JobStore | None = None
        self._executor: QuestionExecutor | None = None
        self._broker: AsyncBroker | None = None
        self._background: dict[str, asyncio.Task[None]] = {}
        self._name = process_name()
        self._lock = asyncio.Lock()
        # ``jobs.concurrency`` questions at once in this process, however many runs are going (HTTP starts, slots).
        self._slots = asyncio.Semaphore(self.settings.jobs.concurrency)

    # Plumbing ---------------------------------------------------------------------------------------------------
    async def store(self) -> JobStore:
        """The job store on the runtime's memory database."""
        if self._store is None:
            self._store = JobStore((await self.runtime.memory_store()).engine)
        return self._store

    async def executor(self) -> QuestionExecutor:
        if self._executor is None:
            self._executor = QuestionExecutor(
                self.runtime, await self.store(), self.settings.jobs, name=self._name, on_run_finished=self._finished
            )
        return self._executor

    async def _finished(self, run: RunInfo) -> None:
        """A run this process finished: send its webhook (in process, with retries)."""
        if run.webhook_state != "pending":
            return
        from researchcrew.jobs.webhooks import deliver, webhook_policy

        store = await self.store()
        job = await store.job_by_id(run.job_id)
        if job is not None and job.webhook_url and job.webhook_secret:
            await deliver(
                run,
                url=job.webhook_url,
                secret=job.webhook_secret,
                store=store,
                settings=self.settings.jobs,
                policy=webhook_policy(self.settings),
            )

    async def _queue(self) -> AsyncBroker:
        """The started Redis broker for sending work (its start declares the consumer group, so messages sent
        before any worker ever ran are kept for the workers)."""
        async with self._lock:
            if self._broker is None:
                import redis

                from researchcrew.errors import QueueUnavailableError
                from researchcrew.jobs.queue import redis_broker

                broker = redis_broker(self.settings)
                try:
                    await broker.startup()
                except (redis.RedisError, OSError) as error:
                    await broker.shutdown()
                    raise QueueUnavailableError(f"cannot reach Redis at {self.settings.redis.url}: {error}") from error
                self._broker = broker
            return self._broker

    # Jobs -------------------------------------------------------------------------------------------------------
    async def create(
        self,
        user_id: str,
        *,
        name: str,
        questions: Path | str | Sequence[str] | Sequence[JobQuestion] | LoadedQuestions,
        options: QuestionOptions | dict[str, Any] | None = None,
        schedule: str | None = None,
        timezone: str = "UTC",
        webhook_url: str | None = None,
        remember: bool = False,
    ) -> CreatedJob:
        """Create a job. ``questions`` is a file (``Path``, or a ``str`` path ending in .txt/.csv/.jsonl), a file
        already read (``sources.parse_questions`` of an upload) or the questions themselves. Everything is checked
        first; ``JobInputError`` says what is wrong."""
        loaded = self._questions(questions)
        try:
            spec = JobSpec.model_validate(
                {
                    "name": name,
                    "questions": loaded.questions,
                    "columns": loaded.columns,
                    "source": loaded.source,
                    "options": options if options is not None else {},
                    "schedule": {"cron": schedule, "timezone": timezone} if schedule is not None else None,
                    "webhook_url": webhook_url,
                    "remember": remember,
                }
            )
        except ValidationError as error:
            raise JobInputError(_problems(error)) from None
        if spec.webhook_url is not None:
            self._check_webhook(str(spec.webhook_url))
        return await (await self.store()).create_job(user_id, spec)

    def _check_webhook(self, url: str) -> None:
        """The static half of the webhook address policy (scheme, user-info, local names, non-public addresses in
        any spelling); delivery resolves the host and checks again."""
        from researchcrew.jobs.webhooks import webhook_policy
        from researchcrew.net.address_policy import AddressRefused

        try:
            webhook_policy(self.settings).check_url(url)
        except AddressRefused as refused:
            raise JobInputError(f"webhook_url: {refused}") from None

    def _questions(
        self, questions: Path | str | Sequence[str] | Sequence[JobQuestion] | LoadedQuestions
    ) -> LoadedQuestions:
        limit = self.settings.jobs.max_questions
        if isinstance(questions, LoadedQuestions):
            return questions
        if isinstance(questions, Path):
            return load_questions(questions, max_questions=limit)
        if isinstance(questions, str):
            if questions.lower().endswith((".txt", ".csv", ".jsonl")):
                return load_questions(Path(questions), max_questions=limit)
            return inline_questions([questions], max_questions=limit)
        listed = list(questions)
        if listed and all(isinstance(question, JobQuestion) for question in listed):
            given = [question for question in listed if isinstance(question, JobQuestion)]
            columns = list(dict.fromkeys(key for question in given for key in question.carried))
            if not given or len(given) > limit:
                raise JobInputError(f"a job holds 1 to {limit} questions, not {len(given)}")
            return LoadedQuestions(given, columns=columns)
        return inline_questions([str(question) for question in listed], max_questions=limit)

    async def list(self, user_id: str) -> builtins.list[JobInfo]:
        return await (await self.store()).list_jobs(user_id)

    async def get(self, user_id: str, job: str) -> JobInfo:
        """A job by name or id."""
        return await (await self.store()).get_job(user_id, job)

    async def remove(self, user_id: str, job: str) -> JobInfo:
        """Delete a job, its runs and results (a run in progress stops)."""
        return await (await self.store()).delete_job(user_id, job)

    # Runs -------------------------------------------------------------------------------------------------------
    def default_executor(self) -> Literal["in_process", "queue"]:
        """Where new runs go by default: the queue when Redis is configured, else this process."""
        return "queue" if self.settings.redis.url else "in_process"

    async def start(self, user_id: str, job: str, *, executor: ExecutorChoice = "auto") -> RunInfo:
        """Start a run now and return at once: on the workers (queue), or in this process's background."""
        chosen = self.default_executor() if executor == "auto" else executor
        store = await self.store()
        row = await store.job_row(user_id, job)
        broker = await self._queue() if chosen == "queue" else None  # unreachable Redis fails before storing
        run_id, _ = await store.create_run(row, trigger="manual", executor=chosen)
        if broker is not None:
            from researchcrew.jobs.queue import TASK_DISPATCH, kick

            await kick(broker, TASK_DISPATCH, run_id=run_id)
        else:
            self.run_in_background(run_id)
        return await store.get_run(run_id)

    async def run(
        self,
        user_id: str,
        job: str,
        *,
        on_progress: Progress | None = None,
        on_start: Callable[[RunInfo], None] | None = None,
    ) -> RunInfo:
        """Run a job now, in this process, and return when every question has its result. ``on_start`` gets the
        new run before its first question; ``on_progress`` is called after each question."""
        store = await self.store()
        row = await store.job_row(user_id, job)
        run_id, _ = await store.create_run(row, trigger="manual", executor="in_process")
        if on_start is not None:
            on_start(await store.get_run(run_id))
        return await self.run_existing(run_id, on_progress=on_progress)

    async def resume(self, user_id: str, run_id: str, *, on_progress: Progress | None = None) -> RunInfo:
        """Continue a run whose process stopped: the questions without a result are researched (stored ones are
        not repeated). A queue run is sent to the workers again; an in-process one runs here, in the foreground."""
        store = await self.store()
        run = await store.run_row(run_id, owner=user_id)
        if run.executor == "queue":
            from researchcrew.jobs.queue import TASK_DISPATCH, kick

            await kick(await self._queue(), TASK_DISPATCH, run_id=run_id, force=True)
            return await store.get_run(run_id)
        return await self.run_existing(run_id, on_progress=on_progress)

    async def run_existing(self, run_id: str, *, on_progress: Progress | None = None) -> RunInfo:
        """Research the open questions of a run here until the run has ended: ``jobs.concurrency`` at once in this
        process, shared by every run this object is researching. Questions leased by another process are left to
        it; every ``jobs.lease_poll_s`` those whose holder died (on this host) or whose lease ran out are taken
        over, so a crashed process's questions end without a restart."""
        store = await self.store()
        while True:
            await self._research_open(run_id, on_progress)
            await store.finalize_run(run_id)  # a run with nothing left to do (e.g. all cancelled) ends here too
            if (await store.run_row(run_id)).status not in ("queued", "running"):
                return await store.get_run(run_id)
            await asyncio.sleep(self.settings.jobs.lease_poll_s)
            await store.reclaim_dead_leases()

    async def _research_open(self, run_id: str, on_progress: Progress | None) -> None:
        executor = await self.executor()
        pending = deque(await (await self.store()).open_items(run_id))

        async def work() -> None:
            while pending:
                index = pending.popleft()
                async with self._slots:
                    status = await executor.research(run_id, index)
                if on_progress is not None:
                    on_progress(index, status)

        workers = [asyncio.create_task(work()) for _ in range(min(self.settings.jobs.concurrency, len(pending)))]
        try:
            await asyncio.gather(*workers)
        except BaseException:  # cancelled (the process stops) or a store failure: stop the others cleanly
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise

    def running_here(self, run_id: str) -> bool:
        """Whether this object is researching the run in its background."""
        task = self._background.get(run_id)
        return task is not None and not task.done()

    def run_in_background(self, run_id: str) -> None:
        """Research a run's open questions in this process's background (the embedded default)."""
        if self.running_here(run_id):
            return

        async def background() -> None:
            try:
                await self.run_existing(run_id)
            except asyncio.CancelledError:
                raise
            except Exception:  # the outermost guard of a background run: log it; the run resumes on restart
                logger.exception("background run %s stopped", run_id)

        task = asyncio.create_task(background(), name=f"researchcrew-run-{run_id}")
        self._background[run_id] = task
        task.add_done_callback(lambda _: self._background.pop(run_id, None))

    async def cancel(self, user_id: str, run_id: str) -> RunInfo:
        """Stop the questions not yet started (those being researched finish)."""
        return await (await self.store()).cancel_run(run_id, owner=user_id)

    async def status(self, user_id: str, run_id: str) -> RunInfo:
        return await (await self.store()).get_run(run_id, owner=user_id)

    async def runs(self, user_id: str, job: str | None = None, *, limit: int = 50) -> builtins.list[RunInfo]:
        """The user's runs, newest first (of one job, by name or id, when ``job`` is given)."""
        store = await self.store()
        job_id = (await store.job_row(user_id, job)).id if job is not None else None
        return await store.list_runs(user_id, job_id, limit=limit)

    async def results(self, user_id: str, run_id: str) -> builtins.list[QuestionResult]:
        return await (await self.store()).results(run_id, owner=user_id)

    async def export(self, user_id: str, run_id: str, format: ExportFormat) -> str:
        """The run's results as ``csv``, ``jsonl`` or ``md`` (a report with what is new since the previous run)."""
        store = await self.store()
        row = await store.run_row(run_id, owner=user_id)
        results = await store.results(run_id, owner=user_id)
        if format == "jsonl":
            return to_jsonl(results)
        job = await store.job_by_id(row.job_id)
        if format == "csv":
            return to_csv(results, list(job.columns) if job is not None else [])
        if format != "md":
            raise JobInputError(f"unknown export format {format!r}: use csv, jsonl or md")
        previous_row = await store.previous_run(row)
        previous = None
        if previous_row is not None:
            previous = (await store.get_run(previous_row.id), await store.results(previous_row.id))
        return to_markdown(await store.get_run(run_id), results, previous=previous)

    async def export_tables(self, user_id: str, run_id: str) -> dict[str, str]:
        """The whole table of each structured question of the run, as CSV (issue 22): file name
        (``q<index>-<table id>.csv``) → CSV text. A table no longer stored (forgotten) gives the rows its answer
        showed. Questions answered without a table give nothing."""
        from researchcrew.errors import TableNotFoundError
        from researchcrew.text.answer_tables import table_csv

        store = await self.store()
        await store.run_row(run_id, owner=user_id)  # another user's run is not found
        files: dict[str, str] = {}
        for result in await store.results(run_id, owner=user_id):
            table = result.response.table if result.response is not None else None
            if result.response is None or table is None:
                continue
            try:
                stored = await self.runtime.answer_table(user_id, result.response.query.session_id, table.table_id)
                columns, rows = stored.columns, stored.rows
            except TableNotFoundError:
                columns, rows = table.columns, table.rows
            files[f"q{result.index:03d}-{table.table_id}.csv"] = table_csv(columns, rows)
        return files

    # Lifecycle --------------------------------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Stop background runs (their questions in progress go back to pending, for the next start) and the
        queue connection."""
        tasks = list(self._background.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._broker is not None:
            broker, self._broker = self._broker, None
            await broker.shutdown()


def _problems(error: ValidationError) -> str:
    problems = []
    for entry in error.errors():
        where = ".".join(str(part) for part in entry["loc"])
        message = str(entry["msg"]).removeprefix("Value error, ")
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(problems)
