"""`researchcrew users add|list|revoke`: who may use the HTTP service. Keys are shown once; only a hash is stored
(in the memory database the settings point at)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from researchcrew.cli._common import echo_json, with_runtime

if TYPE_CHECKING:
    from researchcrew.runtime import Runtime
    from researchcrew.service.accounts import IssuedKey, UserAccount

_STORE_HINT = "\n(users are kept in the memory store: RESEARCHCREW_MEMORY__DATABASE_URL)"


@click.group()
def users() -> None:
    """Add, list and revoke the users of the HTTP service and their API keys."""


@users.command()
@click.argument("name")
@click.option("--another-key", is_flag=True, help="Give an existing user one more key (to rotate keys).")
@click.option("--json", "as_json", is_flag=True, help="Print the new key as JSON.")
def add(name: str, another_key: bool, as_json: bool) -> None:
    """Add a user and print their new API key (shown this once)."""
    from researchcrew.service.accounts import Accounts

    async def issue(runtime: Runtime) -> IssuedKey:
        return await Accounts(await runtime.memory_store()).add_user(name, another_key=another_key)

    issued = with_runtime(issue)
    if as_json:
        echo_json(issued.model_dump())
        return
    click.echo(issued.key)
    click.echo(
        f"Key {issued.key_id} for user {issued.user_id}. It is shown only now: store it safely. "
        "Send it as `Authorization: Bearer <key>`.",
        err=True,
    )


@users.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print the users as JSON.")
def list_users(as_json: bool) -> None:
    """List users, their active key ids, and who is revoked."""
    from researchcrew.service.accounts import Accounts

    async def listing(runtime: Runtime) -> list[UserAccount]:
        return await Accounts(await runtime.memory_store()).list_users()

    accounts = with_runtime(listing, hint=_STORE_HINT)
    if as_json:
        echo_json([account.model_dump(mode="json") for account in accounts])
        return
    if not accounts:
        click.echo("No users yet: `researchcrew users add NAME`.")
    for account in accounts:
        state = f"revoked {account.revoked_at:%Y-%m-%d}" if account.revoked_at else "active"
        keys = ", ".join(account.active_keys) or "no active key"
        click.echo(f"{account.user_id:<24} {state:<18} added {account.created_at:%Y-%m-%d}  keys: {keys}")


@users.command()
@click.argument("name_or_key_id")
def revoke(name_or_key_id: str) -> None:
    """Revoke a user (all their keys) or one key by its id. Their memory is kept (`memory forget` deletes it)."""
    from researchcrew.service.accounts import Accounts

    async def revoking(runtime: Runtime) -> tuple[str, int]:
        return await Accounts(await runtime.memory_store()).revoke(name_or_key_id)

    user_id, count = with_runtime(revoking)
    click.echo(f"Revoked {count} key(s) of user {user_id}.")
