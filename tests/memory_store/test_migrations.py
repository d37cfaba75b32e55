"""Schema migrations: an upgrade keeps users' data, and the models describe exactly the head revision."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text
from sqlalchemy.engine import Connection

from researchcrew.db import engine as db
from researchcrew.db import models as _schema  # noqa: F401  (every table of the schema, on Base.metadata)
from researchcrew.db._base import Base
from researchcrew.embedding.embedder import Embedder
from researchcrew.memory.recall import encode_vector
from researchcrew.memory.records import SessionSummary
from researchcrew.memory.store import MemoryStore, exchange_text, message_id
from tests.conftest import PROJECT_ROOT
from tests.memory_store.conftest import Database, add


def _differences(connection: Connection) -> list[object]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, Base.metadata))


async def test_the_models_match_the_head_revision(store: MemoryStore) -> None:
    async with store.engine.connect() as connection:
        assert await connection.run_sync(_differences) == []
    assert await db.current_revision(store.engine) == db.head_revision() == db.HEAD_REVISION == "0013"


async def _version(store: MemoryStore, user_id: str) -> int | None:
    async with store.engine.connect() as connection:
        result = await connection.execute(
            text("SELECT generation FROM memory_users WHERE user_id = :u"), {"u": user_id}
        )
        return result.scalar_one_or_none()


async def _create_at_first_revision(database: Database, embedder: Embedder) -> None:
    """A database as the first release left it, with one user's exchange written by that release's code."""
    engine = db.create_engine(database.url)
    try:
        await db.upgrade(engine, "0001")
        question, answer = "What is SciFact?", "SciFact is a claim verification dataset."
        vector = encode_vector(embedder.embed_documents([exchange_text(question, answer)])[0])
        asked = datetime(2024, 11, 2, 8, 30, tzinfo=UTC)
        async with db.write_engine(engine).begin() as connection:
            exchange_id = (
                await connection.execute(
                    text(
                        "INSERT INTO memory_exchanges (response_id, user_id, session_id, query_id, asked_at, "
                        "answered_at, stored_at, sources_used, source_reports, citations, context, confidence, "
                        "answer_kind, embedding, embedding_model) VALUES ('old-r1', 'ada', 's1', 'q1', :t, :t, :t, "
                        "'[\"rag\"]', '[]', '[]', NULL, 0.8, 'extractive', :v, 'all-MiniLM-L6-v2') RETURNING id"
                    ),
                    {"t": asked, "v": vector},
                )
            ).scalar_one()
            for role, content in (("user", question), ("assistant", answer)):
                await connection.execute(
                    text(
                        "INSERT INTO memory_messages (message_id, exchange_id, user_id, session_id, role, content, "
                        "created_at) VALUES (:m, :e, 'ada', 's1', :r, :c, :t)"
                    ),
                    {"m": message_id("old-r1", role), "e": exchange_id, "r": role, "c": content, "t": asked},
                )
        assert await db.current_revision(engine) == "0001"
    finally:
        await engine.dispose()


async def test_opening_an_old_database_upgrades_it_and_keeps_the_data(database: Database, embedder: Embedder) -> None:
    await _create_at_first_revision(database, embedder)

    store = await MemoryStore.open(database.url, embedder=embedder)
    try:
        assert await db.current_revision(store.engine) == db.head_revision()
        [kept] = await store.history(user_id="ada", session_id="s1")
        assert (kept.response_id, kept.question, kept.answer_kind) == ("old-r1", "What is SciFact?", "extractive")
        assert kept.asked_at == datetime(2024, 11, 2, 8, 30, tzinfo=UTC)
        [recalled] = await store.recall(user_id="ada", query_text="claim verification datasets")
        assert recalled.response_id == "old-r1" and recalled.relevance > 0.5
        assert await _version(store, "ada") == 1  # backfilled by 0003: one exchange so far
        # The tables the upgrade added work next to the old data.
        assert await store.enqueue_outbox(user_id="ada", kind="k", payload={}, idempotency_key="after-upgrade")
        await add(store, "ada", "s1", "What is FEVER?", "A fact verification dataset.", minutes=1)
        assert len(await store.history(user_id="ada", session_id="s1")) == 2
        assert await _version(store, "ada") == 2
        [fever] = await store.recall(user_id="ada", query_text="FEVER fact verification", limit=1)
        assert fever.question == "What is FEVER?"
    finally:
        await store.close()


async def test_downgrading_to_the_first_revision_keeps_the_history(database: Database, embedder: Embedder) -> None:
    store = await MemoryStore.open(database.url, embedder=embedder)
    try:
        await add(store, "ada", "s1", "What is SciFact?", "A dataset.")
        async with db.write_engine(store.engine).begin() as connection:
            await connection.run_sync(lambda sync: command.downgrade(db.alembic_config(sync), "0001"))
        assert await db.current_revision(store.engine) == "0001"
    finally:
        await store.close()
    reopened = await MemoryStore.open(database.url, embedder=embedder)  # and up again
    try:
        assert [e.question for e in await reopened.history(user_id="ada", session_id="s1")] == ["What is SciFact?"]
        assert await reopened.outbox_counts() == dict.fromkeys(
            ("pending", "due", "leased", "delivered", "dead", "failed_attempts", "failing"), 0
        )
    finally:
        await reopened.close()


async def test_processes_opening_a_new_database_at_once_migrate_it_once(database: Database) -> None:
    stores = await asyncio.gather(*(MemoryStore.open(database.url) for _ in range(4)))
    try:
        assert await stores[0].enqueue_outbox(user_id="ada", kind="k", payload={}, idempotency_key="one")
        for store in stores:
            assert await db.current_revision(store.engine) == db.head_revision()
            assert (await store.outbox_counts())["pending"] == 1
    finally:
        for store in stores:
            await store.close()


async def test_reopening_keeps_the_data(database: Database, embedder: Embedder) -> None:
    async with await MemoryStore.open(database.url, embedder=embedder) as store:
        response_id = await add(store, "ada", "s1", "What is SciFact?", "A dataset.")
    async with await MemoryStore.open(database.url, embedder=embedder) as store:
        assert [e.response_id for e in await store.history(user_id="ada", session_id="s1")] == [response_id]


# ---- 0004: the outbox's dead state -----------------------------------------------------------------------------
PARKED_UNTIL = datetime(9999, 1, 1, tzinfo=UTC)  # how revisions 0002-0003's worker parked a refused write
CREATED = datetime(2025, 2, 20, 12, 0, tzinfo=UTC)


def _stamp(database: Database, value: datetime) -> datetime:
    return value.replace(tzinfo=None) if database.backend == "sqlite" else value  # as models.UTCDateTime stores it


async def _create_at_0003_with_outbox_rows(database: Database) -> None:
    """A database as release 0003 left it: one write parked the old way, one pending, one delivered."""
    engine = db.create_engine(database.url)
    try:
        await db.upgrade(engine, "0003")
        rows = [
            # key, next attempt, failures, last error, delivered at
            ("parked", PARKED_UNTIL, 3, "permanent: http_error (HTTP 400): bad request", None),
            ("waiting", CREATED, 1, "unreachable: connection refused", None),
            ("sent", CREATED, 0, None, CREATED),
            ("not-parked", CREATED, 1, "permanent: a message that only looks like one", None),
        ]
        async with db.write_engine(engine).begin() as connection:
            for key, next_at, failures, error, delivered in rows:
                await connection.execute(
                    text(
                        "INSERT INTO memory_outbox (idempotency_key, user_id, kind, payload, created_at, "
                        "next_attempt_at, attempts, failures, last_error, delivered_at) VALUES "
                        "(:k, 'ada', 'zep.add_turn', '{}', :c, :n, :f, :f, :e, :d)"
                    ),
                    {
                        "k": key,
                        "c": _stamp(database, CREATED),
                        "n": _stamp(database, next_at),
                        "f": failures,
                        "e": error,
                        "d": None if delivered is None else _stamp(database, delivered),
                    },
                )
        assert await db.current_revision(engine) == "0003"
    finally:
        await engine.dispose()


async def test_upgrading_to_0004_turns_parked_writes_into_dead_ones_and_keeps_the_rest(database: Database) -> None:
    await _create_at_0003_with_outbox_rows(database)
    before_upgrade = datetime.now(UTC)

    store = await MemoryStore.open(database.url)
    try:
        assert await db.current_revision(store.engine) == db.HEAD_REVISION  # 0004 and the revisions after it
        items = {item["idempotency_key"]: item for item in (await store.export_user(user_id="ada"))["outbox"]}
        dead = items["parked"]
        assert dead["state"] == "dead" and dead["last_error"] == "http_error (HTTP 400): bad request"
        assert datetime.fromisoformat(dead["dead_at"]) >= before_upgrade.replace(microsecond=0)
        assert datetime.fromisoformat(dead["next_attempt_at"]) == CREATED
        assert [items[k]["state"] for k in ("waiting", "sent", "not-parked")] == ["pending", "delivered", "pending"]
        assert items["not-parked"]["last_error"] == "permanent: a message that only looks like one"  # untouched
        counts = await store.outbox_counts(now=CREATED)
        assert (counts["pending"], counts["due"], counts["delivered"], counts["dead"]) == (2, 2, 1, 1)
        assert counts["failed_attempts"] == 5
        claimed = await store.claim_due_outbox(limit=10)
        assert sorted(item.idempotency_key for item in claimed) == ["not-parked", "waiting"]  # never the dead one
    finally:
        await store.close()


async def test_downgrading_from_0004_parks_dead_writes_the_old_way(database: Database) -> None:
    store = await MemoryStore.open(database.url)
    try:
        for key in ("refused", "waiting"):
            assert await store.enqueue_outbox(user_id="ada", kind="zep.add_turn", payload={}, idempotency_key=key)
        refused, _ = await store.claim_due_outbox(limit=2)
        assert await store.mark_dead(refused.id, error="http_error (HTTP 400): bad request")
        async with db.write_engine(store.engine).begin() as connection:
            await connection.run_sync(lambda sync: command.downgrade(db.alembic_config(sync), "0003"))
        async with store.engine.connect() as connection:
            rows = (
                await connection.execute(
                    text("SELECT idempotency_key, next_attempt_at, last_error FROM memory_outbox ORDER BY id")
                )
            ).all()
    finally:
        await store.close()
    parked, waiting = rows
    assert parked.last_error == "permanent: http_error (HTTP 400): bad request"
    assert str(parked.next_attempt_at).startswith("9999-01-01")
    assert waiting.last_error is None and not str(waiting.next_attempt_at).startswith("9999")

    reopened = await MemoryStore.open(database.url)  # and up again: dead once more, nothing lost
    try:
        counts = await reopened.outbox_counts()
        assert (counts["dead"], counts["pending"]) == (1, 1)
    finally:
        await reopened.close()


def test_the_head_revision_constant_names_the_newest_script() -> None:
    """``db.HEAD_REVISION`` lets a current database open without importing Alembic; it must follow the scripts."""
    assert db.head_revision() == db.HEAD_REVISION


def test_opening_a_current_database_does_not_import_alembic(database: Database) -> None:
    asyncio.run(_open_and_close(database.url))  # migrated here, so the child finds it current
    script = (
        "import asyncio, sys\n"
        "from researchcrew.memory.store import MemoryStore\n"
        "async def main():\n"
        "    store = await MemoryStore.open(sys.argv[1])\n"
        "    await store.enqueue_outbox(user_id='ada', kind='k', payload={}, idempotency_key='child')\n"
        "    await store.close()\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('alembic', 'zep_python', 'aiohttp')))\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", script, database.url], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "[]"


async def _open_and_close(url: str) -> None:
    store = await MemoryStore.open(url)
    await store.close()


async def test_an_unsupported_database_is_refused_with_what_to_set() -> None:
    from researchcrew.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"SQLite and PostgreSQL, not 'mysql'.*postgresql\+asyncpg"):
        await MemoryStore.open("mysql+aiomysql://user@localhost/memory")


async def test_upgrading_to_0006_adds_session_summaries_and_downgrading_drops_only_them(
    database: Database, embedder: Embedder
) -> None:
    engine = db.create_engine(database.url)
    try:
        await db.upgrade(engine, "0005")
    finally:
        await engine.dispose()
    store = await MemoryStore.open(database.url, embedder=embedder)
    try:
        assert await db.current_revision(store.engine) == db.HEAD_REVISION
        await add(store, "ada", "s1", "What is SciFact?", "A claim verification dataset.")
        await store.update_session_summary(
            user_id="ada", session_id="s1", update=lambda _: SessionSummary(user_id="ada", session_id="s1", turns=1)
        )
        async with db.write_engine(store.engine).begin() as connection:
            await connection.run_sync(lambda sync: command.downgrade(db.alembic_config(sync), "0005"))
        assert await db.current_revision(store.engine) == "0005"
        assert [e.question for e in await store.history(user_id="ada", session_id="s1")] == ["What is SciFact?"]
        async with store.engine.connect() as connection:
            tables = await connection.run_sync(lambda sync: sync.dialect.get_table_names(sync))
        assert "memory_session_summaries" not in tables
    finally:
        await store.close()
