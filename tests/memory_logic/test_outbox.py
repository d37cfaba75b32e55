"""The persisted Zep outbox: nothing lost while Zep is down, nothing duplicated when it comes back.

Real ``MemoryStore`` (SQLite and PostgreSQL), real zep-python client, loopback Zep."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import pytest

from researchcrew.memory.outbox import ZEP_ADD_TURN, OutboxWorker, RetryPolicy, forget_write
from researchcrew.memory.store import MemoryStore
from researchcrew.memory.zep import ZepMemory, zep_session_id
from tests.loopback.server import LoopbackServer, Reply, Request, closed_port, wait_until
from tests.loopback.zep import FakeZep
from tests.memory_logic.conftest import turn, zep_settings

FAST = RetryPolicy(base_delay_s=0.05, max_delay_s=0.3, permanent_after=3)


def _worker(store: MemoryStore, zep: ZepMemory, **kwargs: object) -> OutboxWorker:
    return OutboxWorker(store, zep, policy=kwargs.pop("policy", FAST), **kwargs)  # type: ignore[arg-type]


async def _enqueue(worker: OutboxWorker, n: int, *, users: int = 3, prefix: str = "q") -> list[str]:
    """n turns from a few users and sessions; returns the response ids."""
    ids = []
    for i in range(n):
        user = f"user{i % users}"
        query, response = turn(user, f"session{i % 2}", f"{prefix} {i}: what is RAG?", f"RAG answer {i}.", minutes=i)
        assert await worker.enqueue_turn(user_id=user, session_id=query.session_id, query=query, response=response)
        ids.append(response.response_id)
    return ids


def _memory_posts(server: LoopbackServer) -> list[Request]:
    return [r for r in server.requests if r.method == "POST" and r.path.endswith("/memory")]


async def test_writes_wait_while_zep_answers_503_and_are_delivered_exactly_once_when_it_is_back(
    outbox_store: MemoryStore, zep: ZepMemory, zep_server: LoopbackServer, fake_zep: FakeZep
) -> None:
    worker = _worker(outbox_store, zep)
    fake_zep.mode = "down"
    ids = await _enqueue(worker, 12)

    report = await worker.drain(0.8)
    counts = await outbox_store.outbox_counts()
    assert report.delivered == 0 and counts["pending"] == 12 and counts["failing"] >= 1
    assert fake_zep.all_messages() == []

    fake_zep.mode = "up"
    report = await worker.drain(10)

    assert report.delivered == 12 and report.pending == 0
    received = fake_zep.message_ids_received()
    assert len(received) == 24 and fake_zep.duplicates() == {}  # a question and an answer per turn, once each
    assert {m["metadata"]["researchcrew_response_id"] for m in fake_zep.all_messages()} == set(ids)
    assert (await outbox_store.outbox_counts())["delivered"] == 12


async def test_connection_refused_then_zep_comes_up_on_the_same_address(outbox_store: MemoryStore) -> None:
    port = closed_port()
    zep = ZepMemory(zep_settings(f"http://127.0.0.1:{port}", timeout_s=1))
    worker = _worker(outbox_store, zep)
    try:
        await _enqueue(worker, 5)
        await worker.drain(0.5)
        assert (await outbox_store.outbox_counts())["pending"] == 5

        fake = FakeZep()
        with LoopbackServer(fake.route, port=port):
            report = await worker.drain(10)
        assert report.delivered == 5 and report.pending == 0
        assert len(fake.message_ids_received()) == 10 and fake.duplicates() == {}
    finally:
        await zep.aclose()


async def test_the_circuit_keeps_a_down_zep_from_being_hammered(
    outbox_store: MemoryStore, zep: ZepMemory, zep_server: LoopbackServer, fake_zep: FakeZep
) -> None:
    fake_zep.mode = "down"
    worker = _worker(outbox_store, zep, policy=RetryPolicy(base_delay_s=0.2, max_delay_s=0.4))
    await _enqueue(worker, 60)

    await worker.drain(1.5)

    # Without the circuit, 60 rows retried every ≤0.4 s would be hundreds of calls; with it, a first batch (one
    # call per session group) and then one probe per ≤0.4 s.
    assert len(zep_server.requests) <= 20
    assert (await outbox_store.outbox_counts())["pending"] == 60


async def test_a_lost_response_is_retried_without_duplicating_the_turn(
    outbox_store: MemoryStore, zep: ZepMemory, zep_server: LoopbackServer, fake_zep: FakeZep
) -> None:
    """Zep stores the turn but the connection drops before the reply: the retry must not add it twice."""
    dropped: list[str] = []

    def drop_first_reply(request: Request) -> Reply | None:
        if request.method == "POST" and request.path.endswith("/memory") and not dropped:
            dropped.append(request.path)
            fake_zep.fault = None
            fake_zep.route(request)  # the server does the work ...
            fake_zep.fault = drop_first_reply
            return Reply(drop_connection=True)  # ... and the answer is lost
        return None

    fake_zep.fault = drop_first_reply
    worker = _worker(outbox_store, zep)
    await _enqueue(worker, 3, users=1)

    report = await worker.drain(10)

    assert dropped and report.delivered == 3 and report.pending == 0
    assert len(fake_zep.message_ids_received()) == 6 and fake_zep.duplicates() == {}


async def test_a_write_zep_refuses_for_good_is_dead_with_its_reason_and_the_rest_goes_through(
    outbox_store: MemoryStore, zep: ZepMemory, zep_server: LoopbackServer, fake_zep: FakeZep
) -> None:
    def refuse_user1(request: Request) -> Reply | None:
        if (
            request.path.endswith("/memory")
            and request.method == "POST"
            and zep_session_id("user1", "session1") in (request.path)
        ):
            return Reply.json({"message": "bad request: something Zep will never accept"}, status=400)
        return None

    fake_zep.fault = refuse_user1
    worker = _worker(outbox_store, zep)
    await _enqueue(worker, 6)  # i=1 is user1/session1; i=4 is user1/session0

    report = await worker.drain(10)

    assert report.delivered == 5 and report.dead == 1 and report.pending == 0  # dead is not pending
    refused = [r for r in _memory_posts(zep_server) if zep_session_id("user1", "session1") in r.path]
    assert len(refused) == FAST.permanent_after  # tried N times, then given up
    items = (await outbox_store.export_user(user_id="user1"))["outbox"]
    [dead] = [i for i in items if i["delivered_at"] is None]
    assert dead["state"] == "dead" and dead["dead_at"] is not None
    assert dead["last_error"].startswith("http_error (HTTP 400)") and "never accept" in dead["last_error"]
    assert dead["failures"] == FAST.permanent_after
    counts = await outbox_store.outbox_counts()
    assert (counts["dead"], counts["pending"], counts["due"], counts["delivered"]) == (1, 0, 0, 5)

    fake_zep.fault = None  # Zep would take it now, but a dead write is never retried on its own
    report = await worker.drain(0.5)
    assert report.delivered == 0 and len(_memory_posts(zep_server)) == 5 + FAST.permanent_after


async def test_enqueueing_the_same_turn_twice_is_a_no_op(outbox_store: MemoryStore, zep: ZepMemory) -> None:
    worker = _worker(outbox_store, zep)
    query, response = turn("ada", "s1", "What is RAG?", "Retrieval-augmented generation.")
    assert await worker.enqueue_turn(user_id="ada", session_id="s1", query=query, response=response)
    assert not await worker.enqueue_turn(user_id="ada", session_id="s1", query=query, response=response)
    assert (await outbox_store.outbox_counts())["pending"] == 1
    item = (await outbox_store.export_user(user_id="ada"))["outbox"][0]
    assert item["kind"] == ZEP_ADD_TURN and item["idempotency_key"] == f"zep.add_turn:{response.response_id}"


async def test_the_background_worker_wakes_on_enqueue_without_waiting_for_its_poll(
    outbox_store: MemoryStore, zep: ZepMemory, fake_zep: FakeZep
) -> None:
    worker = _worker(outbox_store, zep, poll_interval_s=30.0)
    worker.start()
    try:
        await asyncio.sleep(0.05)  # the worker found nothing and is asleep for up to 30 s
        started = time.monotonic()
        await _enqueue(worker, 1)
        delivered = await asyncio.to_thread(wait_until, lambda: len(fake_zep.all_messages()) == 2, 5.0)
        assert delivered and time.monotonic() - started < 3.0
    finally:
        await worker.stop()
    assert not worker.running


async def test_a_hung_zep_delays_nothing_but_its_own_rows(outbox_store: MemoryStore, fake_zep: FakeZep) -> None:
    fake_zep.mode = "hang"
    with LoopbackServer(fake_zep.route) as server:
        zep = ZepMemory(zep_settings(server.url, timeout_s=0.3))
        worker = _worker(outbox_store, zep)
        try:
            started = time.monotonic()
            enqueued = await _enqueue(worker, 4)
            assert time.monotonic() - started < 1.0  # enqueue is a local insert, Zep is not involved
            report = await worker.drain(1.0)
            assert report.delivered == 0 and report.rescheduled >= 1
            fake_zep.mode = "up"
            report = await worker.drain(10)
            assert report.delivered == len(enqueued) and fake_zep.duplicates() == {}
        finally:
            await zep.aclose()


async def test_forgetting_a_user_deletes_them_in_zep_through_the_outbox(
    outbox_store: MemoryStore, zep: ZepMemory, fake_zep: FakeZep
) -> None:
    worker = _worker(outbox_store, zep)
    await _enqueue(worker, 2, users=1)
    await worker.drain(10)
    assert "user0" in fake_zep.users

    await _enqueue(worker, 1, users=1, prefix="pending")  # still queued when the user asks to be forgotten
    counts = await outbox_store.forget_user(user_id="user0", then_enqueue=[forget_write("user0")])
    report = await worker.drain(10)

    assert counts["outbox"] == 3 and report.delivered == 1  # two delivered, one pending: all the user's rows
    assert "user0" not in fake_zep.users and fake_zep.all_messages() == []


async def test_a_store_that_fails_mid_cycle_leaves_rows_leased_then_due_again(
    outbox_store: MemoryStore, zep: ZepMemory, fake_zep: FakeZep, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Delivered to Zep, but the store cannot record it: the row is redelivered later, and Zep dedups."""
    from researchcrew.errors import MemoryStoreError

    worker = _worker(outbox_store, zep, lease_s=0.3)
    await _enqueue(worker, 1)
    real = outbox_store.mark_delivered_many

    async def broken(item_ids: object) -> int:
        raise MemoryStoreError("disk full")

    monkeypatch.setattr(outbox_store, "mark_delivered_many", broken)
    with pytest.raises(MemoryStoreError):
        await worker.run_once()
    monkeypatch.setattr(outbox_store, "mark_delivered_many", real)
    assert (await outbox_store.outbox_counts())["leased"] == 1

    await asyncio.sleep(0.35)
    report = await worker.drain(5)
    assert report.delivered == 1 and fake_zep.duplicates() == {} and len(fake_zep.all_messages()) == 2


def test_backoff_grows_exponentially_with_jitter_and_is_capped() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=10.0)
    for failures, ceiling in ((1, 0.5), (2, 1.0), (3, 2.0), (5, 8.0), (6, 10.0), (40, 10.0)):
        delays = [policy.delay(failures) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert max(delays) - min(delays) > 0  # jittered, so retrying workers do not move in lockstep


async def test_stopping_is_prompt_even_while_the_circuit_is_open(
    outbox_store: MemoryStore, zep: ZepMemory, zep_server: LoopbackServer, fake_zep: FakeZep
) -> None:
    fake_zep.mode = "down"
    worker = _worker(outbox_store, zep, policy=RetryPolicy(base_delay_s=5, max_delay_s=5), poll_interval_s=30)
    worker.start()
    await _enqueue(worker, 3)
    assert await asyncio.to_thread(wait_until, lambda: bool(zep_server.requests), 5.0)  # failed: circuit open
    await asyncio.sleep(0.1)  # the worker is now waiting out the open circuit (2.5–5 s)
    started = time.monotonic()
    await worker.stop(timeout_s=5)
    assert time.monotonic() - started < 2.0 and not worker.running  # not the 2.5-5 s wait; a margin for load
    assert (await outbox_store.outbox_counts())["pending"] == 3


async def test_a_cycle_records_its_deliveries_in_one_store_transaction(
    outbox_store: MemoryStore, zep: ZepMemory, fake_zep: FakeZep, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[int]] = []
    real = outbox_store.mark_delivered_many

    async def recording(item_ids: Sequence[int]) -> int:
        calls.append(list(item_ids))
        return await real(item_ids)

    monkeypatch.setattr(outbox_store, "mark_delivered_many", recording)
    worker = _worker(outbox_store, zep, batch_size=32)
    await _enqueue(worker, 40)  # 3 users x 2 sessions: six groups delivered concurrently in a cycle

    report = await worker.drain(10)

    assert report.delivered == 40 and report.pending == 0 and fake_zep.duplicates() == {}
    assert [len(batch) for batch in calls] == [32, 8]  # one transaction per cycle, not one per row
    stored = [(await outbox_store.export_user(user_id=user))["outbox"] for user in ("user0", "user1", "user2")]
    assert sorted(i for batch in calls for i in batch) == sorted(item["id"] for items in stored for item in items)
