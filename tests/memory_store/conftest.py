"""Fixtures of the memory-store suite: every test runs on SQLite *and* PostgreSQL.

``database`` is parametrized: a SQLite file in ``tmp_path``, and a fresh PostgreSQL database on the test server
(``tests.helpers.services``; dropped after the test). The PostgreSQL half is marked ``postgres`` and skips with the
reason when the server is not there (fails under ``CI=true``).

A test that opens a store through a fixture (``store``, ``outbox_store``) gets its database already migrated: a copy
of a template migrated once per session (tests/conftest.py), on PostgreSQL and SQLite alike — the store would
migrate it to the same head revision first thing, and copying is faster. Any other test (the migration tests) gets
an empty one.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from researchcrew.contracts.chunks import SourceReport
from researchcrew.contracts.query import Query
from researchcrew.contracts.synthesizer import Citation, FinalResponse
from researchcrew.embedding.embedder import Embedder
from researchcrew.memory.store import MemoryStore
from tests.e2e.support import shared_embedder
from tests.helpers.services import fresh_postgres_database, pg_admin

_pg_admin = pg_admin  # the name the memory-store tests use
# Fixtures that open a MemoryStore on ``database`` at once: with one of them, the database may start migrated.
_STORE_FIXTURES = frozenset({"store", "outbox_store"})


@dataclass
class Database:
    """A database under test and how to break it."""

    url: str
    backend: str
    path: Path | None = None  # SQLite file

    async def make_unreachable(self) -> None:
        """Take the database away from under an open store, as a crashed server or lost disk would."""
        if self.backend == "sqlite":
            assert self.path is not None
            self.path.parent.rename(self.path.parent.with_name(self.path.parent.name + "-gone"))
        else:
            name = self.url.rsplit("/", 1)[1]
            await _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    migrated = not _STORE_FIXTURES.isdisjoint(request.fixturenames)
    if request.param == "sqlite":
        path = tmp_path / "store" / "memory.db"
        if migrated:
            path.parent.mkdir(parents=True)
            shutil.copyfile(request.getfixturevalue("migrated_sqlite_file"), path)
        yield Database(url=f"sqlite+aiosqlite:///{path}", backend="sqlite", path=path)
        return
    template = request.getfixturevalue("migrated_postgres_template") if migrated else None
    with fresh_postgres_database("rc_memtest", template=template) as url:
        yield Database(url=url, backend="postgresql")


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real packaged all-MiniLM-L6-v2 (loaded once for the whole run)."""
    return shared_embedder()


@pytest.fixture
async def store(database: Database, embedder: Embedder) -> AsyncIterator[MemoryStore]:
    memory = await MemoryStore.open(database.url, embedder=embedder)
    try:
        yield memory
    finally:
        await memory.close()


T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def exchange(
    user_id: str,
    session_id: str,
    question: str,
    answer: str,
    *,
    minutes: int = 0,
    response_id: str | None = None,
    cited: int = 1,
) -> tuple[Query, FinalResponse]:
    """A question and its answer as the Flow would hand them to memory, ``minutes`` after T0."""
    asked = T0 + timedelta(minutes=minutes)
    query = Query(text=question, user_id=user_id, session_id=session_id, asked_at=asked)
    citations = [
        Citation(number=n, chunk_id=f"rag:doc{n}", source_type="rag", title=f"Doc {n}", source_id=f"doc{n}")
        for n in range(1, cited + 1)
    ]
    reports = [
        SourceReport(source_type="rag", tool_name="rag_search", status="success", chunk_count=cited),
        SourceReport(source_type="web", tool_name="web_search", status="failed"),
    ]
    response = FinalResponse(
        query=query,
        answer=answer,
        citations=citations,
        source_reports=reports,
        confidence=0.7,
        created_at=asked + timedelta(seconds=3),
        **({"response_id": response_id} if response_id else {}),
    )
    return query, response


async def add(store: MemoryStore, user_id: str, session_id: str, question: str, answer: str, **kwargs: object) -> str:
    query, response = exchange(user_id, session_id, question, answer, **kwargs)  # type: ignore[arg-type]
    await store.add_exchange(user_id=user_id, session_id=session_id, query=query, response=response)
    return response.response_id
