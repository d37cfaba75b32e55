"""The at-scale guarantees, with real `researchcrew worker`/`scheduler` processes on this machine's Redis and
PostgreSQL: exactly one result per question with two workers, a SIGKILLed worker's question answered by another,
resume after a full restart, cancel, failures for good and transient ones, one run per slot with two schedulers."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from researchcrew.jobs.api import Jobs
from researchcrew.jobs.contracts import QuestionResult
from researchcrew.runtime import open_runtime
from tests.jobs.cluster import ArxivStandIn, Cluster, question, wait_for
from tests.jobs.conftest import RedisFixture
from tests.loopback.server import LoopbackServer, Reply

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres]
FINISHED = {"answered", "uncertain", "failed", "cancelled"}


@pytest.fixture
def arxiv() -> Iterator[tuple[ArxivStandIn, LoopbackServer]]:
    stand_in = ArxivStandIn()
    with LoopbackServer(stand_in) as server:
        yield stand_in, server


@pytest.fixture
def cluster_for(
    tmp_path: Path, postgres_url: str, redis_service: RedisFixture, arxiv: tuple[ArxivStandIn, LoopbackServer]
) -> Iterator[Any]:
    made: list[Cluster] = []

    def make(**settings: str) -> Cluster:
        settings.setdefault("arxiv__api_url", f"{arxiv[1].url}/api/query")
        cluster = Cluster(tmp_path, postgres_url, redis_service, **settings)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.close()


@pytest.fixture
async def jobs_on() -> AsyncIterator[Any]:
    opened: list[Any] = []

    async def make(cluster: Cluster) -> Jobs:
        runtime = open_runtime(cluster.settings(), remember=False)
        jobs = Jobs(runtime)
        opened.append((runtime, jobs))
        return jobs

    yield make
    for runtime, jobs in opened:
        await jobs.aclose()
        await runtime.aclose()


async def _finished(jobs: Jobs, run_id: str) -> bool:
    return (await jobs.status("ada", run_id)).finished


def _pid(result_or_owner: str | None) -> int:
    assert result_or_owner is not None
    return int(result_or_owner.split(":")[1])


async def test_two_workers_store_each_of_200_questions_exactly_once(cluster_for: Any, jobs_on: Any, arxiv: Any) -> None:
    stand_in, _ = arxiv
    stand_in.delay_s = 0.02
    cluster = cluster_for(jobs__concurrency="4")
    jobs = await jobs_on(cluster)
    await jobs.create("ada", name="big", questions=[question(n) for n in range(200)])
    workers = [cluster.start("worker"), cluster.start("worker")]
    run = await jobs.start("ada", "big", executor="queue")
    await wait_for(lambda: _finished(jobs, run.id), 180, "the 200-question run to finish", cluster)
    results: list[QuestionResult] = await jobs.results("ada", run.id)
    assert len(results) == 200 and [r.index for r in results] == list(range(200))
    assert all(r.status in ("answered", "uncertain") for r in results), {r.status for r in results}
    assert all(r.attempts == 1 for r in results)
    assert sorted(stand_in.counts.items()) == [(f"q{n:03d}", 1) for n in range(200)]  # researched once each
    by_process = {r.answered_by for r in results}
    assert len(by_process) == 2, by_process  # both workers took part
    assert all(w.poll() is None for w in workers)


async def test_a_worker_sigkilled_mid_question_has_it_answered_by_another(
    cluster_for: Any, jobs_on: Any, arxiv: Any
) -> None:
    stand_in, _ = arxiv
    stand_in.delay_s = 2.0
    cluster = cluster_for(jobs__concurrency="2")
    jobs = await jobs_on(cluster)
    await jobs.create("ada", name="killed", questions=[question(n) for n in range(6)])
    cluster.start("worker")
    cluster.start("worker")
    run = await jobs.start("ada", "killed", executor="queue")
    store = await jobs.store()

    async def someone_is_working() -> bool:
        return bool(stand_in.counts) and any(r.status == "running" for r in await jobs.results("ada", run.id))

    await wait_for(someone_is_working, 90, "a question to be in progress", cluster)
    from sqlalchemy import select

    from researchcrew.db.job_tables import RunItemRow

    async with store._read() as session:
        running = (
            (
                await session.execute(
                    select(RunItemRow).where(RunItemRow.run_id == run.id, RunItemRow.status == "running").limit(1)
                )
            )
            .scalars()
            .one()
        )
        victim = _pid(running.lease_owner)
        os.kill(victim, signal.SIGKILL)  # mid-question: its messages are unacknowledged, its leases held
        held = (await session.execute(select(RunItemRow).where(RunItemRow.run_id == run.id))).scalars().all()
    interrupted = {row.idx for row in held if row.status == "running" and _pid(row.lease_owner) == victim}
    assert running.idx in interrupted
    await wait_for(lambda: _finished(jobs, run.id), 120, "the run to finish after the kill", cluster)
    results = await jobs.results("ada", run.id)
    assert all(r.status in ("answered", "uncertain") for r in results), [
        (r.index, r.status, r.failure) for r in results
    ]
    for result in results:
        if result.index in interrupted:  # redelivered and researched again, by another process
            assert result.attempts == 2 and _pid(result.answered_by) != victim
        else:
            assert result.attempts == 1


async def test_a_run_resumes_after_every_process_restarts_without_repeating_answers(
    cluster_for: Any, jobs_on: Any, arxiv: Any
) -> None:
    stand_in, _ = arxiv
    stand_in.delay_s = 0.5
    cluster = cluster_for(jobs__concurrency="2")
    jobs = await jobs_on(cluster)
    await jobs.create("ada", name="restart", questions=[question(n) for n in range(12)])
    first = cluster.start("worker")
    run = await jobs.start("ada", "restart", executor="queue")

    async def some_answered() -> bool:
        return sum(r.status in FINISHED for r in await jobs.results("ada", run.id)) >= 4

    await wait_for(some_answered, 90, "four answers before the restart", cluster)
    cluster.kill(first)  # every researchcrew process of the deployment is gone
    before = {r.question for r in await jobs.results("ada", run.id) if r.status in FINISHED}
    cluster.start("worker")
    await wait_for(lambda: _finished(jobs, run.id), 120, "the run to finish after the restart", cluster)
    results = await jobs.results("ada", run.id)
    assert all(r.status in ("answered", "uncertain") for r in results)
    for result in results:
        if result.question in before:
            token = result.question.split("method ")[1].rstrip("?")
            assert stand_in.counts[token] == 1, token  # a stored answer is never researched again


async def test_cancel_stops_the_questions_not_yet_started(cluster_for: Any, jobs_on: Any, arxiv: Any) -> None:
    stand_in, _ = arxiv
    stand_in.delay_s = 1.0
    cluster = cluster_for(jobs__concurrency="1")
    jobs = await jobs_on(cluster)
    await jobs.create("ada", name="cancelled", questions=[question(n) for n in range(8)])
    cluster.start("worker")
    run = await jobs.start("ada", "cancelled", executor="queue")

    async def started() -> bool:
        return bool(stand_in.counts)

    await wait_for(started, 90, "the first question to start", cluster)
    cancelled = await jobs.cancel("ada", run.id)
    assert cancelled.cancel_requested
    await wait_for(lambda: _finished(jobs, run.id), 60, "the cancelled run to end", cluster)
    info = await jobs.status("ada", run.id)
    assert info.status == "cancelled" and info.counts.cancelled >= 6
    await asyncio.sleep(1.5)
    assert sum(stand_in.counts.values()) <= 2  # nothing after the cancel was researched


async def test_failures_for_good_end_the_run_partial_and_transient_ones_are_retried(
    cluster_for: Any, jobs_on: Any, arxiv: Any
) -> None:
    stand_in, _ = arxiv
    stand_in.failures["q000"] = lambda attempt: Reply.text("bad query", status=400)  # for good
    stand_in.failures["q001"] = lambda attempt: Reply.text("busy", status=503) if attempt <= 2 else None
    cluster = cluster_for(jobs__concurrency="2", jobs__attempts="3")
    jobs = await jobs_on(cluster)
    await jobs.create("ada", name="faults", questions=[question(n) for n in range(3)])
    cluster.start("worker")
    run = await jobs.start("ada", "faults", executor="queue")
    await wait_for(lambda: _finished(jobs, run.id), 120, "the run to end", cluster)
    info = await jobs.status("ada", run.id)
    assert info.status == "partial" and (info.counts.failed, info.counts.total) == (1, 3)
    failed, retried, fine = await jobs.results("ada", run.id)
    assert failed.status == "failed" and failed.failure is not None
    assert "HTTP 400" in failed.failure.message and stand_in.counts["q000"] == 1  # not retried
    assert retried.status in ("answered", "uncertain") and stand_in.counts["q001"] == 3
    assert fine.status in ("answered", "uncertain")
    assert [(f.source, f.kind) for f in info.source_failures] == [("arxiv", "http_error")]


async def test_two_schedulers_fire_a_missed_slot_once(cluster_for: Any, jobs_on: Any, arxiv: Any) -> None:
    stand_in, _ = arxiv
    cluster = cluster_for()
    jobs = await jobs_on(cluster)
    # Yearly, so that no new slot comes during the test: only the missed one can run.
    await jobs.create("ada", name="daily", questions=[question(n) for n in range(3)], schedule="0 0 1 1 *")
    store = await jobs.store()
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import update

    from researchcrew.db.job_tables import JobRow

    async with store._write.begin() as session:  # created three years ago: three slots missed, one runs
        await session.execute(update(JobRow).values(created_at=datetime.now(UTC) - timedelta(days=3 * 366)))
    cluster.start("worker")
    cluster.start("scheduler")
    cluster.start("scheduler")

    async def ran() -> bool:
        runs = await jobs.runs("ada", "daily")
        return bool(runs) and runs[-1].finished

    await wait_for(ran, 120, "the missed slot's run to finish", cluster)
    await asyncio.sleep(5)  # both schedulers refreshed again meanwhile (every 2 s): nothing more may run
    runs = await jobs.runs("ada", "daily")
    assert len(runs) == 1 and runs[0].trigger == "catch_up" and runs[0].counts.total == 3
    assert sorted(stand_in.counts.values()) == [1, 1, 1]  # dispatched once although fired twice
