"""Nothing stuck after a crash (issue 17, item 5), on SQLite and PostgreSQL: a lease names its holder process; the
questions of a holder that is provably dead on this host are taken back at once, those whose lease ran out are
taken over by a live process without a restart, and each question still ends with exactly one result."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncGenerator, AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update
from taskiq import AsyncBroker
from taskiq.message import BrokerMessage

from researchcrew.db.job_tables import RunItemRow
from researchcrew.jobs._leases import LeaseHolder, this_process
from researchcrew.jobs._store import ItemOutcome, JobStore
from researchcrew.jobs.api import Jobs
from researchcrew.jobs.contracts import JobQuestion, JobSpec
from researchcrew.jobs.embedded import EmbeddedScheduler
from researchcrew.jobs.queue import TASK_ANSWER, sweep_once
from researchcrew.memory.store import MemoryStore
from researchcrew.runtime import open_runtime
from researchcrew.settings import JobsSettings, MemorySettings, Settings
from researchcrew.testing import FakeTool, fake_chunk


def spec(name: str = "weekly", count: int = 3) -> JobSpec:
    questions = [JobQuestion(question=f"What is topic {n}?") for n in range(count)]
    return JobSpec.model_validate({"name": name, "questions": questions})


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def holder(*, host: str | None = None, pid: int | None = None, boot: str | None = None, process: str) -> LeaseHolder:
    me = this_process()
    return LeaseHolder(
        host=host or me.host, pid=pid if pid is not None else me.pid, boot=boot or me.boot, process=process
    )


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[JobStore]:
    memory = await MemoryStore.open(database_url)
    try:
        yield JobStore(memory.engine)
    finally:
        await memory.close()


async def leased_run(store: JobStore, count: int, executor: str = "queue") -> str:
    await store.create_job("ada", spec(count=count))
    run_id, _ = await store.create_run(await store.job_row("ada", "weekly"), trigger="manual", executor=executor)
    return run_id


async def rows(store: JobStore, run_id: str) -> dict[int, RunItemRow]:
    async with store._read() as session:
        found = (await session.execute(select(RunItemRow).where(RunItemRow.run_id == run_id))).scalars()
        return {row.idx: row for row in found}


def test_only_a_holder_provably_dead_on_this_host_counts_as_dead() -> None:
    me = this_process()
    assert me.outlived(dead_pid(), me.boot, "gone")  # the pid is free: the process exited
    assert me.outlived(me.pid, me.boot, "earlier")  # our own pid under another token: an earlier process
    assert me.outlived(os.getppid(), "another-boot", "before-reboot")  # the machine rebooted since
    assert not me.outlived(os.getppid(), me.boot, "alive")  # a live process
    assert not me.outlived(me.pid, me.boot, me.process)  # ourselves
    assert not me.outlived(None, None, None)  # a lease taken before holders were recorded: it runs out instead
    assert this_process() is me and me.name.endswith(f":{os.getpid()}")


async def test_a_dead_holders_questions_are_taken_back_at_once_and_its_late_result_is_refused(store: JobStore) -> None:
    run_id = await leased_run(store, 6)
    me = this_process()
    holders = {
        0: holder(pid=dead_pid(), process="exited"),  # dead: its pid is gone
        1: holder(pid=me.pid, process="earlier"),  # dead: our pid, another token
        2: holder(pid=os.getppid(), boot="rebooted", process="before-reboot"),  # dead: another boot
        3: holder(pid=os.getppid(), process="alive"),  # alive
        4: holder(host="elsewhere", pid=dead_pid(), process="remote"),  # another host: no proof
        5: me,  # ourselves
    }
    for index, owner in holders.items():
        claim = await store.claim_item(run_id, index, f"w{index}:claim", lease_s=300, holder=owner)
        assert claim.state == "claimed"
    stored = await rows(store, run_id)
    assert (stored[0].lease_host, stored[0].lease_pid, stored[0].lease_process) == (me.host, holders[0].pid, "exited")
    # Two sweepers at once: each question is given back once, to exactly one of them.
    first, second = await asyncio.gather(store.reclaim_dead_leases(me), store.reclaim_dead_leases(me))
    given_back = sorted(item.index for item in [*first, *second])
    assert given_back == [0, 1, 2]
    assert {item.executor for item in first + second} == {"queue"}
    assert await store.open_items(run_id) == [0, 1, 2]
    stored = await rows(store, run_id)
    assert [stored[i].status for i in range(6)] == ["pending"] * 3 + ["running"] * 3
    assert stored[0].lease_process is None and stored[0].lease_owner is None
    # Re-done by a live process; the dead holder's late result is refused, the new one stored once.
    taken = await store.claim_item(run_id, 0, "live:claim", lease_s=300)
    assert taken.state == "claimed" and taken.item is not None and taken.item.attempts == 2
    assert not await store.renew_lease(run_id, 0, "w0:claim", 300)
    assert not await store.finish_item(run_id, 0, "w0:claim", ItemOutcome("failed"))
    assert await store.finish_item(run_id, 0, "live:claim", ItemOutcome("uncertain"))
    assert not await store.finish_item(run_id, 0, "w0:claim", ItemOutcome("failed"))
    [result, *_] = await store.results(run_id, owner="ada")
    assert (result.index, result.status, result.attempts) == (0, "uncertain", 2)
    assert await store.reclaim_dead_leases(me) == []


async def test_a_lease_that_ran_out_is_released_once_and_live_ones_are_kept(store: JobStore) -> None:
    run_id = await leased_run(store, 3)
    other = await leased_run_of_other_job(store)
    remote = holder(host="elsewhere", process="remote")
    for index in range(3):
        await store.claim_item(run_id, index, f"r{index}:claim", lease_s=300, holder=remote)
    await store.claim_item(other, 0, "r:other", lease_s=300, holder=remote)
    async with store._write.begin() as session:  # the remote holder went silent: 0's lease and other's ran out
        past = datetime.now(UTC) - timedelta(seconds=1)
        await session.execute(update(RunItemRow).where(RunItemRow.idx == 0).values(lease_until=past))
    released = await asyncio.gather(*(store.release_expired("queue") for _ in range(3)))
    assert sorted((item.run_id, item.index) for batch in released for item in batch) == [(run_id, 0)]
    [other_item] = await store.release_expired("in_process")
    assert (other_item.run_id, other_item.index, other_item.executor) == (other, 0, "in_process")
    assert await store.open_items(run_id) == [0]
    assert not await store.finish_item(run_id, 0, "r0:claim", ItemOutcome("answered"))
    assert (await store.claim_item(run_id, 1, "x:claim", lease_s=300)).state == "busy"  # live leases are kept


async def leased_run_of_other_job(store: JobStore) -> str:
    await store.create_job("bob", spec(name="other", count=1))
    run_id, _ = await store.create_run(await store.job_row("bob", "other"), trigger="manual", executor="in_process")
    return run_id


# A live process takes over without a restart ---------------------------------------------------------------------
class Tool(FakeTool):
    """Evidence for any question, after a short delay; counts the questions it was asked."""

    def __init__(self) -> None:
        super().__init__("rag", delay_s=0.05)
        self.asked: list[str] = []

    async def _search(self, query: str, **options: Any) -> list[Any]:  # type: ignore[override]
        self.asked.append(query)
        await super()._search(query, **options)
        return [fake_chunk("rag", 1, content=f"{query} Flaky tests fail intermittently.", semantic_relevance=0.9)]


@pytest.fixture
async def jobs_on(database_url: str, tmp_path: Path) -> AsyncIterator[tuple[Jobs, Tool]]:
    tool = Tool()
    settings = Settings(
        data_dir=tmp_path / "data",
        memory=MemorySettings(database_url=database_url),
        jobs=JobsSettings(concurrency=2, lease_s=3, lease_poll_s=0.2, retry_backoff_s=0.01, retry_backoff_max_s=0.05),
    )
    async with open_runtime(settings, tools=[tool], remember=False) as runtime:
        jobs = Jobs(runtime)
        try:
            yield jobs, tool
        finally:
            await jobs.aclose()


async def test_a_running_process_takes_over_leases_that_ran_out_without_a_restart(
    jobs_on: tuple[Jobs, Tool],
) -> None:
    jobs, tool = jobs_on
    store = await jobs.store()
    await jobs.create("ada", name="left", questions=[f"What does study {n} say about flaky tests?" for n in range(4)])
    run_id, _ = await store.create_run(await store.job_row("ada", "left"), trigger="manual", executor="in_process")
    remote = holder(host="elsewhere", process="remote")  # a process on another machine, gone silent
    for index in (0, 1):
        await store.claim_item(run_id, index, f"remote:{index}", lease_s=1.0, holder=remote)
    leased_until = {index: row.lease_until for index, row in (await rows(store, run_id)).items() if index < 2}
    run = await asyncio.wait_for(jobs.run_existing(run_id), 60)  # one call: no restart, no second resume
    assert run.status == "completed" and run.counts.answered + run.counts.uncertain == 4
    results = await store.results(run_id)
    assert [result.index for result in results] == [0, 1, 2, 3]
    for result in results[:2]:
        assert result.attempts == 2 and result.answered_by == this_process().name
        until = leased_until[result.index]
        assert until is not None and result.started_at is not None
        assert _aware(result.started_at) >= _aware(until)  # taken over only once the lease had run out
    assert all(result.attempts == 1 for result in results[2:])
    assert sorted(tool.asked) == sorted(result.question for result in results)  # each researched here once
    assert not await store.finish_item(run_id, 0, "remote:0", ItemOutcome("failed"))  # the late writer


async def test_the_embedded_scheduler_takes_over_a_run_a_dead_process_left_while_it_runs(
    jobs_on: tuple[Jobs, Tool],
) -> None:
    jobs, _ = jobs_on
    store = await jobs.store()
    await jobs.create("ada", name="crashed", questions=["What is a flaky test?", "Why do tests flake?"])
    async with EmbeddedScheduler(jobs, refresh_s=60):
        await asyncio.sleep(0.3)  # started with nothing to resume
        # Meanwhile another process on this host started a run, leased a question and was SIGKILLed.
        run_id, _ = await store.create_run(
            await store.job_row("ada", "crashed"), trigger="manual", executor="in_process"
        )
        dead = holder(pid=dead_pid(), process="killed")
        await store.claim_item(run_id, 0, "killed:0", lease_s=300, holder=dead)
        for _ in range(200):
            if (await jobs.status("ada", run_id)).finished:
                break
            await asyncio.sleep(0.05)
    run = await jobs.status("ada", run_id)
    assert run.status == "completed", run
    results = await store.results(run_id)
    assert [(result.index, result.attempts) for result in results] == [(0, 2), (1, 1)]


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# Workers sweep too -----------------------------------------------------------------------------------------------
class RecordingBroker(AsyncBroker):
    """A broker that only records the task messages sent to it."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def kick(self, message: BrokerMessage) -> None:
        self.sent.append((message.task_name, json.loads(message.message)["kwargs"]))

    async def listen(self) -> AsyncGenerator[bytes, None]:  # pragma: no cover - never listened to
        raise NotImplementedError
        yield b""


async def test_a_worker_sweep_sends_each_taken_back_queue_question_once(store: JobStore) -> None:
    run_id = await leased_run(store, 3)
    local = await leased_run_of_other_job(store)  # an in-process run: given back, not sent to the workers
    dead = holder(pid=dead_pid(), process="killed")
    await store.claim_item(run_id, 0, "killed:0", lease_s=300, holder=dead)
    await store.claim_item(local, 0, "killed:local", lease_s=300, holder=dead)
    await store.claim_item(run_id, 1, "remote:1", lease_s=300, holder=holder(host="elsewhere", process="remote"))
    await store.claim_item(run_id, 2, "alive:2", lease_s=300, holder=holder(pid=os.getppid(), process="alive"))
    async with store._write.begin() as session:  # the remote worker went silent
        past = datetime.now(UTC) - timedelta(seconds=1)
        await session.execute(update(RunItemRow).where(RunItemRow.lease_owner == "remote:1").values(lease_until=past))
    broker = RecordingBroker()
    sent = await asyncio.gather(sweep_once(store, broker), sweep_once(store, broker))  # two workers at once
    assert sum(sent) == 2
    assert sorted((name, kwargs["run_id"], kwargs["index"]) for name, kwargs in broker.sent) == [
        (TASK_ANSWER, run_id, 0),
        (TASK_ANSWER, run_id, 1),
    ]
    assert await store.open_items(local) == [0]  # pending again, for the process that resumes it
    assert (await rows(store, run_id))[2].status == "running"  # a live holder keeps its question
    assert await sweep_once(store, broker) == 0
