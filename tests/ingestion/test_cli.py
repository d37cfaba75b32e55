"""`researchcrew ingest` and `researchcrew kb stats|remove|reindex` through click's CliRunner, against Milvus Lite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from researchcrew.cli import cli
from researchcrew.embedding.embedder import Embedder
from tests.ingestion.files import MARKDOWN_NOTE, beir_records, write_beir


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, model_cache: Path, onnx_embedder: Embedder) -> CliRunner:
    """The CLI's settings point at this test's data dir and the session's ONNX export (the same shared model)."""
    monkeypatch.setenv("RESEARCHCREW_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RESEARCHCREW_EMBEDDING__CACHE_DIR", str(model_cache))
    return CliRunner()


def _json(output: str) -> dict[str, object]:
    payload = json.loads(output)
    assert isinstance(payload, dict)
    return payload


def test_ingest_json_report_then_idempotent_rerun(runner: CliRunner, tmp_path: Path) -> None:
    corpus = write_beir(tmp_path / "corpus.jsonl", beir_records())
    note = tmp_path / "enzymes.md"
    note.write_text(MARKDOWN_NOTE)
    result = runner.invoke(cli, ["ingest", str(corpus), str(note), "--json"])
    assert result.exit_code == 0, result.output
    report = _json(result.stdout)
    assert (report["documents_added"], report["files_seen"], report["succeeded"]) == (4, 2, True)
    assert isinstance(report["chunks_added"], int) and report["chunks_added"] >= 4
    again = _json(runner.invoke(cli, ["ingest", str(corpus), str(note), "--json"]).stdout)
    assert (again["documents_added"], again["documents_unchanged"], again["chunks_added"]) == (0, 4, 0)


def test_ingest_summary_lists_problems_and_still_succeeds(runner: CliRunner, tmp_path: Path) -> None:
    good = tmp_path / "good.txt"
    good.write_text("Glaciers carve U-shaped valleys.\n")
    bad = tmp_path / "bad.md"
    bad.write_bytes(b"\x00\x01\x02binary")
    result = runner.invoke(cli, ["ingest", str(good), str(bad), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "Documents: 1 added, 0 replaced, 0 unchanged, 1 failed" in result.stdout
    assert f"{bad}: binary content" in result.stdout
    assert "documents/s" in result.stdout


def test_ingest_fails_only_when_nothing_could_be_ingested(runner: CliRunner, tmp_path: Path) -> None:
    empty = tmp_path / "empty.md"
    empty.write_text("")
    result = runner.invoke(cli, ["ingest", str(empty), str(tmp_path / "missing.pdf"), "--json"])
    assert result.exit_code == 1
    report = _json(result.stdout)
    assert report["succeeded"] is False
    assert [issue["reason"] for issue in report["errors"]] == ["no such file or directory", "empty file"]  # type: ignore[union-attr,index]


def test_ingest_user_mistakes_end_in_one_line(runner: CliRunner, tmp_path: Path) -> None:
    no_paths = runner.invoke(cli, ["ingest"])
    assert no_paths.exit_code == 2 and "give at least one PATH" in no_paths.output
    bad_field = runner.invoke(cli, ["ingest", str(tmp_path), "--field", "colour=text"])
    assert bad_field.exit_code == 2 and "unknown field 'colour'" in bad_field.output
    assert "Traceback" not in no_paths.output + bad_field.output


def test_ingest_with_field_mapping(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "custom.jsonl"
    path.write_text(json.dumps({"ref": "r1", "body": "Tardigrades survive the vacuum of space."}) + "\n")
    report = _json(
        runner.invoke(cli, ["ingest", str(path), "--field", "id=ref", "--field", "text=body", "--json"]).stdout
    )
    assert report["documents_added"] == 1 and report["errors"] == []
    stats = _json(runner.invoke(cli, ["kb", "stats", "--json"]).stdout)
    assert stats["documents"] == 1


def test_ingest_demo_corpus(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["ingest", "--demo", "--json"])
    assert result.exit_code == 0, result.output
    report = _json(result.stdout)
    assert report["documents_added"] == 105 and report["errors"] == []


def test_kb_stats_and_remove(runner: CliRunner, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Alpha\n\nAlpha particles are helium nuclei.\n")
    (folder / "b.md").write_text("# Beta\n\nBeta decay emits an electron.\n")
    corpus = write_beir(tmp_path / "corpus.jsonl", beir_records())
    assert runner.invoke(cli, ["ingest", str(folder), str(corpus), "--json"]).exit_code == 0

    stats = _json(runner.invoke(cli, ["kb", "stats", "--json"]).stdout)
    assert stats["documents"] == 5 and stats["incomplete_documents"] == 0
    human = runner.invoke(cli, ["kb", "stats"])
    assert human.exit_code == 0 and "Documents: 5" in human.stdout and "all-MiniLM-L6-v2" in human.stdout

    by_path = _json(runner.invoke(cli, ["kb", "remove", "--path", str(folder), "--json"]).stdout)
    assert sorted(Path(str(key)).name for key in by_path["source_keys"]) == ["a.md", "b.md"]  # type: ignore[union-attr]
    record_key = f"{corpus.resolve()}#102"
    by_key = runner.invoke(cli, ["kb", "remove", "--source", record_key])
    assert by_key.exit_code == 0 and "Removed" in by_key.stdout
    assert _json(runner.invoke(cli, ["kb", "stats", "--json"]).stdout)["documents"] == 2

    nothing = runner.invoke(cli, ["kb", "remove", "--source", "no-such-key"])
    assert nothing.exit_code == 1 and "nothing matched" in nothing.output
    no_option = runner.invoke(cli, ["kb", "remove"])
    assert no_option.exit_code == 2 and "--source KEY" in no_option.output


def test_kb_reindex_upgrades_a_collection_an_older_analyzer_wrote(runner: CliRunner, tmp_path: Path) -> None:
    note = tmp_path / "note.md"
    note.write_text(MARKDOWN_NOTE)
    assert runner.invoke(cli, ["ingest", str(note), "--json"]).exit_code == 0
    current = runner.invoke(cli, ["kb", "reindex"])
    assert current.exit_code == 0 and "up to date" in current.stdout

    _label_as_written_by_analyzer("snowball-en-1", tmp_path / "data")
    refused = runner.invoke(cli, ["kb", "stats"])
    assert refused.exit_code == 1 and "researchcrew kb reindex" in refused.output
    assert "Traceback" not in refused.output

    report = _json(runner.invoke(cli, ["kb", "reindex", "--json"]).stdout)
    assert report["analyzer_before"] == "snowball-en-1" and report["documents"] == 1 and report["chunks"] >= 1
    stats = _json(runner.invoke(cli, ["kb", "stats", "--json"]).stdout)
    assert stats["documents"] == 1


def test_ingest_brings_an_older_keyword_index_up_to_date_first(runner: CliRunner, tmp_path: Path) -> None:
    note = tmp_path / "note.md"
    note.write_text(MARKDOWN_NOTE)
    assert runner.invoke(cli, ["ingest", str(note), "--json"]).exit_code == 0
    _label_as_written_by_analyzer("snowball-en-1", tmp_path / "data")
    other = tmp_path / "other.md"
    other.write_text("# Estuaries\n\nSalt wedges form where rivers meet the tide.\n")
    added = runner.invoke(cli, ["ingest", str(note), str(other), "--json"])
    assert added.exit_code == 0, added.output
    assert _json(added.stdout)["documents_added"] == 1
    assert _json(runner.invoke(cli, ["kb", "stats", "--json"]).stdout)["documents"] == 2
    assert "up to date" in runner.invoke(cli, ["kb", "reindex"]).stdout


def _label_as_written_by_analyzer(analyzer: str, data_dir: Path) -> None:
    from pymilvus import MilvusClient

    from researchcrew.knowledge import _schema as schema
    from researchcrew.settings import Settings

    settings = Settings(data_dir=data_dir)
    client = MilvusClient(uri=settings.milvus_uri)
    try:
        label = json.loads(schema.description(settings.embedding.model, 384)) | {"analyzer": analyzer}
        client.alter_collection_properties(settings.milvus.collection, properties={schema.PROPERTY: json.dumps(label)})
    finally:
        client.close()
