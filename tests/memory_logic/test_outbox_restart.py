"""A process killed (SIGKILL) with writes in its outbox: the next process delivers them all, none twice."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from researchcrew.memory.outbox import OutboxWorker, RetryPolicy
from researchcrew.memory.store import MemoryStore
from researchcrew.memory.zep import ZepMemory
from tests.conftest import PROJECT_ROOT
from tests.loopback.server import LoopbackServer, Reply, Request, wait_until
from tests.loopback.zep import FakeZep
from tests.memory_logic.conftest import zep_settings
from tests.memory_logic.outbox_child import LEASE_S

TURNS = 6


@pytest.mark.slow
async def test_pending_writes_of_a_killed_process_are_delivered_after_restart_exactly_once(tmp_path: Path) -> None:
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}"
    fake = FakeZep()
    stalled: list[str] = []

    def store_then_stall(request: Request) -> Reply | None:
        """Zep stores the turn, then takes its time to answer: the child is killed while it waits."""
        if request.method == "POST" and request.path.endswith("/memory"):
            fake.fault = None
            reply = fake.route(request)
            fake.fault = store_then_stall
            stalled.append(request.path)
            return Reply(reply.status, reply.body, reply.headers, delay_s=30)
        return None

    fake.fault = store_then_stall
    with LoopbackServer(fake.route) as server:
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.memory_logic.outbox_child",
            database_url,
            server.url,
            str(TURNS),
            cwd=PROJECT_ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert child.stdout is not None and child.stderr is not None
            line = await asyncio.wait_for(child.stdout.readline(), 60)
            if line.strip() != b"ENQUEUED":
                raise AssertionError((line + await child.stderr.read()).decode())
            in_flight = await asyncio.to_thread(wait_until, lambda: bool(stalled), 20.0)
            assert in_flight, "the child never started delivering"
            child.send_signal(signal.SIGKILL)
            assert await asyncio.wait_for(child.wait(), 10) == -signal.SIGKILL
        finally:
            if child.returncode is None:
                child.kill()
                await child.wait()
        assert len(fake.all_messages()) == 2  # the in-flight turn reached Zep; the child never learned it did

        fake.fault = None
        store = await MemoryStore.open(database_url)
        zep = ZepMemory(zep_settings(server.url))
        try:
            counts = await store.outbox_counts()
            assert counts["pending"] == TURNS and counts["leased"] >= 1
            await asyncio.sleep(LEASE_S)  # the dead process's lease runs out
            worker = OutboxWorker(store, zep, policy=RetryPolicy(base_delay_s=0.05, max_delay_s=0.3))
            report = await worker.drain(15)
        finally:
            await zep.aclose()
            await store.close()

    assert report.pending == 0 and report.delivered == TURNS
    received = fake.message_ids_received()
    assert len(received) == 2 * TURNS and fake.duplicates() == {}
    retried = [r for r in server.requests if r.method == "GET" and "/messages/" in r.path]
    assert retried, "the redelivered row should have been looked up in Zep before being sent again"
