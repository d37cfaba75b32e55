"""The outbox table: exactly-once enqueue, leased claims that never overlap, retries, delivery."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime, timedelta

import pytest

from researchcrew.memory.store import MemoryStore
from tests.conftest import PROJECT_ROOT
from tests.memory_store.conftest import Database


async def _fill(store: MemoryStore, count: int, user_id: str = "ada") -> None:
    for n in range(count):
        payload = {"session_id": "s1", "messages": [{"role_type": "user", "content": f"message {n}"}]}
        assert await store.enqueue_outbox(
            user_id=user_id, kind="zep.add_messages", payload=payload, idempotency_key=f"{user_id}:msg:{n}"
        )


async def test_enqueue_is_exactly_once_per_key(store: MemoryStore) -> None:
    write = {"user_id": "ada", "kind": "zep.add_messages", "payload": {"n": 1}, "idempotency_key": "r1:messages"}
    assert await store.enqueue_outbox(**write) is True
    assert await store.enqueue_outbox(**write) is False
    racing = await asyncio.gather(*(store.enqueue_outbox(**{**write, "idempotency_key": "r2"}) for _ in range(5)))
    assert racing.count(True) == 1

    [item, other] = await store.claim_due_outbox(limit=10)
    assert (item.kind, item.payload, item.user_id, item.attempts) == ("zep.add_messages", {"n": 1}, "ada", 1)
    await store.mark_delivered(item.id)
    assert await store.enqueue_outbox(**write) is False  # delivered keys stay taken
    assert (await store.outbox_counts())["pending"] == 1 and other.idempotency_key == "r2"


async def test_claims_lease_items_so_concurrent_claimers_never_share_one(
    database: Database, store: MemoryStore
) -> None:
    await _fill(store, 60)
    second = await MemoryStore.open(database.url)  # its own connection pool, like another worker process
    try:
        batches = await asyncio.gather(
            *(claimer.claim_due_outbox(limit=7, lease_s=60) for claimer in (store, second) for _ in range(6))
        )
    finally:
        await second.close()
    claimed = [item.id for batch in batches for item in batch]
    assert len(claimed) == len(set(claimed)) == 60
    assert all(item.lease_until is not None and item.claim_token for batch in batches for item in batch)
    assert await store.claim_due_outbox(limit=100) == []  # all leased
    counts = await store.outbox_counts()
    assert (counts["pending"], counts["leased"], counts["due"]) == (60, 60, 0)


@pytest.mark.slow
async def test_claimers_in_separate_processes_never_share_an_item(database: Database, store: MemoryStore) -> None:
    await _fill(store, 120)
    script = (
        "import asyncio, json, sys\n"
        "from researchcrew.memory.store import MemoryStore\n"
        "async def main():\n"
        "    store = await MemoryStore.open(sys.argv[1])\n"
        "    ids = []\n"
        "    while batch := await store.claim_due_outbox(limit=5, lease_s=300):\n"
        "        ids += [item.id for item in batch]\n"
        "        for item in batch:\n"
        "            await store.mark_delivered(item.id)\n"
        "    await store.close()\n"
        "    print(json.dumps(ids))\n"
        "asyncio.run(main())\n"
    )
    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, database.url, cwd=PROJECT_ROOT, stdout=asyncio.subprocess.PIPE
        )
        for _ in range(3)
    ]
    async with asyncio.timeout(120):
        outputs = await asyncio.gather(*(worker.communicate() for worker in workers))
    assert [worker.returncode for worker in workers] == [0, 0, 0]
    per_worker = [json.loads(stdout) for stdout, _ in outputs]
    delivered = [item for ids in per_worker for item in ids]
    assert len(delivered) == len(set(delivered)) == 120
    assert (await store.outbox_counts())["delivered"] == 120


async def test_an_expired_lease_makes_the_item_due_again(store: MemoryStore) -> None:
    await _fill(store, 1)
    start = datetime.now(UTC) + timedelta(minutes=1)
    [first] = await store.claim_due_outbox(now=start, lease_s=30)
    assert await store.claim_due_outbox(now=start + timedelta(seconds=29)) == []
    [again] = await store.claim_due_outbox(now=start + timedelta(seconds=31))
    assert again.id == first.id and again.attempts == 2 and again.claim_token != first.claim_token


async def test_mark_failed_reschedules_and_delivered_items_are_never_claimed_again(store: MemoryStore) -> None:
    await _fill(store, 2)
    later = datetime.now(UTC) + timedelta(hours=1)
    failing, working = await store.claim_due_outbox(limit=2)
    await store.mark_failed(failing.id, error="Zep answered 503", next_attempt_at=later)
    await store.mark_delivered(working.id)

    assert await store.claim_due_outbox(limit=10) == []  # one delivered, one not due yet
    counts = await store.outbox_counts()
    assert counts == {
        "pending": 1,
        "due": 0,
        "leased": 0,
        "delivered": 1,
        "dead": 0,
        "failed_attempts": 1,
        "failing": 1,
    }

    [retry] = await store.claim_due_outbox(limit=10, now=later)
    assert retry.id == failing.id and (retry.failures, retry.attempts) == (1, 2)
    assert retry.last_error == "Zep answered 503"
    await store.mark_delivered(retry.id)
    # A late failure report from a worker whose lease ran out does not un-deliver the item.
    await store.mark_failed(retry.id, error="late", next_attempt_at=later)
    assert await store.claim_due_outbox(limit=10, now=later + timedelta(days=1)) == []
    assert (await store.outbox_counts())["delivered"] == 2


async def test_prune_removes_only_old_delivered_items(store: MemoryStore) -> None:
    await _fill(store, 3)
    first, second, _ = await store.claim_due_outbox(limit=3)
    await store.mark_delivered(first.id)
    await store.mark_delivered(second.id)
    assert await store.prune_outbox(delivered_before=datetime.now(UTC) - timedelta(hours=1)) == 0
    assert await store.prune_outbox(delivered_before=datetime.now(UTC) + timedelta(seconds=1)) == 2
    assert (await store.outbox_counts())["pending"] == 1


async def test_a_claim_takes_no_more_than_its_limit(store: MemoryStore) -> None:
    """Regression: on PostgreSQL, ``UPDATE … WHERE id IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)`` may run the
    subquery once per candidate row, so each run's "first n" differs and the UPDATE took every due row."""
    await _fill(store, 50)

    [one] = await store.claim_due_outbox(limit=1, lease_s=60)
    counts = await store.outbox_counts()
    assert (counts["leased"], counts["due"]) == (1, 49)
    seven = await store.claim_due_outbox(limit=7, lease_s=60)
    assert len(seven) == 7 and one.id not in {item.id for item in seven}
    assert one.id < min(item.id for item in seven)  # oldest due first
    assert (await store.outbox_counts())["leased"] == 8


async def test_concurrent_single_item_claimers_never_overlap(database: Database, store: MemoryStore) -> None:
    await _fill(store, 50)
    others = [await MemoryStore.open(database.url) for _ in range(2)]  # separate pools, like other processes
    claimers = [store, *others]
    try:
        rounds = [
            await asyncio.gather(*(claimer.claim_due_outbox(limit=1, lease_s=60) for claimer in claimers))
            for _ in range(20)
        ]
    finally:
        for other in others:
            await other.close()
    batches = [batch for claims in rounds for batch in claims]
    assert all(len(batch) <= 1 for batch in batches)
    claimed = [item.id for batch in batches for item in batch]
    assert len(claimed) == len(set(claimed)) == 50  # 60 claims of one: all 50 rows, each exactly once
    assert (await store.outbox_counts())["leased"] == 50


async def test_a_dead_write_is_kept_and_listed_but_never_due_nor_pending(store: MemoryStore) -> None:
    await _fill(store, 3)
    refused, waiting, sent = await store.claim_due_outbox(limit=3, lease_s=60)
    assert await store.mark_dead(refused.id, error="http_error (HTTP 400): bad request")
    await store.mark_failed(waiting.id, error="unreachable", next_attempt_at=datetime.now(UTC))
    await store.mark_delivered(sent.id)

    far_future = datetime.now(UTC) + timedelta(days=36_500)
    counts = await store.outbox_counts(now=far_future)
    assert counts == {
        "pending": 1,
        "due": 1,
        "leased": 0,
        "delivered": 1,
        "dead": 1,
        "failed_attempts": 2,
        "failing": 1,
    }
    [again] = await store.claim_due_outbox(limit=10, now=far_future)
    assert again.id == waiting.id  # the dead one is never claimed, however late
    # A late report from another worker changes nothing: a dead write is not revived by a failure, and dying
    # twice is refused.
    await store.mark_failed(refused.id, error="late", next_attempt_at=datetime.now(UTC))
    assert not await store.mark_dead(refused.id, error="again")
    assert not await store.mark_dead(sent.id, error="delivered items cannot die")

    exported = {item["id"]: item for item in (await store.export_user(user_id="ada"))["outbox"]}
    dead = exported[refused.id]
    assert dead["state"] == "dead" and dead["last_error"] == "http_error (HTTP 400): bad request"
    assert dead["dead_at"] is not None and dead["delivered_at"] is None and dead["lease_until"] is None
    assert (exported[waiting.id]["state"], exported[sent.id]["state"]) == ("pending", "delivered")
    # Its key stays taken: the same write enqueued again is not retried behind the user's back.
    assert not await store.enqueue_outbox(
        user_id="ada", kind="zep.add_messages", payload={}, idempotency_key=refused.idempotency_key
    )
    assert await store.prune_outbox(delivered_before=far_future) == 1  # prunes the delivered one only
    assert (await store.outbox_counts())["dead"] == 1
    assert (await store.forget_user(user_id="ada"))["outbox"] == 2  # forgetting the user removes it too


async def test_a_dead_write_delivered_after_all_counts_as_delivered(store: MemoryStore) -> None:
    """A worker whose lease ran out got the write through after another declared it dead: Zep has it."""
    await _fill(store, 1)
    [item] = await store.claim_due_outbox(limit=1)
    assert await store.mark_dead(item.id, error="refused")
    assert await store.mark_delivered_many([item.id]) == 1
    [exported] = (await store.export_user(user_id="ada"))["outbox"]
    assert (exported["state"], exported["dead_at"]) == ("delivered", None)
    counts = await store.outbox_counts()
    assert (counts["delivered"], counts["dead"], counts["pending"]) == (1, 0, 0)


async def test_mark_delivered_many_marks_each_row_once_in_one_transaction(store: MemoryStore) -> None:
    await _fill(store, 5)
    items = await store.claim_due_outbox(limit=5)
    ids = [item.id for item in items]
    assert await store.mark_delivered_many([]) == 0
    assert await store.mark_delivered_many(ids[:3] + ids[:1]) == 3  # a repeated id counts once
    assert await store.mark_delivered_many(ids) == 2  # the three already delivered are left as they were
    exported = (await store.export_user(user_id="ada"))["outbox"]
    assert {item["state"] for item in exported} == {"delivered"}
    assert all(item["lease_until"] is None and item["claim_token"] is None for item in exported)
    first_three = {item["delivered_at"] for item in exported if item["id"] in ids[:3]}
    assert len(first_three) == 1  # one transaction, one timestamp
    assert await store.claim_due_outbox(limit=10, now=datetime.now(UTC) + timedelta(days=1)) == []


async def test_mark_delivered_many_takes_more_ids_than_one_statement_holds(store: MemoryStore) -> None:
    await _fill(store, 620)
    ids = [item.id for item in await store.claim_due_outbox(limit=1_000, lease_s=60)]
    assert len(ids) == 620
    assert await store.mark_delivered_many(ids) == 620
    assert (await store.outbox_counts())["delivered"] == 620
