"""`researchcrew memory export|forget` through click's CliRunner, on the store the settings point at."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from researchcrew.cli import cli
from researchcrew.embedding.embedder import Embedder
from researchcrew.memory.records import EntityMention
from researchcrew.memory.store import MemoryStore
from tests.loopback.server import LoopbackServer, closed_port
from tests.loopback.zep import FakeZep
from tests.memory_store.conftest import Database, add


@pytest.fixture
def seeded(database: Database, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> Database:
    """Ada and Bob each with an exchange and an entity; the CLI's settings point at this database."""

    async def seed() -> None:
        async with await MemoryStore.open(database.url, embedder=embedder) as store:
            for user in ("ada", "bob"):
                response_id = await add(store, user, "s1", f"What is SciFact? ({user})", "A claim dataset.")
                await store.record_entities(
                    user_id=user, response_id=response_id, mentions=[EntityMention(name="SciFact", type="dataset")]
                )

    asyncio.run(seed())
    monkeypatch.setenv("RESEARCHCREW_MEMORY__DATABASE_URL", database.url)
    return database


def _export(user: str) -> dict[str, object]:
    result = CliRunner().invoke(cli, ["memory", "export", "--user", user])
    assert result.exit_code == 0, result.output
    exported: dict[str, object] = json.loads(result.stdout)
    return exported


def test_export_prints_the_users_memory_as_json(seeded: Database) -> None:
    exported = _export("ada")
    assert exported["user_id"] == "ada"
    assert [e["question"] for e in exported["exchanges"]] == ["What is SciFact? (ada)"]  # type: ignore[attr-defined]
    assert [e["name"] for e in exported["entities"]] == ["SciFact"]  # type: ignore[attr-defined]
    assert "bob" not in json.dumps(exported)


def test_export_to_a_file(seeded: Database, tmp_path: Path) -> None:
    out = tmp_path / "ada.json"
    result = CliRunner().invoke(cli, ["memory", "export", "--user", "ada", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert "Exported user ada: 1 exchanges, 1 entities, 0 relationships" in result.stderr
    assert json.loads(out.read_text(encoding="utf-8"))["exchanges"][0]["question"] == "What is SciFact? (ada)"


def test_forget_asks_first_and_keeps_everything_when_refused(seeded: Database) -> None:
    refused = CliRunner().invoke(cli, ["memory", "forget", "--user", "ada"], input="n\n")
    assert refused.exit_code == 1 and "Aborted" in refused.output
    assert len(_export("ada")["exchanges"]) == 1  # type: ignore[arg-type]

    confirmed = CliRunner().invoke(cli, ["memory", "forget", "--user", "ada"], input="y\n")
    assert confirmed.exit_code == 0, confirmed.output
    assert "Forgot user ada: deleted 1 entity mentions, 1 entities, 2 messages, 1 exchanges." in confirmed.stdout
    assert _export("ada")["exchanges"] == []
    assert len(_export("bob")["exchanges"]) == 1  # type: ignore[arg-type]


def test_forget_yes_json(seeded: Database) -> None:
    result = CliRunner().invoke(cli, ["memory", "forget", "--user", "bob", "--yes", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["user_id"] == "bob" and report["deleted"]["exchanges"] == 1 and report["deleted"]["entities"] == 1
    again = CliRunner().invoke(cli, ["memory", "forget", "--user", "bob", "--yes"])
    assert again.exit_code == 0 and again.stdout.strip() == "Nothing stored for user bob."


def test_an_unreachable_store_ends_in_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCHCREW_MEMORY__DATABASE_URL", f"postgresql+asyncpg://nobody@127.0.0.1:{closed_port()}/x")
    result = CliRunner().invoke(cli, ["memory", "export", "--user", "ada"])
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: cannot open the memory store at postgresql+asyncpg://nobody@127.0.0.1:")
    assert "RESEARCHCREW_MEMORY__DATABASE_URL" in result.stderr and "Traceback" not in result.output


def test_user_is_required() -> None:
    result = CliRunner().invoke(cli, ["memory", "export"])
    assert result.exit_code == 2 and "--user" in result.output


def test_default_store_is_memory_db_in_the_data_directory() -> None:
    import os

    result = CliRunner().invoke(cli, ["memory", "export", "--user", "ada"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["exchanges"] == []
    assert (Path(os.environ["RESEARCHCREW_DATA_DIR"]) / "memory.db").is_file()


@pytest.fixture
def with_zep(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    def point_at(url: str) -> None:
        monkeypatch.setenv("RESEARCHCREW_MEMORY__BACKEND", "zep")
        monkeypatch.setenv("ZEP_API_URL", url)
        monkeypatch.setenv("ZEP_API_KEY", "test-key")
        monkeypatch.setenv("RESEARCHCREW_ZEP__TIMEOUT_S", "1")

    return point_at


def test_forget_with_zep_deletes_the_user_there_too(seeded: Database, with_zep: Callable[[str], None]) -> None:
    zep = FakeZep(api_key="test-key")
    zep.users["ada"] = {"user_id": "ada"}
    zep.users["bob"] = {"user_id": "bob"}
    with LoopbackServer(zep.route) as server:
        with_zep(server.url)
        result = CliRunner().invoke(cli, ["memory", "forget", "--user", "ada", "--yes"])

    assert result.exit_code == 0, result.output
    assert "Forgot user ada" in result.stdout and "Deleted in Zep as well." in result.stdout
    assert set(zep.users) == {"bob"}
    assert [(item["kind"], bool(item["delivered_at"])) for item in _export("ada")["outbox"]] == [  # type: ignore[union-attr]
        ("zep.delete_user", True)
    ]


def test_forget_with_zep_down_keeps_the_deletion_queued(seeded: Database, with_zep: Callable[[str], None]) -> None:
    with_zep(f"http://127.0.0.1:{closed_port()}")
    result = CliRunner().invoke(cli, ["memory", "forget", "--user", "ada", "--yes", "--json"])

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["deleted"]["exchanges"] == 1 and report["zep"] != "deleted"
    [queued] = _export("ada")["outbox"]  # type: ignore[misc]
    assert queued["kind"] == "zep.delete_user" and queued["delivered_at"] is None and queued["last_error"]
