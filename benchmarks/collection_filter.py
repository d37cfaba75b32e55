"""What limiting a search to the collections a user may read costs, and that it holds: hybrid search latency over a
knowledge base of many users' private collections, unrestricted versus ``collection in [...]`` in the Milvus
expression (the partition key), and whether any hit came from a collection outside the limit.

    .venv/bin/python benchmarks/collection_filter.py [--users 20] [--queries 30] [--data-dir DIR] [--keep]

The bundled demo corpus (105 arXiv abstracts) is ingested into ``shared`` once; its rows, vectors included, are then
copied into ``user:u0`` .. ``user:uN`` (the same texts in every private collection: the hardest case for a limit
applied after the search, as every query's best matches sit in every collection). A reader reads ``shared`` and their
own private collection. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.ask_latency import ingest_demo_corpus, percentile
from benchmarks.machine import describe_cpu

QUERIES = [
    "metamorphic testing of machine learning systems",
    "flaky tests in continuous integration",
    "mutation testing with large language models",
    "test generation for deep learning libraries",
    "fuzzing compilers",
    "property-based testing",
]


def copy_into_private_collections(knowledge_base: Any, users: int) -> int:
    from researchcrew.knowledge import _schema as schema
    from researchcrew.knowledge.collection import _STORED_FIELDS

    fields = [*(_STORED_FIELDS[:-1]), schema.SEARCH_TEXT]
    rows = list(knowledge_base.store.rows(f'{schema.COLLECTION} == "shared"', fields))
    for number in range(users):
        collection = f"user:u{number}"
        copies = [
            {field: row[field] for field in fields}
            | {
                schema.COLLECTION: collection,
                schema.PK: schema.primary_key(row[schema.SOURCE_KEY], row[schema.CHUNK_ID], collection),
            }
            for row in rows
        ]
        for start in range(0, len(copies), 512):
            knowledge_base.store.insert(copies[start : start + 512])
    knowledge_base.flush()
    return len(rows) * users


def timed(knowledge_base: Any, queries: list[str], filters: Any) -> tuple[list[float], set[str]]:
    latencies: list[float] = []
    collections: set[str] = set()
    for query in queries:
        started = time.perf_counter()
        hits = knowledge_base.search(query, top_k=10, filters=filters)
        latencies.append((time.perf_counter() - started) * 1000)
        collections.update(hit.collection for hit in hits)
    return latencies, collections


def summary(latencies: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(latencies), 1),
        "p95_ms": round(percentile(latencies, 0.95), 1),
        "mean_ms": round(statistics.fmean(latencies), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    arguments = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.knowledge.filters import SearchFilters
    from researchcrew.settings import Settings

    data_dir = arguments.data_dir or Path(tempfile.mkdtemp(prefix="rc-collections-"))
    settings = Settings(data_dir=data_dir)
    try:
        ingested = ingest_demo_corpus(settings)
        with KnowledgeBase(settings) as knowledge_base:
            copied = copy_into_private_collections(knowledge_base, arguments.users)
            queries = (QUERIES * (arguments.queries // len(QUERIES) + 1))[: arguments.queries]
            timed(knowledge_base, QUERIES[:2], None)  # warm-up: model, segments, BM25 index
            reader = SearchFilters(collections=["shared", "user:u3"])
            unrestricted, _ = timed(knowledge_base, queries, None)
            limited, seen = timed(knowledge_base, queries, reader)
            chunks = knowledge_base.stats().chunks
        print(
            json.dumps(
                {
                    "benchmark": "collection_filter",
                    "cpu": describe_cpu(),
                    "load_average": [round(value, 2) for value in os.getloadavg()],
                    "demo_corpus": ingested,
                    "private_collections": arguments.users,
                    "chunks_copied": copied,
                    "chunks_total": chunks,
                    "queries": len(queries),
                    "unrestricted": summary(unrestricted),
                    "limited_to_shared_and_own": summary(limited),
                    "collections_in_limited_hits": sorted(seen),
                    "outside_the_limit": sorted(seen - {"shared", "user:u3"}),
                },
                indent=2,
            )
        )
    finally:
        if not arguments.keep and arguments.data_dir is None:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
