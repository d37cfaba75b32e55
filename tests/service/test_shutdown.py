"""Shutdown loses no answer's memory: the app's lifespan waits for the memory writes of answers that finished,
within the service's shutdown grace (the real `serve` process under SIGTERM: tests/service/test_server_process.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from researchcrew.memory.store import MemoryStore
from researchcrew.service._app import create_app
from tests.service.support import QUESTION, default_tools, service_settings

WRITE_S = 11.0  # longer than the 10 s the runtime's own close waits for memory when nobody says otherwise


@pytest.mark.slow
async def test_shutdown_waits_for_a_slow_memory_write_within_the_grace(tmp_path: Path) -> None:
    store = await MemoryStore.open(f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}")
    add_exchange = store.add_exchange
    writing = asyncio.Event()

    async def slow_add_exchange(**arguments: Any) -> Any:  # a busy database, a machine under load
        writing.set()
        await asyncio.sleep(WRITE_S)
        return await add_exchange(**arguments)

    store.add_exchange = slow_add_exchange  # type: ignore[method-assign]
    settings = service_settings(tmp_path, auth=False, shutdown_grace_s=WRITE_S + 20)
    app = create_app(settings, tools=default_tools(), memory_store=store)  # the app owns (and closes) its runtime
    try:
        async with app.router.lifespan_context(app):
            import httpx

            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://service.test") as http:
                session_id = (await http.post("/v1/sessions", json={})).json()["session_id"]
                answered = await http.post(f"/v1/sessions/{session_id}/messages", json={"question": QUESTION})
                assert answered.status_code == 200, answered.text
            await asyncio.wait_for(writing.wait(), 30)  # the write has begun; now the service shuts down
        exchanges = (await store.export_user(user_id="local"))["exchanges"]
        assert [e["response_id"] for e in exchanges] == [answered.json()["response_id"]]
    finally:
        await store.close()
