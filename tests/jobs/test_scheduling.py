"""Schedules: the taskiq schedule source (slot identities, catch-up), and the embedded scheduler that fires slots
and runs them in process — once per slot, even with two schedulers on one database."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import update

from researchcrew.db.job_tables import JobRow
from researchcrew.jobs.api import Jobs
from researchcrew.jobs.embedded import EmbeddedScheduler
from researchcrew.jobs.queue import TASK_FIRE
from researchcrew.jobs.scheduling import JobScheduleSource
from researchcrew.runtime import open_runtime
from researchcrew.settings import JobsSettings, Settings
from researchcrew.testing import FakeTool, fake_chunk

# Seven and a half minutes past the current hour: the job's creation is backdated from the real clock.
NOW = datetime.now(UTC).replace(minute=7, second=30, microsecond=0)
HOUR = NOW.replace(minute=0, second=0)


def _tool() -> FakeTool:
    # Evidence for both questions the jobs here ask: an answer needs evidence that supports its own question.
    return FakeTool(
        "rag",
        chunks=[
            fake_chunk("rag", 1, content="A flaky test is a test that fails at random.", semantic_relevance=0.9),
            fake_chunk(
                "rag",
                2,
                content="RAG is retrieval-augmented generation: answers grounded in retrieved passages.",
                semantic_relevance=0.9,
            ),
        ],
    )


async def _backdate(jobs: Jobs, name: str, days: float) -> None:
    store = await jobs.store()
    async with store._write.begin() as session:
        await session.execute(
            update(JobRow).where(JobRow.name == name).values(created_at=datetime.now(UTC) - timedelta(days=days))
        )


async def test_the_source_sends_the_next_slot_and_the_latest_missed_one_once(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, jobs=JobsSettings(schedule_refresh_s=30))
    async with open_runtime(settings, tools=[_tool()], remember=False) as runtime:
        jobs = Jobs(runtime)
        created = await jobs.create("ada", name="q", questions=["What?"], schedule="*/15 * * * *")
        await jobs.create("ada", name="by-hand", questions=["What?"])
        await _backdate(jobs, "q", 2)
        source = JobScheduleSource(jobs.store, settings.jobs, clock=lambda: NOW)
        tasks = await source.get_schedules()
        quarter = HOUR + timedelta(minutes=15)
        assert [(t.kwargs["slot"], t.kwargs["trigger"], t.time) for t in tasks] == [
            (HOUR.isoformat(), "catch_up", HOUR),
            (quarter.isoformat(), "schedule", quarter),
        ]
        assert {t.task_name for t in tasks} == {TASK_FIRE}
        assert tasks[0].schedule_id == f"{created.job.id}@{HOUR.isoformat()}"
        # Once the missed slot has its run, it is not sent again.
        store = await jobs.store()
        await store.create_run(
            await store.job_row("ada", "q"), trigger="catch_up", executor="queue", slot=tasks[0].time
        )
        assert [t.kwargs["slot"] for t in await source.get_schedules()] == [quarter.isoformat()]
        # Just after a slot (within two refreshes) a missing run is the slot itself, not a catch-up.
        on_time = JobScheduleSource(jobs.store, settings.jobs, clock=lambda: quarter + timedelta(seconds=20))
        assert (await on_time.get_schedules())[0].kwargs["trigger"] == "schedule"
        skip = JobScheduleSource(jobs.store, JobsSettings(catch_up="skip"), clock=lambda: NOW + timedelta(minutes=30))
        assert [t.kwargs["trigger"] for t in await skip.get_schedules()] == ["schedule"]


async def test_two_embedded_schedulers_run_a_missed_slot_once(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, jobs=JobsSettings(concurrency=2))
    async with (
        open_runtime(settings, tools=[_tool()], remember=False) as first,
        open_runtime(settings, tools=[_tool()], remember=False) as second,
    ):
        jobs = Jobs(first)
        await jobs.create(
            "ada", name="yearly", questions=["What is a flaky test?", "What is RAG?"], schedule="0 0 1 1 *"
        )
        # Yearly, so no new slot comes during the test; created three years ago: three slots missed, one runs.
        await _backdate(jobs, "yearly", 3 * 366)
        async with EmbeddedScheduler(jobs) as one, EmbeddedScheduler(Jobs(second)) as two:
            for _ in range(100):
                runs = await jobs.runs("ada", "yearly")
                if runs and runs[0].finished:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.5)  # a second tick of both loops: nothing more may fire
            runs = await jobs.runs("ada", "yearly")
            assert len(one.fired) + len(two.fired) == 1
        assert len(runs) == 1
        [run] = runs
        assert (run.trigger, run.status, run.counts.answered) == ("catch_up", "completed", 2)
        expected = datetime.now(UTC).replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
        assert run.slot_at == expected  # the latest missed slot (this year's), not an older one


async def test_the_embedded_scheduler_resumes_runs_an_earlier_process_left(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    async with open_runtime(settings, tools=[_tool()], remember=False) as runtime:
        jobs = Jobs(runtime)
        await jobs.create("ada", name="left", questions=["What is a flaky test?"])
        store = await jobs.store()
        run_id, _ = await store.create_run(await store.job_row("ada", "left"), trigger="manual", executor="in_process")
        async with EmbeddedScheduler(jobs, refresh_s=60):
            for _ in range(100):
                if (await jobs.status("ada", run_id)).finished:
                    break
                await asyncio.sleep(0.05)
        assert (await jobs.status("ada", run_id)).status == "completed"
