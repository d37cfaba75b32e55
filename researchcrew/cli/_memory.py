"""`researchcrew memory export|forget --user U`: a user's memory as JSON, or deleted entirely.

Both work on the built-in memory store the settings point at (``RESEARCHCREW_MEMORY__DATABASE_URL``; by default
``memory.db`` in the data directory). ``forget`` asks before deleting unless ``--yes`` is given. With the Zep
backend (``RESEARCHCREW_MEMORY__BACKEND=zep``) it also deletes the user in Zep: the deletion is queued in the
outbox in the same transaction as the local delete, then delivered at once when Zep answers; otherwise it stays
queued and the next researchcrew process that reaches Zep delivers it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from researchcrew.cli._common import echo_json, load_settings, local_option, route_for, with_runtime, with_service

if TYPE_CHECKING:
    from researchcrew.runtime import ForgetReport, Runtime

_USER_OPTION = click.option("--user", "user_id", required=True, metavar="USER_ID", help="The user whose memory it is.")
_STORE_HINT = "\n(the memory store is configured by RESEARCHCREW_MEMORY__DATABASE_URL)"


@click.group()
def memory() -> None:
    """Export or forget a user's memory (conversation history, entities, preferences, pending Zep writes)."""


@memory.command()
@_USER_OPTION
@click.option(
    "--out",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    help="Write the JSON to this file instead of printing it.",
)
@local_option
def export(user_id: str, out: Path | None, local: bool) -> None:
    """Print (or write) everything stored about a user as JSON."""
    settings = load_settings()
    route = route_for(settings, local=local, user_id=user_id)
    data: dict[str, Any]
    if route.mode == "service":
        data = with_service(route, lambda client: client.export_memory(user_id), user_id=user_id)
    else:
        data = with_runtime(lambda runtime: runtime.export_user(user_id), settings, hint=_STORE_HINT)
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
@local_option
def forget(user_id: str, yes: bool, as_json: bool, local: bool) -> None:
    """Delete everything stored about a user. This cannot be undone."""
    if not yes:
        click.confirm(f"Delete all memory of user {user_id!r}? This cannot be undone.", abort=True)
    settings = load_settings()

    async def forget_everywhere(runtime: Runtime) -> ForgetReport:
        return await runtime.forget_user(user_id, deliver_within_s=2 * settings.zep.timeout_s)

    route = route_for(settings, local=local, user_id=user_id)
    if route.mode == "service":
        outcome = with_service(route, lambda client: client.forget_memory(user_id), user_id=user_id)
        counts, zep_outcome = dict(outcome["deleted"]), outcome.get("zep")
    else:
        report = with_runtime(forget_everywhere, settings, hint=_STORE_HINT)
        counts, zep_outcome = report.deleted, report.zep
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
        reason = zep_outcome.removeprefix("queued").removeprefix(": ")
        click.echo(
            f"The deletion in Zep is queued{f' ({reason})' if reason else ''}; the next researchcrew process that "
            "reaches Zep delivers it."
        )
