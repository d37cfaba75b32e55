"""`researchcrew collections add|members|list|remove` and `ingest --collection`, through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from researchcrew.cli import cli
from tests.ingestion.test_cli import runner  # noqa: F401 - the fixture: settings in this test's data dir

NOTE = "# Glaciers\n\nGlaciers carve U-shaped valleys as they flow downhill under their own weight.\n"


def _ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout


def test_collections_lifecycle(runner: CliRunner, tmp_path: Path) -> None:  # noqa: F811
    made = json.loads(_ok(runner.invoke(cli, ["collections", "add", "team-x", "--members", "ada,bob", "--json"])))
    assert (made["name"], made["members"], made["owner_id"]) == ("team-x", ["ada", "bob"], None)
    assert "members: ada, bob" in _ok(runner.invoke(cli, ["collections", "list"]))
    changed = _ok(runner.invoke(cli, ["collections", "members", "team-x", "--add", "cy", "--remove", "bob"]))
    assert "members: ada, cy" in changed
    bobs = json.loads(_ok(runner.invoke(cli, ["collections", "list", "--user", "bob", "--json"])))
    assert [item["name"] for item in bobs] == ["shared", "user:bob"]
    ada = json.loads(_ok(runner.invoke(cli, ["collections", "list", "--user", "ada", "--json"])))
    assert [item["name"] for item in ada] == ["shared", "user:ada", "team-x"]

    note = tmp_path / "glaciers.md"
    note.write_text(NOTE)
    report = json.loads(_ok(runner.invoke(cli, ["ingest", str(note), "--collection", "team-x", "--json"])))
    assert report["documents_added"] == 1
    removed = _ok(runner.invoke(cli, ["collections", "remove", "team-x", "--yes"]))
    assert "Removed collection team-x" in removed and "0 chunk(s)" not in removed
    assert "team-x" not in _ok(runner.invoke(cli, ["collections", "list"]))


def test_mistakes_end_in_one_line(runner: CliRunner, tmp_path: Path) -> None:  # noqa: F811
    note = tmp_path / "glaciers.md"
    note.write_text(NOTE)
    unknown = runner.invoke(cli, ["ingest", str(note), "--collection", "nope", "--json"])
    assert unknown.exit_code == 1 and "no collection 'nope'" in unknown.output and "Traceback" not in unknown.output
    bad = runner.invoke(cli, ["collections", "add", "Team X"])
    assert bad.exit_code == 1 and "not a valid collection name" in bad.output
    shared = runner.invoke(cli, ["collections", "remove", "shared", "--yes"])
    assert shared.exit_code == 1 and "default collection" in shared.output
    missing = runner.invoke(cli, ["collections", "members", "ghost", "--add", "ada"])
    assert missing.exit_code == 1 and "no collection 'ghost'" in missing.output
    # Private collections need no making; the default is shared, as before.
    assert (
        json.loads(_ok(runner.invoke(cli, ["ingest", str(note), "--collection", "user:ada", "--json"])))[
            "documents_added"
        ]
        == 1
    )
    assert json.loads(_ok(runner.invoke(cli, ["ingest", str(note), "--json"])))["documents_added"] == 1
