"""SciFact retrieval benchmark: quality of the default pipeline (both halves of the tuning split and all 300 test
queries), the BM25-only / dense-only / bm25s comparisons, query latency at SciFact size, and index build time.

    .venv/bin/python benchmarks/retrieval_scifact.py [--index /tmp/scifact_kb/scifact.db] > result.json

Without ``--index`` the index is built in a temporary directory (about 5 minutes on 2 cores) and deleted after.
With it, an existing index is reused (build time then reports only the check that nothing is missing).
Prints one JSON document. Needs ../shared/data/scifact.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from machine import describe_cpu  # benchmarks/machine.py (this script's own folder is on sys.path)

ROOT = Path(__file__).resolve().parent.parent
SCIFACT = ROOT.parent / "shared" / "data" / "scifact"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SCIFACT, help="BEIR SciFact folder")
    parser.add_argument("--index", default=None, help="Milvus URI to build into / reuse")
    parser.add_argument("--latency-queries", type=int, default=300)
    args = parser.parse_args()

    from researchcrew.cli._common import load_settings
    from researchcrew.cli._evaluate import evaluate_beir
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.knowledge.evaluation import QuerySplit, load_beir

    data = load_beir(args.data / "corpus.jsonl", args.data / "queries.jsonl", args.data / "qrels" / "test.tsv")
    split = QuerySplit.load(ROOT / "benchmarks" / "scifact_split.json")
    with tempfile.TemporaryDirectory(prefix="scifact-") as scratch:
        uri = args.index or str(Path(scratch) / "scifact.db")
        result = evaluate_beir(data, split, uri, "beir_eval", True, quiet=True)
        base = load_settings()
        settings = base.model_copy(
            update={"milvus": base.milvus.model_copy(update={"uri": uri, "collection": "beir_eval"})}
        )
        with KnowledgeBase(settings) as kb:
            texts = list(data.queries.values())[: args.latency_queries]
            kb.search(texts[0])  # warm-up: model and segment caches
            latencies = []
            for text in texts:
                started = time.perf_counter()
                kb.search(text, top_k=5)
                latencies.append((time.perf_counter() - started) * 1000)
            stats = kb.stats()
    latencies.sort()
    result["latency_ms"] = {
        "queries": len(latencies),
        "top_k": 5,
        "p50": round(statistics.median(latencies), 1),
        "p95": round(latencies[int(0.95 * (len(latencies) - 1))], 1),
        "chunks_in_index": stats.chunks,
    }
    result["machine"] = describe_cpu()  # latency and index build time depend on the CPU (see machine.py)
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
