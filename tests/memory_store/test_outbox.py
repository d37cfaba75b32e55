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
        assert await store.enqueue_outbox(user_id=user_id, kind="zep.add_messages", payload=payload,
                                          idempotency_key=f"{user_id}:msg:{n}")


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
    assert counts == {"pending": 1, "due": 0, "leased": 0, "delivered": 1, "failed_attempts": 1, "failing": 1}

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
