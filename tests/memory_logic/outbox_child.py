"""A worker process for test_outbox_restart: enqueue turns into a SQLite store, then deliver them to Zep.

    python -m tests.memory_logic.outbox_child <database url> <zep url> <turns>

It prints ``ENQUEUED`` once every turn is in the outbox, then delivers until done; the test kills it with SIGKILL
while a delivery is in flight."""

from __future__ import annotations

import asyncio
import sys

from researchcrew.contracts.query import Query
from researchcrew.contracts.synthesizer import FinalResponse
from researchcrew.memory.outbox import OutboxWorker
from researchcrew.memory.store import MemoryStore
from researchcrew.memory.zep import ZepMemory
from researchcrew.settings import ZepSettings

LEASE_S = 1.0


async def main(database_url: str, zep_url: str, turns: int) -> None:
    store = await MemoryStore.open(database_url)
    zep = ZepMemory(ZepSettings(api_url=zep_url, api_key="test-key", timeout_s=30))
    worker = OutboxWorker(store, zep, lease_s=LEASE_S, batch_size=2, concurrency=1)
    for i in range(turns):
        query = Query(text=f"Question {i} about SciFact?", user_id="ada", session_id="s1")
        response = FinalResponse(query=query, answer=f"Answer {i}: SciFact is a claim verification dataset.")
        await worker.enqueue_turn(user_id="ada", session_id="s1", query=query, response=response)
    sys.stdout.write("ENQUEUED\n")
    sys.stdout.flush()
    await worker.drain(120)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
