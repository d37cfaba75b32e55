"""The long-text route (issue 22, seed 004 §5): summaries of long documents, searched first, then their sections.

    PYTHONPATH=. .venv/bin/python benchmarks/long_text.py [--rounds 3] [--keep DIR]

Builds a corpus in a temporary folder: four long multi-section documents (``data/long_text_documents.py``: a field
station manual, a seed library handbook, a bakery's food-safety plan, a lab's data policy; 8-9 sections each) among
the 68 short documents of ``structured.py`` (receipts, invoices, spec sheets, abstracts).

1. **Ingest slow-down** of the issue's extraction (annotations + summaries) against neither, each round on a
   fresh knowledge base, the two modes interleaved; the median of ``--rounds`` after a warm-up ingest, with the
   annotation and summary passes' own seconds.
2. **Labelled check**: 17 thematic questions, each written for one section in words its heading does not use.
   Right section (document and heading) among the top 3 passages: plain hybrid retrieval (``kb.search``) versus the
   long-text route (``LongTextSearch``: summaries, then a search filtered to the matching sections; plain retrieval
   when no summary matches), and the right section among the route's top-3 summaries; also the first passage.
   Milliseconds per question for both (the route's query vector is cached by the plain search before it, as in
   the pipeline).
3. **Summary pass on a knowledge base that has its summaries collection already** (every long document summarised
   again, median of ``--rounds``): the fresh-knowledge-base ingests above include making the collection once.
Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.data.long_text_documents import DOCUMENTS, QUESTIONS, markdown
from benchmarks.machine import describe_cpu
from benchmarks.structured import build_corpus


def ingest(
    folder: Path, data_dir: Path, *, extract: bool, embedder: Any, vectors: str = "centroid"
) -> tuple[float, Any]:
    """Seconds to ingest ``folder`` into a fresh knowledge base (setup excluded), and (kb, report)."""
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.knowledge.ingest import ingest_paths
    from researchcrew.settings import Settings

    shutil.rmtree(data_dir, ignore_errors=True)
    structured = {"annotate": extract, "summaries": extract, "summary_vectors": vectors}
    settings = Settings(data_dir=data_dir, structured=structured)
    kb = KnowledgeBase(settings, embedder=embedder)
    kb.store.open()
    started = time.perf_counter()
    report = ingest_paths(kb, folder, progress=False)
    return time.perf_counter() - started - report.setup_seconds, (kb, report)


def check(kb: Any, folder: Path) -> dict[str, Any]:
    """The labelled check (see the module docstring)."""
    from researchcrew.knowledge.filters import SearchFilters
    from researchcrew.pipeline._long_text import long_text_search

    route = long_text_search(kb)
    assert route is not None
    shared = SearchFilters(collections=["shared"])
    rows: list[dict[str, Any]] = []
    for question, file, section in QUESTIONS:
        key = str((folder / file).resolve())
        started = time.perf_counter()
        plain = kb.search(question, top_k=3, filters=shared)
        plain_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        found = route.run(question, ["shared"])
        route_ms = (time.perf_counter() - started) * 1000
        route_top = [(c.metadata["source_key"], c.metadata["heading"]) for c in found.chunks[:3]]
        if not found.chunks:  # no summary matched: the question goes on by plain retrieval
            route_top = [(hit.source_key, hit.heading) for hit in plain]
        plain_top = [(hit.source_key, hit.heading) for hit in plain]
        summaries_top = [(ref.source_key, ref.heading) for ref in found.sections[:3]]
        rows.append(
            {
                "question": question,
                "section": section,
                "plain": (key, section) in plain_top,
                "route": (key, section) in route_top,
                "plain_first": plain_top[:1] == [(key, section)],
                "route_first": route_top[:1] == [(key, section)],
                "summaries": (key, section) in summaries_top or (key, None) in summaries_top,
                "fell_back": not found.chunks,
                "plain_ms": round(plain_ms, 1),
                "route_ms": round(route_ms, 1),
                "matched": [f"{m.heading or m.title} {m.score:.2f}" for m in found.matches[:3]],
                "plain_headings": [heading for _, heading in plain_top],
            }
        )
    count = len(rows)
    return {
        "questions": count,
        "documents": len(DOCUMENTS),
        "plain_top3": round(sum(r["plain"] for r in rows) / count, 4),
        "route_top3": round(sum(r["route"] for r in rows) / count, 4),
        "summaries_top3": round(sum(r["summaries"] for r in rows) / count, 4),
        "plain_top1": round(sum(r["plain_first"] for r in rows) / count, 4),
        "route_top1": round(sum(r["route_first"] for r in rows) / count, 4),
        "fell_back": sum(r["fell_back"] for r in rows),
        "plain_ms_p50": round(statistics.median(r["plain_ms"] for r in rows), 1),
        "route_ms_p50": round(statistics.median(r["route_ms"] for r in rows), 1),
        "route_misses": [r for r in rows if not r["route"]],
        "plain_misses": [{"question": r["question"], "got": r["plain_headings"]} for r in rows if not r["plain"]],
    }


def resummarise(kb: Any, folder: Path, rounds: int) -> float:
    """Median seconds of summarising every document again (``only_missing=False``) into an existing collection."""
    from researchcrew.knowledge.loaders import load_file
    from researchcrew.knowledge.summaries import summaries_for

    summaries = summaries_for(kb)
    assert summaries is not None
    documents = [document for path in sorted(folder.iterdir()) for document in load_file(path).documents]
    seconds = []
    for _ in range(rounds):
        started = time.perf_counter()
        summaries.summarise(documents)
        seconds.append(time.perf_counter() - started)
    return round(statistics.median(seconds), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="ingest rounds with extraction on and off")
    parser.add_argument("--keep", type=Path, help="build the corpus and data here and keep them")
    parser.add_argument(
        "--vectors", choices=("centroid", "text"), default="centroid", help="summary vectors (settings.structured)"
    )
    options = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from researchcrew.embedding.embedder import default_cache_dir, get_embedder
    from researchcrew.settings import EmbeddingSettings

    root = options.keep or Path(tempfile.mkdtemp(prefix="long-text-bench-"))
    folder = root / "corpus"
    folder.mkdir(parents=True, exist_ok=True)
    build_corpus(folder)
    for name, (title, sections) in DOCUMENTS.items():
        (folder / name).write_text(markdown(title, sections), encoding="utf-8")
    embedder = get_embedder(EmbeddingSettings(cache_dir=default_cache_dir()))
    embedder.embed_documents(["warm up"])
    ingest(folder, root / "data-warm-up", extract=True, embedder=embedder)[1][0].close()  # Milvus, imports
    timings: dict[str, list[float]] = {"off": [], "on": []}
    loads: list[float] = []
    passes: dict[str, list[float]] = {"annotations": [], "summaries": []}
    kept: Any = None
    for number in range(options.rounds):
        for mode in ("off", "on") if number % 2 == 0 else ("on", "off"):
            loads.append(os.getloadavg()[0])
            data_dir = root / f"data-{mode}-{number}"
            seconds, (kb, report) = ingest(
                folder, data_dir, extract=mode == "on", embedder=embedder, vectors=options.vectors
            )
            timings[mode].append(seconds)
            if mode == "off":
                kb.close()
                continue
            passes["annotations"].append(report.annotation_seconds)
            passes["summaries"].append(report.summary_seconds)
            if kept is not None:
                kept[0].close()
            kept = (kb, report)
    kb, report = kept
    again = resummarise(kb, folder, options.rounds)
    off, on = statistics.median(timings["off"]), statistics.median(timings["on"])
    output = {
        "machine": describe_cpu(),
        "load_average_during_ingests": [round(value, 2) for value in loads],
        "corpus": {
            "files": len(list(folder.iterdir())),
            "long_documents": len(DOCUMENTS),
            "chunks": report.chunks_added,
            "summaries": report.summaries_added,
            "annotations": report.annotations_added,
        },
        "summary_vectors": options.vectors,
        "ingest_seconds": {
            "extraction_off": round(off, 3),
            "extraction_on": round(on, 3),
            "rounds": options.rounds,
            "all_off": [round(value, 3) for value in timings["off"]],
            "all_on": [round(value, 3) for value in timings["on"]],
        },
        "ingest_slowdown": round(on / off - 1, 4) if off else None,
        "annotation_seconds": round(statistics.median(passes["annotations"]), 3),
        "summary_seconds": round(statistics.median(passes["summaries"]), 3),
        "summary_share_of_ingest": round(statistics.median(passes["summaries"]) / on, 4) if on else None,
        "summary_seconds_existing_collection": again,
        "long_text": check(kb, folder),
        "load_average_end": os.getloadavg(),
    }
    kb.close()
    if options.keep is None:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(output, indent=2))


if __name__ == "__main__":
    main()
