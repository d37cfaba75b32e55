"""`researchcrew jobs ...`: batch research — many questions, on a schedule, with results kept and exported.

    researchcrew jobs add questions.csv --name weekly-testing --schedule "0 6 * * MON" --tz Europe/Berlin
    researchcrew jobs run weekly-testing              # now, in this process, with a progress bar
    researchcrew jobs run weekly-testing --queue      # on the `researchcrew worker` processes (Redis)
    researchcrew jobs list | runs NAME | status RUN | cancel RUN | resume RUN | remove NAME
    researchcrew jobs results RUN --format csv|jsonl|md [-o FILE]

Every command acts for one user (``--user``, default ``local``, the same as ``researchcrew ask``). Input problems
(file, cron, time zone, options) end in one line naming what is wrong, before anything is stored.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click

from researchcrew.cli._common import echo_json, load_settings, local_option, route_for, with_runtime, with_service

if TYPE_CHECKING:
    from researchcrew.client import ServiceClient
    from researchcrew.jobs.api import Jobs
    from researchcrew.jobs.contracts import JobInfo, RunInfo
    from researchcrew.runtime import Runtime
    from researchcrew.settings import Settings

_USER = click.option(
    "--user",
    "user_id",
    default="local",
    show_default=True,
    envvar="RESEARCHCREW_USER",
    help="The user the jobs belong to.",
)
_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def _on_jobs(action: Any, **options: Any) -> Any:
    """Run ``action(jobs)`` on a runtime and close both."""
    from researchcrew.jobs.api import Jobs

    async def run(runtime: Runtime) -> Any:
        jobs = Jobs(runtime)
        try:
            return await action(jobs)
        finally:
            await jobs.aclose()

    return with_runtime(run, **options)


@click.group()
def jobs() -> None:
    """Batch research jobs: add, run (now or on a schedule), follow, export."""


@jobs.command()
@click.argument("source", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--name", required=True, help="A name for the job, unique among your jobs.")
@click.option("-q", "--question", "questions", multiple=True, help="A question (repeatable), instead of a file.")
@click.option("--schedule", default=None, metavar="CRON", help='Run by itself on this cron, e.g. "0 6 * * MON".')
@click.option("--tz", "timezone", default="UTC", show_default=True, help="Time zone of the schedule (IANA name).")
@click.option("--webhook", default=None, metavar="URL", help="POST each finished run here, signed with HMAC-SHA256.")
@click.option("--format", "response_format", type=click.Choice(["concise", "detailed", "technical"]), default=None)
@click.option("--source-first", "preferred_sources", multiple=True, metavar="TYPE", help="Search this source first.")
@click.option("--exclude", "exclude_sources", multiple=True, metavar="TYPE", help="Do not search this source type.")
@click.option("--deadline", "deadline_s", type=click.FloatRange(min=0.5, max=600), default=None, help="Seconds each.")
@click.option("--max-words", "max_response_length", type=click.IntRange(50, 20_000), default=None)
@click.option("--remember", is_flag=True, help="Store the answers in your conversation memory too.")
@_USER
@_JSON
def add(
    source: Path | None,
    name: str,
    questions: tuple[str, ...],
    schedule: str | None,
    timezone: str,
    webhook: str | None,
    response_format: str | None,
    preferred_sources: tuple[str, ...],
    exclude_sources: tuple[str, ...],
    deadline_s: float | None,
    max_response_length: int | None,
    remember: bool,
    user_id: str,
    as_json: bool,
) -> None:
    """Add a job from a file (.txt one question per line, .csv with a `question` column, .jsonl) or -q questions."""
    if (source is None) == (not questions):
        raise click.UsageError("give either a question file or one or more -q/--question, not both or neither")
    options: dict[str, Any] = {
        "response_format": response_format,
        "preferred_sources": list(preferred_sources) or None,
        "exclude_sources": list(exclude_sources) or None,
        "deadline_s": deadline_s,
        "max_response_length": max_response_length,
    }
    given = {key: value for key, value in options.items() if value is not None}

    async def create(jobs: Jobs) -> Any:
        return await jobs.create(
            user_id,
            name=name,
            questions=source if source is not None else list(questions),
            options=given,
            schedule=schedule,
            timezone=timezone,
            webhook_url=webhook,
            remember=remember,
        )

    created = _on_jobs(create)
    if as_json:
        echo_json(created.model_dump(mode="json"))
        return
    job = created.job
    click.echo(f"Added job {job.name} ({job.id}): {job.question_count} question(s) from {job.source}.")
    if job.columns:
        click.echo(f"  carried columns: {', '.join(job.columns)}")
    if job.schedule is not None and job.next_run_at is not None:
        click.echo(
            f"  schedule: {job.schedule.cron} ({job.schedule.timezone}); next run {job.next_run_at:%Y-%m-%d %H:%M} UTC"
        )
    if created.webhook_secret:
        click.echo(f"  webhook secret (shown once; verify X-Researchcrew-Signature with it): {created.webhook_secret}")


@jobs.command(name="list")
@_USER
@_JSON
def list_jobs(user_id: str, as_json: bool) -> None:
    """List your jobs."""
    found: list[JobInfo] = _on_jobs(lambda jobs: jobs.list(user_id))
    if as_json:
        echo_json([job.model_dump(mode="json") for job in found])
        return
    if not found:
        click.echo(f"No jobs for user {user_id}. Add one with `researchcrew jobs add FILE --name NAME`.")
        return
    for job in found:
        when = f"{job.schedule.cron} ({job.schedule.timezone})" if job.schedule else "by hand"
        click.echo(f"{job.name:<30} {job.question_count:>6} question(s)  {when}")


@jobs.command()
@click.argument("name")
@click.option("--queue", is_flag=True, help="Run on the worker processes (needs RESEARCHCREW_REDIS__URL).")
@click.option("--detach", is_flag=True, help="With --queue: print the run id and return at once.")
@_USER
@_JSON
@local_option
def run(name: str, queue: bool, detach: bool, user_id: str, as_json: bool, local: bool) -> None:
    """Run a job now: in this process with a progress bar, or on the workers with --queue. With a service running
    for the data folder, the run is the service's (it owns the knowledge base), followed here the same way."""
    from tqdm import tqdm

    from researchcrew.jobs.contracts import RunInfo

    settings = load_settings()
    route = route_for(settings, local=local, user_id=user_id)
    if route.mode == "local" and not queue:  # researched here: a knowledge base held elsewhere fails every question
        from researchcrew.cli._startup import require_own_knowledge_base

        require_own_knowledge_base("jobs run", settings)

    state: dict[str, Any] = {}

    def started(info: RunInfo) -> None:
        state["run"] = info
        bar = tqdm(total=info.counts.total, unit="question", file=sys.stderr, disable=as_json, dynamic_ncols=True)
        bar.set_description(f"run {info.id[:12]}")
        state["bar"] = bar

    def progressed(_index: int, _status: str | None) -> None:
        if "bar" in state:
            state["bar"].update(1)

    async def in_process(jobs: Jobs) -> RunInfo:
        return await jobs.run(user_id, name, on_progress=progressed, on_start=started)

    async def on_workers(jobs: Jobs) -> RunInfo:
        info = await jobs.start(user_id, name, executor="queue")
        if detach:
            return info
        started(info)
        done = 0
        while not info.finished:
            await asyncio.sleep(0.5)
            info = await jobs.status(user_id, info.id)
            state["bar"].update(info.counts.finished - done)
            done = info.counts.finished
        return info

    async def in_service(client: ServiceClient) -> RunInfo:
        info = RunInfo.model_validate(await client.start_run(user_id, name))
        if detach and queue:
            return info
        started(info)
        done = 0
        while not info.finished:
            await asyncio.sleep(0.5)
            info = RunInfo.model_validate(await client.run_status(user_id, info.id))
            state["bar"].update(info.counts.finished - done)
            done = info.counts.finished
        return info

    try:
        if route.mode == "service":
            result: RunInfo = with_service(route, in_service, user_id=user_id)
        else:
            result = _on_jobs(on_workers if queue else in_process)
    except KeyboardInterrupt:
        info = state.get("run")
        if info is None:
            raise click.Abort() from None
        what = (
            "keeps running in the service"
            if route.mode == "service"
            else "keeps running on the workers"
            if queue
            else "stopped; its stored answers are kept"
        )
        raise click.ClickException(
            f"interrupted: run {info.id} {what}; continue it with `researchcrew jobs resume {info.id}`"
        ) from None
    finally:
        if "bar" in state:
            state["bar"].close()
    if as_json:
        echo_json(result.model_dump(mode="json"))
        return
    click.echo(render_run(result))


@jobs.command()
@click.argument("name")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000))
@_USER
@_JSON
def runs(name: str, limit: int, user_id: str, as_json: bool) -> None:
    """List a job's runs, newest first."""
    found: list[RunInfo] = _on_jobs(lambda jobs: jobs.runs(user_id, name, limit=limit))
    if as_json:
        echo_json([run.model_dump(mode="json") for run in found])
        return
    if not found:
        click.echo(f"Job {name} has not run yet. Run it with `researchcrew jobs run {name}`.")
    for info in found:
        counts = info.counts
        click.echo(
            f"{info.id}  {info.created_at:%Y-%m-%d %H:%M}  {info.status:<9} {info.trigger:<8} "
            f"{counts.answered}/{counts.total} answered, {counts.uncertain} uncertain, {counts.failed} failed"
        )


@jobs.command()
@click.argument("run_id")
@_USER
@_JSON
def status(run_id: str, user_id: str, as_json: bool) -> None:
    """Show where a run stands."""
    info: RunInfo = _on_jobs(lambda jobs: jobs.status(user_id, run_id))
    if as_json:
        echo_json(info.model_dump(mode="json"))
        return
    click.echo(render_run(info))


@jobs.command()
@click.argument("run_id")
@click.option("--format", "export_format", type=click.Choice(["csv", "jsonl", "md"]), default="csv", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True, path_type=Path), default=None)
@click.option(
    "--tables",
    "tables_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Also write each structured question's whole table as CSV into this folder (q<index>-<table>.csv).",
)
@_USER
def results(
    run_id: str,
    export_format: Literal["csv", "jsonl", "md"],
    output: Path | None,
    tables_dir: Path | None,
    user_id: str,
) -> None:
    """Export a run's results: CSV (one row per question), JSONL (full answers) or a Markdown report. What the run
    cost is in the CSV's run_cost_usd column and the report's summary; beside a JSONL file (whose every line is one
    question's result) it is FILE.run.json, the run as `jobs status --json` prints it. ``--tables DIR`` also writes
    each structured question's whole table as CSV."""
    if tables_dir is not None:
        files: dict[str, str] = _on_jobs(lambda jobs: jobs.export_tables(user_id, run_id))
        tables_dir.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            (tables_dir / name).write_text(content, encoding="utf-8", newline="")
        click.echo(f"Wrote {len(files)} table(s) to {tables_dir}.", err=True)

    async def export(jobs: Jobs) -> tuple[str, RunInfo]:
        return await jobs.export(user_id, run_id, export_format), await jobs.status(user_id, run_id)

    text, info = _on_jobs(export)
    if output is None:
        click.echo(text, nl=False)
        click.echo(f"Run cost: {info.cost.summary()}", err=True)
        return
    output.write_text(text, encoding="utf-8")
    click.echo(f"Wrote {output} ({len(text.encode('utf-8'))} bytes).", err=True)
    if export_format == "jsonl":
        sidecar = output.with_name(output.name + ".run.json")
        sidecar.write_text(info.model_dump_json(indent=2) + "\n", encoding="utf-8")
        click.echo(f"Wrote {sidecar} (the run, with what it cost: {info.cost.summary()}).", err=True)


@jobs.command()
@click.argument("run_id")
@_USER
@_JSON
def cancel(run_id: str, user_id: str, as_json: bool) -> None:
    """Cancel a run: questions not yet started are not researched."""
    info: RunInfo = _on_jobs(lambda jobs: jobs.cancel(user_id, run_id))
    if as_json:
        echo_json(info.model_dump(mode="json"))
        return
    click.echo(f"Cancelled run {info.id}: {info.counts.cancelled} question(s) will not be researched.")
    click.echo(render_run(info))


@jobs.command()
@click.argument("run_id")
@_USER
@_JSON
@local_option
def resume(run_id: str, user_id: str, as_json: bool, local: bool) -> None:
    """Continue a run whose process stopped; stored answers are not repeated (in the service when one runs)."""
    from tqdm import tqdm

    from researchcrew.jobs.contracts import RunInfo

    bar = tqdm(unit="question", file=sys.stderr, disable=as_json, desc=f"run {run_id[:12]}")

    async def in_service(client: ServiceClient) -> RunInfo:
        info = RunInfo.model_validate(await client.resume_run(user_id, run_id))
        done = info.counts.finished
        while not info.finished:
            await asyncio.sleep(0.5)
            info = RunInfo.model_validate(await client.run_status(user_id, run_id))
            bar.update(info.counts.finished - done)
            done = info.counts.finished
        return info

    route = route_for(load_settings(), local=local, user_id=user_id)
    try:
        if route.mode == "service":
            info: RunInfo = with_service(route, in_service, user_id=user_id)
        else:
            info = _on_jobs(lambda jobs: jobs.resume(user_id, run_id, on_progress=lambda *_: bar.update(1)))
    finally:
        bar.close()
    if as_json:
        echo_json(info.model_dump(mode="json"))
        return
    click.echo(render_run(info))


@jobs.command()
@click.argument("name")
@click.option("--yes", is_flag=True, help="Remove without asking.")
@_USER
def remove(name: str, yes: bool, user_id: str) -> None:
    """Remove a job with all its runs and results."""
    if not yes:
        click.confirm(f"Remove job {name!r} with all its runs and results?", abort=True)
    removed: JobInfo = _on_jobs(lambda jobs: jobs.remove(user_id, name))
    click.echo(f"Removed job {removed.name} and its runs.")


def render_run(info: RunInfo) -> str:
    """A run as a person reads it in a terminal."""
    counts = info.counts
    lines = [f"Run {info.id} of job {info.job_name}: {info.status} ({info.trigger}, {info.executor.replace('_', ' ')})"]
    if info.slot_at:
        lines.append(f"  schedule slot {info.slot_at:%Y-%m-%d %H:%M} UTC")
    timing = f"  created {info.created_at:%Y-%m-%d %H:%M:%S} UTC"
    if info.started_at and info.finished_at:
        timing += f", took {(info.finished_at - info.started_at).total_seconds():.1f} s"
    lines.append(timing)
    parts = [f"{counts.answered} answered", f"{counts.uncertain} uncertain", f"{counts.failed} failed"]
    parts += [
        f"{value} {label}"
        for value, label in ((counts.cancelled, "cancelled"), (counts.running, "running"), (counts.pending, "pending"))
        if value
    ]
    lines.append(f"  {counts.total} question(s): {', '.join(parts)}")
    lines.append(f"  cost: {info.cost.summary()}")
    for failure in info.source_failures[:6]:
        lines.append(f"  source {failure.source} failed ({failure.kind}) in {failure.count}: {failure.example[:120]}")
    if info.webhook_state != "none":
        lines.append(f"  webhook: {info.webhook_state}" + (f" ({info.webhook_error})" if info.webhook_error else ""))
    return "\n".join(lines)


def _require_queue_servers(settings: Settings) -> None:
    """Redis and the memory database answer (retried for ``jobs.startup_timeout_s``), or the command ends in one
    line. Without a Redis URL the queue itself says what to set."""
    from researchcrew.cli._startup import memory_database, redis, require
    from researchcrew.errors import QueueUnavailableError
    from researchcrew.jobs.queue import redis_broker

    try:
        redis_broker(settings)
    except QueueUnavailableError as error:
        raise click.ClickException(str(error)) from error
    require([redis(settings), memory_database(settings)], retry_for_s=settings.jobs.startup_timeout_s)


@click.command()
@click.option("--processes", type=click.IntRange(1, 64), default=None, help="Worker processes (default: settings).")
def worker(processes: int | None) -> None:
    """Research queued batch questions (Redis); run as many as you like, on any machine."""
    import logging

    from researchcrew.cli._startup import require_own_knowledge_base
    from researchcrew.errors import QueueUnavailableError
    from researchcrew.jobs.queue import run_workers

    settings = load_settings()
    require_own_knowledge_base("researchcrew worker", settings, processes=processes or settings.jobs.worker_processes)
    _require_queue_servers(settings)
    level = "DEBUG" if logging.getLogger().getEffectiveLevel() <= logging.DEBUG else "INFO"
    try:
        code = run_workers(settings, processes=processes or settings.jobs.worker_processes, log_level=level)
    except QueueUnavailableError as error:
        raise click.ClickException(str(error)) from error
    sys.exit(code or 0)


@click.command()
def scheduler() -> None:
    """Fire job schedules onto the queue (Redis). Two may run: each slot still runs once."""
    import logging

    from researchcrew.errors import QueueUnavailableError
    from researchcrew.jobs.scheduling import run_scheduler_process

    settings = load_settings()
    _require_queue_servers(settings)
    logging.getLogger("researchcrew.jobs").setLevel(logging.INFO)
    logging.getLogger("taskiq").setLevel(logging.INFO)
    started = time.monotonic()
    try:
        asyncio.run(run_scheduler_process(settings))
    except QueueUnavailableError as error:
        raise click.ClickException(str(error)) from error
    except KeyboardInterrupt:
        click.echo(f"Scheduler stopped after {time.monotonic() - started:.0f} s.", err=True)
