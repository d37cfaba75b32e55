"""The job store's guarantees, on SQLite and PostgreSQL: owners see only their jobs, one run per slot, one result
per question (a lost lease writes nothing), one finisher per run, and what a run's answers cost together."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from researchcrew.contracts.cost import NO_LLM_COST, AnswerCost
from researchcrew.contracts.query import Query
from researchcrew.contracts.synthesizer import FinalResponse
from researchcrew.db.job_tables import RunItemRow
from researchcrew.errors import JobConflictError, JobNotFoundError
from researchcrew.jobs._store import ItemOutcome, JobStore
from researchcrew.jobs.contracts import JobQuestion, JobSpec, Schedule
from researchcrew.memory.store import MemoryStore


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[JobStore]:
    memory = await MemoryStore.open(database_url)
    try:
        yield JobStore(memory.engine)
    finally:
        await memory.close()


def spec(name: str = "weekly", count: int = 3, **fields: object) -> JobSpec:
    questions = [JobQuestion(question=f"What is topic {n}?", carried={"n": str(n)}) for n in range(count)]
    return JobSpec.model_validate({"name": name, "questions": questions, "columns": ["n"], **fields})


async def test_jobs_are_per_owner_and_names_unique_per_owner(store: JobStore) -> None:
    created = await store.create_job("ada", spec(webhook_url="http://127.0.0.1:9/hook"))
    assert created.webhook_secret and len(created.webhook_secret) >= 32
    await store.create_job("bob", spec())  # the same name for another user is fine
    with pytest.raises(JobConflictError, match="exists already"):
        await store.create_job("ada", spec())
    assert [job.name for job in await store.list_jobs("ada")] == ["weekly"]
    with pytest.raises(JobNotFoundError):
        await store.get_job("eve", "weekly")
    with pytest.raises(JobNotFoundError):
        await store.get_job("bob", created.job.id)  # ada's id is not bob's job
    run_id, _ = await store.create_run(await store.job_row("ada", "weekly"), trigger="manual", executor="in_process")
    with pytest.raises(JobNotFoundError):
        await store.get_run(run_id, owner="bob")
    removed = await store.delete_job("ada", "weekly")
    assert removed.id == created.job.id
    with pytest.raises(JobNotFoundError):
        await store.get_run(run_id)  # the runs went with the job


async def test_a_slot_has_one_run_however_often_it_is_fired(store: JobStore) -> None:
    await store.create_job("ada", spec(schedule=Schedule(cron="0 6 * * MON", timezone="Europe/Berlin")))
    job = await store.job_row("ada", "weekly")
    slot = datetime(2026, 1, 12, 5, 0, tzinfo=UTC)
    outcomes = await asyncio.gather(
        *(store.create_run(job, trigger="schedule", executor="queue", slot=slot) for _ in range(5))
    )
    assert len({run_id for run_id, _ in outcomes}) == 1
    assert sum(created for _, created in outcomes) == 1
    assert await store.slots_run([(job.id, "2026-01-12T05:00:00+00:00"), (job.id, "2026-01-19T05:00:00+00:00")]) == {
        (job.id, "2026-01-12T05:00:00+00:00")
    }
    manual = [await store.create_run(job, trigger="manual", executor="queue") for _ in range(2)]
    assert all(created for _, created in manual)  # manual runs have no slot: never collide


async def test_a_question_is_claimed_once_and_a_lost_lease_writes_nothing(store: JobStore) -> None:
    await store.create_job("ada", spec(count=1))
    run_id, _ = await store.create_run(await store.job_row("ada", "weekly"), trigger="manual", executor="queue")
    first = await store.claim_item(run_id, 0, "w1:a", lease_s=30)
    assert first.state == "claimed" and first.item is not None and first.item.attempts == 1
    busy = await store.claim_item(run_id, 0, "w2:b", lease_s=30)
    assert busy.state == "busy" and busy.lease_until is not None
    # w1 dies: its lease runs out, w2 takes the question over.
    async with store._write.begin() as session:
        await session.execute(update(RunItemRow).values(lease_until=datetime.now(UTC) - timedelta(seconds=1)))
    taken = await store.claim_item(run_id, 0, "w2:b", lease_s=30)
    assert taken.state == "claimed" and taken.item is not None and taken.item.attempts == 2
    assert not await store.renew_lease(run_id, 0, "w1:a", 30)
    assert not await store.finish_item(run_id, 0, "w1:a", ItemOutcome("answered"))  # w1 came back too late
    assert await store.finish_item(run_id, 0, "w2:b", ItemOutcome("uncertain"))
    assert (await store.claim_item(run_id, 0, "w3:c", lease_s=30)).state == "finished"
    [result] = await store.results(run_id, owner="ada")
    assert (result.status, result.attempts) == ("uncertain", 2)


async def test_exactly_one_caller_finishes_a_run(store: JobStore) -> None:
    await store.create_job("ada", spec(count=2))
    run_id, _ = await store.create_run(await store.job_row("ada", "weekly"), trigger="manual", executor="queue")
    for index in range(2):
        await store.claim_item(run_id, index, f"w:{index}", lease_s=30)
    assert await store.finalize_run(run_id) is None  # questions still running
    await store.finish_item(run_id, 0, "w:0", ItemOutcome("answered"))
    await store.finish_item(run_id, 1, "w:1", ItemOutcome("failed"))
    finished = await asyncio.gather(*(store.finalize_run(run_id) for _ in range(4)))
    ended = [info for info in finished if info is not None]
    assert len(ended) == 1 and ended[0].status == "partial"
    assert ended[0].counts.answered == 1 and ended[0].counts.failed == 1


async def test_cancel_stops_the_questions_not_started_and_a_finished_run_cannot_be_cancelled(store: JobStore) -> None:
    await store.create_job("ada", spec(count=3))
    run_id, _ = await store.create_run(await store.job_row("ada", "weekly"), trigger="manual", executor="queue")
    await store.claim_item(run_id, 0, "w:0", lease_s=30)
    info = await store.cancel_run(run_id, owner="ada")
    assert (info.status, info.counts.cancelled, info.counts.running) == ("running", 2, 1)
    assert await store.open_items(run_id) == []
    assert (await store.claim_item(run_id, 1, "w:1", lease_s=30)).state == "finished"
    await store.finish_item(run_id, 0, "w:0", ItemOutcome("answered"))
    assert (await store.finalize_run(run_id) or await store.get_run(run_id)).status == "cancelled"
    with pytest.raises(JobConflictError, match="finished already"):
        await store.cancel_run(run_id, owner="ada")


async def test_one_dispatcher_per_run_until_it_is_done(store: JobStore) -> None:
    await store.create_job("ada", spec(count=1))
    run_id, _ = await store.create_run(await store.job_row("ada", "weekly"), trigger="manual", executor="queue")
    claims = await asyncio.gather(*(store.claim_dispatch(run_id, 30) for _ in range(4)))
    assert sum(claims) == 1
    await store.mark_dispatched(run_id)
    assert not await store.claim_dispatch(run_id, 30)
    assert await store.claim_dispatch(run_id, 30, force=True)  # an operator's resume


async def test_forgetting_a_user_deletes_their_jobs_runs_and_results(database_url: str) -> None:
    memory = await MemoryStore.open(database_url)
    try:
        store = JobStore(memory.engine)
        await store.create_job("ada", spec())
        await store.create_job("bob", spec())
        run_id, _ = await store.create_run(await store.job_row("ada", "weekly"), trigger="manual", executor="queue")
        counts = await memory.forget_user(user_id="ada")
        assert counts["jobs"] == 1
        assert await store.list_jobs("ada") == []
        with pytest.raises(JobNotFoundError):
            await store.get_run(run_id)
        assert [job.name for job in await store.list_jobs("bob")] == ["weekly"]
    finally:
        await memory.close()


def _answer(usd: float | None, *, model: str | None = "gpt-4o-mini") -> FinalResponse:
    cost = (
        NO_LLM_COST
        if model is None
        else AnswerCost(model=model, usd=usd, priced=usd is not None, stages={"synthesis": usd})
    )
    return FinalResponse(
        query=Query(text="What is RAG?", user_id="ada", session_id="s1"),
        answer="Retrieval-augmented generation.",
        confidence=0.8,
        confidence_level="high",
        cost=cost,
    )


async def _run_with(store: JobStore, name: str, outcomes: list[ItemOutcome]) -> str:
    await store.create_job("ada", spec(name, count=len(outcomes)))
    run_id, _ = await store.create_run(await store.job_row("ada", name), trigger="manual", executor="queue")
    for index, outcome in enumerate(outcomes):
        await store.claim_item(run_id, index, f"w:{index}", lease_s=30)
        await store.finish_item(run_id, index, f"w:{index}", outcome)
    return run_id


async def test_a_run_says_what_its_answers_cost_together_and_never_0_for_an_unknown_price(store: JobStore) -> None:
    priced = await _run_with(
        store,
        "priced",
        [ItemOutcome("answered", _answer(0.0012)), ItemOutcome("uncertain", _answer(0.0003)), ItemOutcome("failed")],
    )
    info = await store.get_run(priced, owner="ada")
    assert info.cost.usd == pytest.approx(0.0015) and info.cost.model == "gpt-4o-mini"
    assert [run.cost.usd for run in await store.list_runs("ada")] == [pytest.approx(0.0015)]

    unknown = await _run_with(
        store, "unknown", [ItemOutcome("answered", _answer(0.0012)), ItemOutcome("answered", _answer(None))]
    )
    info = await store.get_run(unknown)
    assert info.cost.usd is None and not info.cost.priced  # never the partial sum
    assert info.cost.summary() == "price unknown (gpt-4o-mini)"

    extractive = await _run_with(store, "extractive", [ItemOutcome("answered", _answer(0.0, model=None))])
    assert (await store.get_run(extractive)).cost == NO_LLM_COST  # exactly 0: no LLM was called
    await store.create_job("ada", spec("untouched", count=1))
    fresh, _ = await store.create_run(await store.job_row("ada", "untouched"), trigger="manual", executor="queue")
    assert (await store.get_run(fresh)).cost.usd == 0  # nothing researched yet
