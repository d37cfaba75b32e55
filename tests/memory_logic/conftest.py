"""Fixtures of the memory-logic suite: a fake Zep on loopback (driven by the real zep-python client), the real
``MemoryStore`` on SQLite and PostgreSQL (the ``database`` and ``embedder`` fixtures of the store suite), and
realistic research exchanges."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from researchcrew.contracts.chunks import SourceReport
from researchcrew.contracts.query import Query
from researchcrew.contracts.synthesizer import Citation, FinalResponse
from researchcrew.memory.store import MemoryStore
from researchcrew.memory.zep import ZepMemory
from researchcrew.settings import ZepSettings
from tests.loopback.server import LoopbackServer
from tests.loopback.zep import FakeZep
from tests.memory_store.conftest import Database, database, embedder  # noqa: F401 (fixtures re-exported)

API_KEY = "test-key"
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def fake_zep() -> FakeZep:
    return FakeZep(api_key=API_KEY)


@pytest.fixture
def zep_server(fake_zep: FakeZep) -> Iterator[LoopbackServer]:
    with LoopbackServer(fake_zep.route) as server:
        yield server


def zep_settings(url: str, *, timeout_s: float = 30.0, api_key: str = API_KEY) -> ZepSettings:
    """Settings for a loopback Zep. The default timeout only stops a test that would hang: a loaded machine once
    kept a loopback answer past 2 s (a CI run at -n 4), failing a test about paging. Tests *of* timeouts pass
    their own short ``timeout_s``."""
    return ZepSettings(api_url=url, api_key=api_key, timeout_s=timeout_s)


@pytest.fixture
async def zep(zep_server: LoopbackServer) -> AsyncIterator[ZepMemory]:
    memory = ZepMemory(zep_settings(zep_server.url))
    try:
        yield memory
    finally:
        await memory.aclose()


@pytest.fixture
async def outbox_store(database: Database) -> AsyncIterator[MemoryStore]:  # noqa: F811
    """A store for outbox tests: no embedder needed (nothing is embedded)."""
    memory = await MemoryStore.open(database.url)
    try:
        yield memory
    finally:
        await memory.close()


def turn(
    user_id: str,
    session_id: str,
    question: str,
    answer: str,
    *,
    minutes: int = 0,
    sources: tuple[str, ...] = ("rag",),
    response_id: str | None = None,
) -> tuple[Query, FinalResponse]:
    asked = T0 + timedelta(minutes=minutes)
    query = Query(text=question, user_id=user_id, session_id=session_id, asked_at=asked)
    citations = [
        Citation(number=i + 1, chunk_id=f"{s}:{i}", source_type=s, title=f"{s} source {i}")
        for i, s in enumerate(sources)
    ]
    reports = [SourceReport(source_type=s, tool_name=f"{s}_tool", status="success", chunk_count=1) for s in sources]
    response = FinalResponse(
        query=query,
        answer=answer,
        citations=citations,
        source_reports=reports,
        confidence=0.7,
        created_at=asked + timedelta(seconds=2),
        **({"response_id": response_id} if response_id else {}),
    )
    return query, response
