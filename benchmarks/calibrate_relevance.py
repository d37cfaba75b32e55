"""Fit the relevance calibration of the knowledge base (``researchcrew/knowledge/_fusion.py``) on SciFact.

    .venv/bin/python benchmarks/calibrate_relevance.py --index /tmp/scifact_kb/scifact.db > calibration.json

The index is one that ``benchmarks/retrieval_scifact.py --index FILE`` built (collection ``beir_eval``). For every
query of the tuning half, the top ``--depth`` hits of the real pipeline are taken with their raw scores, labelled
by the qrels (a hit is relevant when its document is judged relevant), and a class-balanced logistic regression is
fitted:

* hybrid: ``relevance = σ(A·fused + B·cosine + C)`` → ``CALIBRATION_FUSED``, ``CALIBRATION_COSINE``,
  ``CALIBRATION_BIAS``;
* single-side modes (dense-only and BM25-only hits pooled): ``σ(A·fused + C)`` → ``SINGLE_FUSED``, ``SINGLE_BIAS``.

Class-balanced means relevant and non-relevant hits weigh the same in total, so a relevance reads as "the
probability that a hit is relevant under equal priors", independent of how many relevant documents a corpus has per
query. Prints the constants and, for the held-out half, the share of judged-relevant hits per relevance band of the
top 10 (computed with the *fitted* constants), which is what makes ``min_relevance`` thresholds meaningful.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SCIFACT = ROOT.parent / "shared" / "data" / "scifact"
BANDS = [(0.0, 0.3), (0.3, 0.5), (0.5, 0.7), (0.7, 0.9), (0.9, 1.01)]


def fit_logistic(features: np.ndarray, labels: np.ndarray, *, iterations: int = 50) -> np.ndarray:
    """Class-balanced logistic regression by Newton's method; returns weights with the bias last."""
    x = np.hstack([features, np.ones((len(features), 1))])
    positives = labels.sum()
    weights = np.where(labels == 1, len(labels) / (2 * positives), len(labels) / (2 * (len(labels) - positives)))
    beta = np.zeros(x.shape[1])
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-(x @ beta)))
        gradient = x.T @ (weights * (labels - p))
        hessian = (x * (weights * p * (1 - p))[:, None]).T @ x + 1e-6 * np.eye(x.shape[1])
        step = np.linalg.solve(hessian, gradient)
        beta += step
        if np.abs(step).max() < 1e-9:
            break
    return beta


def collect(
    kb: Any, queries: dict[str, str], qrels: dict[str, dict[str, int]], ids: list[str], *, mode: str, depth: int
) -> list[tuple[str, float, float, int]]:
    """(query id, fused, cosine, label) for the top ``depth`` hits of each query."""
    from researchcrew.knowledge.evaluation import corpus_id_of

    rows = []
    for query_id in ids:
        if query_id not in queries:
            continue
        for hit in kb.search(queries[query_id], top_k=depth, mode=mode):
            label = int(qrels[query_id].get(corpus_id_of(hit.source_key), 0) > 0)
            rows.append((query_id, hit.scores.fused, hit.scores.dense or 0.0, label))
    return rows


def reliability(rows: list[tuple[str, float, float, int]], beta: np.ndarray, *, top: int = 10) -> list[dict[str, Any]]:
    by_query: dict[str, list[tuple[float, int]]] = {}
    for query_id, fused, cosine, label in rows:
        hits = by_query.setdefault(query_id, [])
        if len(hits) < top:  # rows arrive best first per query
            hits.append((1 / (1 + math.exp(-(beta[0] * fused + beta[1] * cosine + beta[2]))), label))
    table = []
    for low, high in BANDS:
        labels = [label for hits in by_query.values() for relevance, label in hits if low <= relevance < high]
        table.append(
            {
                "band": f"{low:.1f}-{min(high, 1.0):.1f}",
                "hits": len(labels),
                "judged_relevant": round(sum(labels) / len(labels), 3) if labels else None,
            }
        )
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SCIFACT, help="BEIR SciFact folder")
    parser.add_argument("--index", required=True, help="Milvus URI of an index retrieval_scifact.py built")
    parser.add_argument("--depth", type=int, default=100, help="hits per query used for the fit")
    args = parser.parse_args()

    from researchcrew.cli._common import load_settings
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.knowledge.evaluation import QuerySplit, load_beir

    data = load_beir(args.data / "corpus.jsonl", args.data / "queries.jsonl", args.data / "qrels" / "test.tsv")
    split = QuerySplit.load(ROOT / "benchmarks" / "scifact_split.json")
    base = load_settings()
    settings = base.model_copy(
        update={"milvus": base.milvus.model_copy(update={"uri": args.index, "collection": "beir_eval"})}
    )
    with KnowledgeBase(settings) as kb:
        tune = collect(kb, data.queries, data.qrels, split.parts["tune"], mode="hybrid", depth=args.depth)
        single = [
            row
            for mode in ("dense", "bm25")
            for row in collect(kb, data.queries, data.qrels, split.parts["tune"], mode=mode, depth=args.depth)
        ]
        heldout = collect(kb, data.queries, data.qrels, split.parts["heldout"], mode="hybrid", depth=args.depth)
    hybrid = fit_logistic(
        np.array([[fused, cosine] for _, fused, cosine, _ in tune]),
        np.array([label for *_, label in tune], dtype=float),
    )
    one_side = fit_logistic(
        np.array([[fused] for _, fused, _, _ in single]), np.array([label for *_, label in single], dtype=float)
    )
    result = {
        "fitted_on": {"part": "tune", "hits": len(tune), "relevant": sum(row[3] for row in tune), "depth": args.depth},
        "constants": {
            "CALIBRATION_FUSED": round(float(hybrid[0]), 3),
            "CALIBRATION_COSINE": round(float(hybrid[1]), 3),
            "CALIBRATION_BIAS": round(float(hybrid[2]), 3),
            "SINGLE_FUSED": round(float(one_side[0]), 3),
            "SINGLE_BIAS": round(float(one_side[1]), 3),
        },
        "heldout_reliability_top10": reliability(heldout, hybrid),
    }
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
