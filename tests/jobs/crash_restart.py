"""Issue 17, item 5, as it was found: `researchcrew serve` SIGKILLed in the middle of a 6-question run and started
again at once. The questions the dead server held are taken back by the new one without waiting for their leases
to run out, and every question ends with exactly one stored result.

The test is defined here and collected once per backend, each a module of its own (``test_crash_restart_sqlite.py``,
``test_crash_restart_postgresql.py``, each giving its ``database_url``): pytest-xdist's ``--dist loadfile`` keeps a
module on one process, and as one module the two backends were the longest module of tests/jobs.

Timing: nothing here waits on a clock for the product to do its job. The lease is far longer than the test may run
(its ``timeout`` marker), so a question the second server re-took before its lease ran out can only have been taken
from the dead server by its pid; each wait is for what the test needs (four questions leased, the run ended),
bounded by the test's budget. With a 120 s lease, a second ``serve`` that took over two minutes to start at load
20 found the leases run out (the questions were then re-taken as expired leases, and the test failed).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from researchcrew.db.job_tables import RunItemRow
from researchcrew.jobs._store import JobStore
from researchcrew.jobs.contracts import JobQuestion, JobSpec
from researchcrew.memory.store import MemoryStore
from tests.e2e.support import MODEL_CACHE_DIR
from tests.helpers.services import MEMORY_CONNECT_TIMEOUT
from tests.jobs.cluster import ArxivStandIn, question, wait_for
from tests.loopback.server import LoopbackServer
from tests.service.processes import child_environment, serve

TEST_BUDGET_S = 900  # the whole test, two ``serve`` starts included, however loaded the machine
pytestmark = [pytest.mark.slow, pytest.mark.timeout(TEST_BUDGET_S)]

# The most jobs.lease_s allows, 4x the test's budget: a question re-taken before its lease ran out was taken from
# the dead server because its pid is gone, not because the lease expired (renewed every third of it: never here).
LEASE_S = 3600
POLL_S = 0.5
WAIT_S = TEST_BUDGET_S - 60  # each wait: bounded by the test's budget, not by a guess at how long a start takes


@pytest.fixture
def arxiv() -> Iterator[tuple[ArxivStandIn, LoopbackServer]]:
    stand_in = ArxivStandIn(delay_s=1.5)  # a slow source: questions are mid-research when the server dies
    with LoopbackServer(stand_in) as server:
        yield stand_in, server


def _environment(tmp_path: Path, database_url: str, arxiv_url: str) -> dict[str, str]:
    return child_environment(
        {
            "RESEARCHCREW_DATA_DIR": str(tmp_path / "serve"),
            "RESEARCHCREW_MEMORY__DATABASE_URL": database_url,
            "RESEARCHCREW_ENABLED_SOURCES": '["arxiv"]',
            "RESEARCHCREW_ARXIV__API_URL": f"{arxiv_url}/api/query",
            "RESEARCHCREW_ARXIV__MIN_INTERVAL_S": "0",
            "RESEARCHCREW_ARXIV__NUM_RETRIES": "0",
            "RESEARCHCREW_ARXIV__CACHE_TTL_S": "0",
            "RESEARCHCREW_ARXIV__TIMEOUT_S": "20",
            "RESEARCHCREW_RETRIEVAL__TIMEOUT_PER_SOURCE_S": "20",
            "RESEARCHCREW_EMBEDDING__CACHE_DIR": str(MODEL_CACHE_DIR),
            **MEMORY_CONNECT_TIMEOUT,
            "RESEARCHCREW_JOBS__CONCURRENCY": "4",
            "RESEARCHCREW_JOBS__LEASE_S": str(LEASE_S),
            "RESEARCHCREW_JOBS__LEASE_POLL_S": str(POLL_S),
            "RESEARCHCREW_JOBS__EMBEDDED_SCHEDULER": "true",
            "CREWAI_DISABLE_TELEMETRY": "true",
            "OTEL_SDK_DISABLED": "true",
            "CREWAI_TRACING_ENABLED": "false",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "GRPC_VERBOSITY": "NONE",
        }
    )


async def _items(store: JobStore, run_id: str) -> list[RunItemRow]:
    async with store._read() as session:
        stmt = select(RunItemRow).where(RunItemRow.run_id == run_id).order_by(RunItemRow.idx)
        return list((await session.execute(stmt)).scalars())


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


async def test_sigkill_mid_run_and_an_immediate_restart_end_every_question_once(
    tmp_path: Path, database_url: str, arxiv: tuple[ArxivStandIn, LoopbackServer]
) -> None:
    stand_in, server = arxiv
    memory = await MemoryStore.open(database_url)
    try:
        store = JobStore(memory.engine)
        questions = [JobQuestion(question=question(n)) for n in range(6)]
        await store.create_job("ada", JobSpec(name="crash", questions=questions))
        # A run the server finds unfinished when it starts, exactly as one it was running when it crashed.
        run_id, _ = await store.create_run(await store.job_row("ada", "crash"), trigger="manual", executor="in_process")
        environment = _environment(tmp_path, database_url, server.url)

        async def four_in_progress() -> bool:
            running = [row for row in await _items(store, run_id) if row.status == "running"]
            return len(running) == 4 and sum(stand_in.counts.values()) >= 1  # leased, and research under way

        with serve(env=environment, log_path=tmp_path / "serve-1.log") as first:
            await wait_for(four_in_progress, WAIT_S, "four questions in progress")
            first.process.kill()  # SIGKILL: no drain, no lease given back
            first.process.wait(30)
        before = await _items(store, run_id)
        asked_before = dict(stand_in.counts)
        held = {row.idx: row for row in before if row.status == "running"}
        done_before = {row.idx for row in before if row.status not in ("pending", "running")}
        assert held and all(row.lease_pid == first.process.pid for row in held.values())

        with serve(env=environment, log_path=tmp_path / "serve-2.log") as second:

            async def finished() -> bool:
                return (await store.get_run(run_id)).finished

            await wait_for(finished, WAIT_S, "the run to end after the restart")
            log = second.log()
        run = await store.get_run(run_id)
        results = await store.results(run_id)
    finally:
        await memory.close()
    assert run.status == "completed", (run, log)
    assert [result.index for result in results] == list(range(6))  # one row, one result, per question
    assert all(result.status in ("answered", "uncertain") and result.response is not None for result in results)
    for result in results:
        if result.index in held:  # the dead server's questions, re-done by the new one before their leases ran out
            lease_until = held[result.index].lease_until
            assert lease_until is not None and result.started_at is not None
            assert _aware(result.started_at) < _aware(lease_until)
            assert result.attempts == 2
        else:  # pending (or, rarely, just answered) when the server died: researched once
            assert result.attempts == 1
        done_by = first if result.index in done_before else second
        assert result.answered_by is not None and result.answered_by.endswith(f":{done_by.process.pid}")
    # The new server researched each question the dead one left without a result exactly once more.
    asked = [stand_in.counts[f"q{n:03d}"] - asked_before.get(f"q{n:03d}", 0) for n in range(6)]
    assert asked == [0 if n in done_before else 1 for n in range(6)], (asked, stand_in.counts)
