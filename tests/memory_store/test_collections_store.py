"""The collections store on SQLite and PostgreSQL: who reads which collection, member changes that take effect on
the next question, and owners versus members versus strangers."""

from __future__ import annotations

import pytest

from researchcrew.errors import CollectionError, CollectionForbiddenError, CollectionNotFoundError
from researchcrew.knowledge.collections_store import CollectionsStore
from researchcrew.memory.store import MemoryStore


@pytest.fixture
def collections(store: MemoryStore) -> CollectionsStore:
    return CollectionsStore(store.engine)


async def test_readers_are_the_owner_and_the_members(collections: CollectionsStore) -> None:
    await collections.create("team-x", members=["ada", "bob"])
    await collections.create("lab", members=["cy"], owner_id="dee")
    assert await collections.readable("ada") == ["shared", "user:ada", "team-x"]
    assert await collections.readable("dee") == ["shared", "user:dee", "lab"]  # the owner reads it
    assert await collections.readable("eve") == ["shared", "user:eve"]
    assert await collections.readable(None) == ["shared"]


async def test_who_may_store_into_a_collection(collections: CollectionsStore) -> None:
    await collections.create("team-x", members=["bob"], owner_id="ada")
    assert await collections.may_store("ada", "user:ada") and not await collections.may_store("ada", "user:bob")
    assert await collections.may_store("bob", "team-x") and await collections.may_store("ada", "team-x")
    assert not await collections.may_store("eve", "team-x")
    assert not await collections.may_store("ada", "shared")


async def test_a_removed_member_loses_access_at_once(collections: CollectionsStore) -> None:
    await collections.create("team-x", members=["ada", "bob"])
    changed = await collections.change_members("team-x", add=["cy"], remove=["bob"])
    assert changed.members == ["ada", "cy"]
    assert "team-x" not in await collections.readable("bob")
    assert "team-x" in await collections.readable("cy")
    await collections.remove("team-x")
    assert await collections.readable("ada") == ["shared", "user:ada"]
    with pytest.raises(CollectionNotFoundError):
        await collections.change_members("team-x", add=["ada"])


async def test_only_the_owner_changes_a_collection(collections: CollectionsStore) -> None:
    await collections.create("lab", members=["bob"], owner_id="ada")
    with pytest.raises(CollectionForbiddenError):  # a member reads it but may not change it
        await collections.change_members("lab", add=["eve"], acting_user="bob")
    with pytest.raises(CollectionNotFoundError):  # a stranger is not told it exists
        await collections.remove("lab", acting_user="eve")
    with pytest.raises(CollectionNotFoundError):
        await collections.get("lab", acting_user="eve")
    assert (await collections.get("lab", acting_user="bob")).members == ["bob"]
    await collections.change_members("lab", add=["eve"], acting_user="ada")
    assert "lab" in await collections.readable("eve")
    await collections.remove("lab", acting_user="ada")
    assert await collections.list_collections() == (await collections.list_collections())[:1]


async def test_listing(collections: CollectionsStore) -> None:
    await collections.create("team-x", members=["ada"])
    await collections.create("team-y", members=["bob"])
    mine = await collections.list_collections("ada")
    assert [(info.name, info.kind) for info in mine] == [
        ("shared", "shared"),
        ("user:ada", "private"),
        ("team-x", "named"),
    ]
    everything = await collections.list_collections()
    assert [info.name for info in everything] == ["shared", "team-x", "team-y"]


@pytest.mark.parametrize("name", ["shared", "user:ada", "Bad Name"])
async def test_bad_names_are_refused(collections: CollectionsStore, name: str) -> None:
    with pytest.raises(CollectionError):
        await collections.create(name, members=["ada"])


async def test_a_name_is_taken_once(collections: CollectionsStore) -> None:
    await collections.create("team-x")
    with pytest.raises(CollectionError, match="exists already"):
        await collections.create("team-x")
    with pytest.raises(CollectionError):
        await collections.create("team-z", members=["ada,bob"])
