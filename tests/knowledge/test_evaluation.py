"""Retrieval metrics against values computed by hand, and the BEIR helpers."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from researchcrew.knowledge.evaluation import (
    QuerySplit,
    document_ranking,
    load_beir,
    load_qrels,
    mrr_at_k,
    ndcg_at_k,
    recall_at_k,
    report,
    score_run,
)


def test_ndcg_by_hand() -> None:
    # Relevant d1 (grade 1) at rank 2 and d2 (grade 2) at rank 3 of ["x", "d1", "d2"].
    ranked = ["x", "d1", "d2"]
    judged = {"d1": 1, "d2": 2}
    dcg = 1 / math.log2(3) + 2 / math.log2(4)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert ndcg_at_k(ranked, judged, 10) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(["d2", "d1"], judged, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "y"], judged, 10) == 0.0
    # The cut-off: relevant documents past k do not count.
    assert ndcg_at_k(["x", "d2"], judged, 1) == 0.0


def test_recall_and_mrr_by_hand() -> None:
    judged = {"a": 1, "b": 1, "c": 0}
    assert recall_at_k(["a", "x", "c"], judged, 100) == pytest.approx(0.5)
    assert recall_at_k(["x", "b", "a"], judged, 2) == pytest.approx(0.5)
    assert mrr_at_k(["c", "x", "b"], judged, 10) == pytest.approx(1 / 3)
    assert mrr_at_k(["c", "x", "b"], judged, 2) == 0.0


def test_score_run_averages_over_judged_queries_only() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}}
    run = {"q1": ["a"], "q2": ["x", "b"]}
    metrics = score_run(run, qrels)
    assert metrics.queries == 2  # q3 has no relevant document
    assert metrics.mrr_at_10 == pytest.approx((1 + 0.5) / 2)
    assert metrics.recall_at_100 == pytest.approx(1.0)
    split = QuerySplit({"tune": ["q1"], "heldout": ["q2"]})
    result = report(run, qrels, split)
    assert result["tune"]["mrr@10"] == 1.0 and result["heldout"]["mrr@10"] == 0.5


def test_document_ranking_keeps_first_appearance() -> None:
    assert document_ranking(["a", "b", "a", "c", "b", "d"], 3) == ["a", "b", "c"]


def test_beir_loading_skips_bad_lines(tmp_path: Path) -> None:
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "x"}\nnot json\n', encoding="utf-8")
    (tmp_path / "queries.jsonl").write_text('{"_id": "1", "text": "q one"}\n{"_id": "9", "text": "unjudged"}\n')
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n1\td1\t1\n2\td1\t1\nbroken line\n")
    qrels = load_qrels(tmp_path / "qrels.tsv")
    assert qrels == {"1": {"d1": 1}, "2": {"d1": 1}}
    data = load_beir(tmp_path / "corpus.jsonl", tmp_path / "queries.jsonl", tmp_path / "qrels.tsv")
    assert data.queries == {"1": "q one"}  # query 2 has no text, query 9 no judgments
    assert [record["_id"] for record in data.documents()] == ["d1"]


def test_split_round_trip(tmp_path: Path) -> None:
    split = QuerySplit.seeded_halves([str(i) for i in range(11)], seed=3)
    assert sorted(split.parts["tune"] + split.parts["heldout"], key=int) == [str(i) for i in range(11)]
    assert QuerySplit.seeded_halves([str(i) for i in range(11)], seed=3).parts == split.parts
    split.save(tmp_path / "split.json", note="test")
    assert QuerySplit.load(tmp_path / "split.json").parts == split.parts
