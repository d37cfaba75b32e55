"""Deep runs in the database (revision 0007, ``deep/store.py``): every transition two processes could
race for is one conditional update, a paused run survives reopening the store, and export and forget cover them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from researchcrew.deep.store import DeepRunStore
from researchcrew.memory.store import MemoryStore
from tests.memory_store.conftest import Database


def now() -> datetime:
    """Read at each use: a time taken at import is minutes old when a long suite reaches these tests, and a lease
    of "now + 10 minutes" would already have run out."""
    return datetime.now(UTC)


STATE = {"id": "r1", "plan": {"question": "Q", "items": [{"id": 1, "question": "A?"}], "max_items": 3}}
PENDING = {"flow_id": "r1", "flow_class": "x.DeepResearchFlow", "method_name": "propose_plan", "method_output": {}}


async def paused(store: MemoryStore, run_id: str = "r1", *, user_id: str = "ada", expires_in_s: float = 3600) -> None:
    runs = DeepRunStore(store.engine)
    await runs.create(
        run_id=run_id, user_id=user_id, session_id="s", question="Q?", lease_until=now() + timedelta(hours=1)
    )
    await runs.pause(
        run_id,
        state=STATE,
        pending=PENDING,
        awaiting="plan_approval",
        expires_at=now() + timedelta(seconds=expires_in_s),
    )


async def test_a_paused_run_keeps_its_state_and_survives_reopening(database: Database, store: MemoryStore) -> None:
    await paused(store)
    reopened = await MemoryStore.open(database.url)
    try:
        record = await DeepRunStore(reopened.engine).get("r1")
    finally:
        await reopened.close()
    assert record is not None
    assert (record.status, record.awaiting, record.user_id, record.feedback) == (
        "awaiting_human_feedback",
        "plan_approval",
        "ada",
        None,
    )
    assert record.state == STATE and record.pending == PENDING
    assert record.expires_at is not None and record.expires_at > now()
    assert await DeepRunStore(store.engine).get("nope") is None


async def test_feedback_is_taken_only_for_the_kind_awaited_by_the_owner_before_expiry(store: MemoryStore) -> None:
    runs = DeepRunStore(store.engine)
    await paused(store)
    assert not await runs.submit_feedback("r1", user_id="bob", awaiting="plan_approval", feedback="{}")
    assert not await runs.submit_feedback("r1", user_id="ada", awaiting="clarification", feedback="{}")
    assert await runs.submit_feedback("r1", user_id="ada", awaiting="plan_approval", feedback='{"action": "approve"}')
    assert (await runs.get("r1")).feedback == '{"action": "approve"}'  # type: ignore[union-attr]
    await paused(store, "r2", expires_in_s=-1)
    assert not await runs.submit_feedback("r2", user_id="ada", awaiting="plan_approval", feedback="{}")


async def test_of_two_claims_exactly_one_wins(store: MemoryStore) -> None:
    runs = DeepRunStore(store.engine)
    await paused(store)
    lease = now() + timedelta(minutes=10)
    assert not await runs.claim("r1", user_id="ada", lease_until=lease)  # no decision yet
    await runs.submit_feedback("r1", user_id="ada", awaiting="plan_approval", feedback="{}")
    outcomes = await asyncio.gather(*(runs.claim("r1", user_id="ada", lease_until=lease) for _ in range(4)))
    assert sorted(outcomes) == [False, False, False, True]
    record = await runs.get("r1")
    assert record is not None and record.status == "running" and record.pending == PENDING  # the pause stays


async def test_a_run_whose_process_died_can_be_claimed_again_after_its_lease(store: MemoryStore) -> None:
    runs = DeepRunStore(store.engine)
    await paused(store)
    await runs.submit_feedback("r1", user_id="ada", awaiting="plan_approval", feedback="{}")
    assert await runs.claim("r1", user_id="ada", lease_until=now() - timedelta(seconds=1))  # lease already over
    assert await runs.claim("r1", user_id="ada", lease_until=now() + timedelta(minutes=10))
    assert not await runs.claim("r1", user_id="ada", lease_until=now() + timedelta(minutes=10))


async def test_finish_and_cancel(store: MemoryStore) -> None:
    runs = DeepRunStore(store.engine)
    await paused(store)
    assert not await runs.cancel("r1", user_id="bob")
    assert await runs.cancel("r1", user_id="ada")
    assert not await runs.cancel("r1", user_id="ada")
    cancelled = await runs.get("r1")
    assert cancelled is not None and (cancelled.status, cancelled.state, cancelled.pending) == ("cancelled", None, None)
    await paused(store, "r2")
    await runs.finish("r2", status="completed", report={"question": "Q?"})
    done = await runs.get("r2")
    assert done is not None and done.status == "completed" and done.report == {"question": "Q?"}
    assert done.awaiting is None and done.expires_at is None


async def test_export_and_forget_cover_deep_runs(store: MemoryStore) -> None:
    await paused(store)
    await paused(store, "r9", user_id="bob")
    exported = await store.export_user(user_id="ada")
    assert [run["run_id"] for run in exported["deep_runs"]] == ["r1"]
    assert exported["deep_runs"][0]["state"] == STATE
    counts = await store.forget_user(user_id="ada")
    assert counts["deep_runs"] == 1
    assert await DeepRunStore(store.engine).get("r1") is None and await DeepRunStore(store.engine).get("r9") is not None
