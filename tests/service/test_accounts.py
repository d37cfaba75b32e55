"""Users, keys and sessions in the memory store, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text

from researchcrew.memory.store import MemoryStore
from researchcrew.service.accounts import AccountError, Accounts, hash_secret, parse_key
from researchcrew.service.chat_sessions import ChatSessions, title_from
from tests.memory_store.conftest import Database, add


@pytest.fixture
async def store(database: Database) -> AsyncIterator[MemoryStore]:
    memory = await MemoryStore.open(database.url)
    try:
        yield memory
    finally:
        await memory.close()


async def test_only_a_hash_of_the_key_is_stored(store: MemoryStore) -> None:
    accounts = Accounts(store)
    issued = await accounts.add_user("ada")
    parsed = parse_key(issued.key)
    assert parsed is not None and parsed[0] == issued.key_id
    async with store.engine.connect() as connection:
        rows = (await connection.execute(text("SELECT key_id, key_hash FROM service_api_keys"))).all()
    assert rows == [(issued.key_id, hash_secret(parsed[1]))]
    assert parsed[1] not in str(rows)
    assert await accounts.authenticate(issued.key) == "ada"
    assert await accounts.authenticate(issued.key + "x") is None
    assert await accounts.authenticate(issued.key.replace(issued.key_id, "0" * 12)) is None


async def test_adding_revoking_and_rotating(store: MemoryStore) -> None:
    accounts = Accounts(store)
    first = await accounts.add_user("ada")
    with pytest.raises(AccountError, match="exists already"):
        await accounts.add_user("ada")
    second = await accounts.add_user("ada", another_key=True)
    assert await accounts.revoke(first.key_id) == ("ada", 1)  # one key
    assert await accounts.authenticate(first.key) is None
    assert await accounts.authenticate(second.key) == "ada"
    (listed,) = await accounts.list_users()
    assert listed.active_keys == [second.key_id] and listed.revoked_at is None
    assert await accounts.revoke("ada") == ("ada", 1)  # the user: every key left
    assert await accounts.authenticate(second.key) is None
    (listed,) = await accounts.list_users()
    assert listed.revoked_at is not None and listed.active_keys == []
    third = await accounts.add_user("ada")  # reinstated, with a new key only
    assert await accounts.authenticate(third.key) == "ada" and await accounts.authenticate(second.key) is None
    with pytest.raises(AccountError, match="no user or key"):
        await accounts.revoke("nobody")


@pytest.mark.parametrize("name", ["", "-ada", "a b", "x" * 65, "ada/../bob"])
async def test_bad_user_names_are_refused(store: MemoryStore, name: str) -> None:
    with pytest.raises(AccountError, match="not a valid user name"):
        await Accounts(store).add_user(name)


async def test_sessions_belong_to_their_user(store: MemoryStore) -> None:
    sessions = ChatSessions(store)
    mine = await sessions.create("ada", title="Oracles")
    assert await sessions.get("bob", mine.session_id) is None
    assert await sessions.rename("bob", mine.session_id, "x") is None
    assert not await sessions.touch("bob", mine.session_id, question="hi")
    assert not await sessions.delete("bob", mine.session_id)
    assert await sessions.exchanges_of("bob", mine.session_id) == []
    await add(store, "ada", mine.session_id, "What is SciFact?", "A dataset.")
    assert (await sessions.get("ada", mine.session_id)).exchanges == 1  # type: ignore[union-attr]
    assert [s.session_id for s in await sessions.list_sessions("ada")] == [mine.session_id]
    assert await sessions.list_sessions("bob") == []


async def test_deleting_a_session_keeps_the_others(store: MemoryStore) -> None:
    sessions = ChatSessions(store)
    keep, drop = await sessions.create("ada"), await sessions.create("ada")
    await add(store, "ada", keep.session_id, "What is SciFact?", "A claim verification dataset.", minutes=1)
    await add(store, "ada", drop.session_id, "What is BEIR?", "A retrieval benchmark.", minutes=2)
    await add(store, "bob", drop.session_id, "What is BEIR?", "Bob's copy.", minutes=3)  # same id, other user
    assert await sessions.delete("ada", drop.session_id)
    assert [e.question for e in await store.history(user_id="ada", session_id=None)] == ["What is SciFact?"]
    assert [e.answer for e in await store.history(user_id="bob", session_id=None)] == ["Bob's copy."]
    assert await sessions.get("ada", drop.session_id) is None


def test_titles_are_the_questions_first_words() -> None:
    assert title_from("  What is\nSciFact? ") == "What is SciFact?"
    long = title_from("word " * 40)
    assert len(long) <= 81 and long.endswith("…")
