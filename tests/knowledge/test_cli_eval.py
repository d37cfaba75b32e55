"""`researchcrew eval retrieval` end to end on a tiny BEIR-layout corpus (real Milvus Lite, real model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from researchcrew.cli import cli

DOCS = {
    "d1": ("Photosynthesis", "Chlorophyll absorbs sunlight; RuBisCO fixes carbon dioxide into sugars."),
    "d2": ("Transformers", "Self-attention relates every token to every other token without recurrence."),
    "d3": ("Vaccines", "mRNA vaccines reduced symptomatic COVID-19 infection by about 95 percent."),
    "d4": ("Volcanoes", "Explosive eruptions eject ash into the stratosphere and cool the climate."),
}
QUERIES = {"1": "how do plants fix carbon", "2": "attention instead of recurrent networks", "3": "volcanic ash cooling"}
QRELS = {"1": "d1", "2": "d2", "3": "d4"}


@pytest.fixture
def beir(tmp_path: Path) -> Path:
    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": t, "text": x}) + "\n" for k, (t, x) in DOCS.items()), encoding="utf-8"
    )
    (tmp_path / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in QUERIES.items()), encoding="utf-8"
    )
    (tmp_path / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in QRELS.items()), encoding="utf-8"
    )
    (tmp_path / "split.json").write_text(json.dumps({"parts": {"tune": ["1"], "heldout": ["2", "3"]}}))
    return tmp_path


def test_eval_retrieval_json_with_compare(beir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCHCREW_EMBEDDING__BACKEND", "torch")
    args = [
        "eval",
        "retrieval",
        "--corpus",
        str(beir / "corpus.jsonl"),
        "--queries",
        str(beir / "queries.jsonl"),
        "--qrels",
        str(beir / "qrels.tsv"),
        "--split-file",
        str(beir / "split.json"),
        "--index",
        str(beir / "index.db"),
        "--compare",
        "--json",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert set(payload["results"]) == {"hybrid", "bm25", "dense", "bm25s"}
    hybrid = payload["results"]["hybrid"]
    assert hybrid["all"]["queries"] == 3 and hybrid["tune"]["queries"] == 1 and hybrid["heldout"]["queries"] == 2
    assert hybrid["all"]["ndcg@10"] == pytest.approx(1.0)  # each query's document is unmistakable
    assert hybrid["all"]["mrr@10"] == pytest.approx(1.0) and hybrid["all"]["recall@100"] == pytest.approx(1.0)
    assert payload["index"]["chunks_added"] == 4
    # The index is reused: a second run adds nothing.
    again = json.loads(CliRunner().invoke(cli, [*args[:-2], "--json"]).stdout)
    assert again["index"]["chunks_added"] == 0 and again["index"]["documents_skipped"] == 4


def test_eval_retrieval_table_and_bad_input(beir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCHCREW_EMBEDDING__BACKEND", "torch")
    args = [
        "eval",
        "retrieval",
        "--corpus",
        str(beir / "corpus.jsonl"),
        "--queries",
        str(beir / "queries.jsonl"),
        "--qrels",
        str(beir / "qrels.tsv"),
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "pipeline (hybrid)" in result.output and "nDCG@10" in result.output
    (beir / "empty.tsv").write_text("query-id\tcorpus-id\tscore\n")
    failed = CliRunner().invoke(cli, [*args[:-1], str(beir / "empty.tsv")])
    assert failed.exit_code != 0 and "no query" in failed.output
