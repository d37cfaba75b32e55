"""`researchcrew collections add|members|list|remove`: named shared document collections and who reads them.

Every document belongs to one collection: ``shared`` (the default, everyone reads it), a user's private
``user:<id>``, or a named one made here whose readers are the members named. The command line acts as the
machine's operator: it may change any collection. Members are kept in the memory database the settings point at;
``researchcrew ingest --collection NAME`` stores documents into one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from researchcrew.cli._common import echo_json, with_runtime

if TYPE_CHECKING:
    from researchcrew.knowledge.collections_store import CollectionInfo, CollectionsStore
    from researchcrew.runtime import Runtime

_STORE_HINT = "\n(collections are kept in the memory store: RESEARCHCREW_MEMORY__DATABASE_URL)"


def _names(value: str | None) -> list[str]:
    """``ada,bob`` (or repeated options joined) as a list; empty parts are dropped."""
    return [part.strip() for part in (value or "").split(",") if part.strip()]


async def _store(runtime: Runtime) -> CollectionsStore:
    from researchcrew.knowledge.collections_store import CollectionsStore

    return CollectionsStore((await runtime.memory_store()).engine)


def _render(info: CollectionInfo) -> str:
    if info.kind == "shared":
        return f"{info.name:<24} shared    everyone reads it"
    if info.kind == "private":
        return f"{info.name:<24} private   only {info.owner_id} reads it"
    owner = f"owner {info.owner_id}; " if info.owner_id else ""
    members = ", ".join(info.members) or "no members"
    return f"{info.name:<24} named     {owner}members: {members}"


@click.group()
def collections() -> None:
    """Add, list and remove shared document collections and their members."""


@collections.command()
@click.argument("name")
@click.option("--members", default="", metavar="USER,USER", help="Who reads it (comma-separated user ids).")
@click.option("--json", "as_json", is_flag=True, help="Print the collection as JSON.")
def add(name: str, members: str, as_json: bool) -> None:
    """Make a named shared collection read by its members."""

    async def making(runtime: Runtime) -> CollectionInfo:
        return await (await _store(runtime)).create(name, members=_names(members))

    info = with_runtime(making, hint=_STORE_HINT)
    if as_json:
        echo_json(info.model_dump(mode="json"))
        return
    click.echo(f"Added collection {info.name}; members: {', '.join(info.members) or 'none yet'}.")
    click.echo(f"Store documents in it with `researchcrew ingest PATH --collection {info.name}`.", err=True)


@collections.command(name="members")
@click.argument("name")
@click.option("--add", "adding", default="", metavar="USER,USER", help="Members to add (comma-separated).")
@click.option("--remove", "removing", default="", metavar="USER,USER", help="Members to remove; access ends at once.")
@click.option("--json", "as_json", is_flag=True, help="Print the collection as JSON.")
def members(name: str, adding: str, removing: str, as_json: bool) -> None:
    """Add or remove members of a collection (with neither, show them)."""

    async def changing(runtime: Runtime) -> CollectionInfo:
        store = await _store(runtime)
        if not adding and not removing:
            return await store.get(name)
        return await store.change_members(name, add=_names(adding), remove=_names(removing))

    info = with_runtime(changing, hint=_STORE_HINT)
    if as_json:
        echo_json(info.model_dump(mode="json"))
        return
    click.echo(_render(info))


@collections.command(name="list")
@click.option("--user", "user_id", default=None, help="Only the collections this user reads.")
@click.option("--json", "as_json", is_flag=True, help="Print the collections as JSON.")
def list_collections(user_id: str | None, as_json: bool) -> None:
    """List collections and their members (or those one user reads)."""

    async def listing(runtime: Runtime) -> list[CollectionInfo]:
        return await (await _store(runtime)).list_collections(user_id)

    found = with_runtime(listing, hint=_STORE_HINT)
    if as_json:
        echo_json([info.model_dump(mode="json") for info in found])
        return
    for info in found:
        click.echo(_render(info))


@collections.command()
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def remove(name: str, yes: bool) -> None:
    """Remove a named collection, its members and its documents from the knowledge base."""
    if not yes:
        click.confirm(f"Remove collection {name} and every document in it?", abort=True)

    async def removing(runtime: Runtime) -> int:
        import asyncio

        from researchcrew.knowledge.access import check_shared_name

        check_shared_name(name)  # `shared` and private collections are not removed
        store = await _store(runtime)
        await store.get(name)  # unknown: say so before touching the knowledge base
        # The documents first: should that fail, the collection and its readers stay as they were.
        knowledge_base = await runtime.knowledge_base()
        chunks = await asyncio.to_thread(knowledge_base.remove_collection, name)
        await store.remove(name)
        return chunks

    chunks = with_runtime(removing, hint=_STORE_HINT)
    click.echo(f"Removed collection {name} and its {chunks} chunk(s).")
