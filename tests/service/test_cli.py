"""`researchcrew users add|list|revoke` and `researchcrew serve`'s refusals, through click's CliRunner."""

from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner

from researchcrew.cli import cli
from researchcrew.memory.store import MemoryStore
from researchcrew.service.accounts import Accounts, parse_key
from researchcrew.service.server import is_loopback
from researchcrew.settings import Settings


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_users_add_prints_a_working_key_once_then_list_and_revoke() -> None:
    code, out, err = _invoke("users", "add", "ada")
    assert code == 0, err
    key = out.strip()
    assert parse_key(key) is not None and "shown only now" in err

    async def owner() -> str | None:
        async with await MemoryStore.from_settings(Settings()) as store:
            return await Accounts(store).authenticate(key)

    assert asyncio.run(owner()) == "ada"
    code, _, err = _invoke("users", "add", "ada")
    assert code == 1 and "exists already" in err and "--another-key" in err
    code, out, _ = _invoke("users", "list", "--json")
    (listed,) = json.loads(out)
    assert listed["user_id"] == "ada" and listed["active_keys"] == [key.split("_")[1]]
    assert key not in out  # never shown again
    code, out, _ = _invoke("users", "revoke", "ada")
    assert code == 0 and "Revoked 1 key(s) of user ada." in out
    assert asyncio.run(owner()) is None
    code, out, _ = _invoke("users", "list")
    assert "revoked" in out and "no active key" in out


def test_users_add_refuses_a_bad_name_in_one_line() -> None:
    code, _, err = _invoke("users", "add", "ada lovelace")
    assert code == 1 and err.count("\n") == 1 and "not a valid user name" in err


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "example.org"])
def test_serve_refuses_no_auth_off_loopback(host: str) -> None:
    code, _, err = _invoke("serve", "--no-auth", "--host", host)
    assert code == 1 and "--no-auth is refused" in err


def test_serve_refuses_several_workers_on_a_milvus_lite_file() -> None:
    code, _, err = _invoke("serve", "--workers", "2")
    assert code == 1 and "Milvus Lite file serves one process" in err


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.8.0.1", True), ("::1", True), ("localhost", True), ("0.0.0.0", False)],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_bad_rate_limit_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCHCREW_SERVICE__RATE_LIMIT", "lots")
    code, _, err = _invoke("serve")
    assert code == 2 and "RESEARCHCREW_SERVICE__RATE_LIMIT" in err and "'lots' is not a rate limit" in err
    assert err.count("\n") == 1
