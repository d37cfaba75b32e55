"""`researchcrew memory export|forget --user U`: a user's memory as JSON, or deleted entirely.

Both work on the built-in memory store the settings point at (``RESEARCHCREW_MEMORY__DATABASE_URL``; by default
``memory.db`` in the data directory). ``forget`` asks before deleting unless ``--yes`` is given. With the Zep
backend (``RESEARCHCREW_MEMORY__BACKEND=zep``) it also deletes the user in Zep: the deletion is queued in the
outbox in the same transaction as the local delete, then delivered at once when Zep answers; otherwise it stays
queued and the next researchcrew process that reaches Zep delivers it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from researchcrew.cli._common import echo_json, load_settings

if TYPE_CHECKING:
    from researchcrew.memory.store import MemoryStore
    from researchcrew.settings import Settings

T = TypeVar("T")

_USER_OPTION = click.option("--user", "user_id", required=True, metavar="USER_ID", help="The user whose memory it is.")


def _with_store(action: Callable[[MemoryStore], Awaitable[T]], settings: Settings | None = None) -> T:
    """Open the configured store, run ``action``, close it; a store problem ends in one clear line."""
    settings = settings or load_settings()
    from researchcrew.errors import MemoryStoreError
    from researchcrew.memory.store import MemoryStore

    async def run() -> T:
        async with await MemoryStore.from_settings(settings) as store:
            return await action(store)

    try:
        return asyncio.run(run())
    except MemoryStoreError as error:
        raise click.ClickException(
            f"{error}\n(the memory store is configured by RESEARCHCREW_MEMORY__DATABASE_URL)"
        ) from error


@click.group()
def memory() -> None:
    """Export or forget a user's memory (conversation history, entities, preferences, pending Zep writes)."""


@memory.command()
@_USER_OPTION
@click.option("--out", type=click.Path(dir_okay=False, writable=True, path_type=Path), default=None,
              help="Write the JSON to this file instead of printing it.")
def export(user_id: str, out: Path | None) -> None:
    """Print (or write) everything stored about a user as JSON."""
    data: dict[str, Any] = _with_store(lambda store: store.export_user(user_id=user_id))
    if out is None:
        echo_json(data)
        return
    out.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    click.echo(
        f"Exported user {user_id}: {len(data['exchanges'])} exchanges, {len(data['entities'])} entities, "
        f"{len(data['relationships'])} relationships → {out}",
        err=True,
    )


@memory.command()
@_USER_OPTION
@click.option("--yes", is_flag=True, help="Delete without asking.")
@click.option("--json", "as_json", is_flag=True, help="Print the deleted row counts as JSON.")
def forget(user_id: str, yes: bool, as_json: bool) -> None:
    """Delete everything stored about a user. This cannot be undone."""
    if not yes:
        click.confirm(f"Delete all memory of user {user_id!r}? This cannot be undone.", abort=True)
    settings = load_settings()
    with_zep = settings.memory.backend == "zep"

    async def forget_everywhere(store: MemoryStore) -> tuple[dict[str, int], str | None]:
        if not with_zep:
            return await store.forget_user(user_id=user_id), None
        from researchcrew.memory.outbox import forget_write

        counts = await store.forget_user(user_id=user_id, then_enqueue=[forget_write(user_id)])
        return counts, await _delete_in_zep(store, settings, user_id)

    counts, zep_outcome = _with_store(forget_everywhere, settings)
    if as_json:
        echo_json({"user_id": user_id, "deleted": counts, "zep": zep_outcome})
        return
    if not any(counts.values()):
        click.echo(f"Nothing stored for user {user_id}.")
    else:
        detail = ", ".join(f"{count} {table.replace('_', ' ')}" for table, count in counts.items() if count)
        click.echo(f"Forgot user {user_id}: deleted {detail}.")
    if zep_outcome == "deleted":
        click.echo("Deleted in Zep as well.")
    elif zep_outcome is not None:
        click.echo(
            f"The deletion in Zep is queued ({zep_outcome}); the next researchcrew process that reaches Zep "
            "delivers it."
        )


async def _delete_in_zep(store: MemoryStore, settings: Settings, user_id: str) -> str:
    """Deliver the queued Zep deletion now: "deleted", or why it is still queued."""
    from researchcrew.memory.outbox import ZEP_DELETE_USER, OutboxWorker
    from researchcrew.memory.zep import ZepError, ZepMemory

    try:
        zep = ZepMemory(settings.zep)
    except ZepError as error:
        return error.message
    try:
        await OutboxWorker(store, zep).drain(timeout_s=2 * settings.zep.timeout_s)
    finally:
        await zep.aclose()
    queued = [item for item in (await store.export_user(user_id=user_id))["outbox"] if item["kind"] == ZEP_DELETE_USER]
    if queued and all(item["delivered_at"] for item in queued):
        return "deleted"
    errors = [item["last_error"] for item in queued if item["last_error"]]
    return f"Zep: {errors[-1]}" if errors else "Zep did not answer in time"
