"""`researchcrew memory export|forget --user U`: a user's memory as JSON, or deleted entirely.

Both work on the built-in memory store the settings point at (``RESEARCHCREW_MEMORY__DATABASE_URL``; by default
``memory.db`` in the data directory). ``forget`` asks before deleting unless ``--yes`` is given.
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

T = TypeVar("T")

_USER_OPTION = click.option("--user", "user_id", required=True, metavar="USER_ID", help="The user whose memory it is.")


def _with_store(action: Callable[[MemoryStore], Awaitable[T]]) -> T:
    """Open the configured store, run ``action``, close it; a store problem ends in one clear line."""
    settings = load_settings()
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
    counts: dict[str, int] = _with_store(lambda store: store.forget_user(user_id=user_id))
    if as_json:
        echo_json({"user_id": user_id, "deleted": counts})
        return
    if not any(counts.values()):
        click.echo(f"Nothing stored for user {user_id}.")
        return
    detail = ", ".join(f"{count} {table.replace('_', ' ')}" for table, count in counts.items() if count)
    click.echo(f"Forgot user {user_id}: deleted {detail}.")
