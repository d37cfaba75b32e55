"""Retrieval evaluation on labelled data in the BEIR layout: nDCG@10, Recall@100, MRR@10.

BEIR layout: ``corpus.jsonl`` (``{"_id", "title", "text"}``), ``queries.jsonl`` (``{"_id", "text"}``) and a qrels
TSV (``query-id  corpus-id  score`` with a header line). The metrics follow the definitions trec_eval/pytrec_eval
use, which BEIR reports:

* nDCG@k: DCG = Σ_{i<k} gain_i / log2(i + 2) with gain = the qrels grade, divided by the DCG of the ideal order
  of the query's judged documents;
* Recall@k: judged-relevant documents in the top k / all judged-relevant documents of the query;
* MRR@k: 1 / rank of the first judged-relevant document in the top k (0 if none).

A query is scored only if it has at least one relevant judgment; the mean is over those queries. The knowledge
base returns chunks, so a ranking of documents is the order in which documents first appear among the hits (a
document scores as its best chunk).
"""

from __future__ import annotations

import json
import logging
import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from researchcrew.text.json_input import read_json

logger = logging.getLogger(__name__)

Qrels = dict[str, dict[str, int]]


# Metrics ---------------------------------------------------------------------------------------------------------
def ndcg_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int = 10) -> float:
    dcg = sum(max(judged.get(doc, 0), 0) / math.log2(rank + 2) for rank, doc in enumerate(ranked[:k]))
    ideal = sorted((grade for grade in judged.values() if grade > 0), reverse=True)[:k]
    idcg = sum(grade / math.log2(rank + 2) for rank, grade in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int = 100) -> float:
    relevant = {doc for doc, grade in judged.items() if grade > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def mrr_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int = 10) -> float:
    for rank, doc in enumerate(ranked[:k]):
        if judged.get(doc, 0) > 0:
            return 1.0 / (rank + 1)
    return 0.0


@dataclass
class Metrics:
    """Mean metrics over a set of queries."""

    queries: int
    ndcg_at_10: float
    recall_at_100: float
    mrr_at_10: float

    def as_dict(self) -> dict[str, float | int]:
        return {
            "queries": self.queries,
            "ndcg@10": round(self.ndcg_at_10, 4),
            "recall@100": round(self.recall_at_100, 4),
            "mrr@10": round(self.mrr_at_10, 4),
        }


def score_run(run: Mapping[str, Sequence[str]], qrels: Qrels, query_ids: Iterable[str] | None = None) -> Metrics:
    """Mean nDCG@10 / Recall@100 / MRR@10 of ``run`` (query id → ranked document ids) over judged queries."""
    ids = [q for q in (query_ids if query_ids is not None else qrels) if any(g > 0 for g in qrels.get(q, {}).values())]
    if not ids:
        return Metrics(0, 0.0, 0.0, 0.0)
    ndcg = recall = mrr = 0.0
    for query_id in ids:
        ranked = run.get(query_id, [])
        ndcg += ndcg_at_k(ranked, qrels[query_id], 10)
        recall += recall_at_k(ranked, qrels[query_id], 100)
        mrr += mrr_at_k(ranked, qrels[query_id], 10)
    return Metrics(len(ids), ndcg / len(ids), recall / len(ids), mrr / len(ids))


# The BEIR layout -------------------------------------------------------------------------------------------------
@dataclass
class BeirData:
    corpus_path: Path
    queries: dict[str, str]
    qrels: Qrels
    skipped_lines: int = 0

    def documents(self) -> Iterator[dict[str, Any]]:
        yield from _jsonl(self.corpus_path)


def load_beir(corpus: Path, queries: Path, qrels: Path) -> BeirData:
    """Read queries and qrels (the corpus is streamed later). Bad lines are counted and logged, not fatal."""
    judged = load_qrels(qrels)
    texts: dict[str, str] = {}
    for record in _jsonl(queries):
        query_id, text = str(record.get("_id", "")), str(record.get("text", "")).strip()
        if query_id and text and query_id in judged:
            texts[query_id] = text
    missing = sorted(set(judged) - set(texts))
    if missing:
        logger.warning(
            "%d judged queries have no text in %s (e.g. %s); they are left out", len(missing), queries, missing[:3]
        )
    return BeirData(corpus, texts, {q: judged[q] for q in texts})


def load_qrels(path: Path) -> Qrels:
    qrels: Qrels = defaultdict(dict)
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or (number == 0 and not parts[2].strip().lstrip("-").isdigit()):
                continue  # header or blank line
            try:
                qrels[parts[0]][parts[1]] = int(parts[2])
            except ValueError:
                logger.warning("%s:%d: not a qrels line: %r", path, number + 1, line[:80])
    return dict(qrels)


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = read_json(line, line=number)
            except ValueError:
                logger.warning("%s:%d: not JSON, skipped", path, number)
                continue
            if isinstance(record, dict):
                yield record


# Query splits (tune on one half, report the other) ---------------------------------------------------------------
@dataclass
class QuerySplit:
    """Named subsets of query ids, e.g. {"tune": [...], "heldout": [...]}."""

    parts: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def seeded_halves(cls, query_ids: Iterable[str], *, seed: int = 13) -> QuerySplit:
        ids = sorted(query_ids)
        random.Random(seed).shuffle(ids)  # noqa: S311 - a reproducible split, not security
        half = len(ids) // 2
        return cls({"tune": sorted(ids[:half]), "heldout": sorted(ids[half:])})

    @classmethod
    def load(cls, path: Path) -> QuerySplit:
        data = read_json(path.read_text(encoding="utf-8"))
        parts = data.get("parts", data) if isinstance(data, dict) else None
        if not isinstance(parts, dict) or not all(isinstance(v, list) for v in parts.values()):
            raise ValueError(f"{path}: expected {{'parts': {{name: [query ids]}}}}")
        return cls({str(name): [str(q) for q in ids] for name, ids in parts.items()})

    def save(self, path: Path, *, note: str = "") -> None:
        path.write_text(json.dumps({"note": note, "parts": self.parts}, indent=1) + "\n", encoding="utf-8")


def report(run: Mapping[str, Sequence[str]], qrels: Qrels, split: QuerySplit | None) -> dict[str, Any]:
    """Metrics over all judged queries, and per split part when a split is given."""
    result: dict[str, Any] = {"all": score_run(run, qrels).as_dict()}
    if split is not None:
        for name, ids in split.parts.items():
            result[name] = score_run(run, qrels, ids).as_dict()
    return result


def document_ranking(hit_keys: Iterable[str], limit: int = 100) -> list[str]:
    """Document ids in order of first appearance (a document ranks by its best chunk)."""
    seen: dict[str, None] = {}
    for key in hit_keys:
        if key not in seen:
            seen[key] = None
            if len(seen) >= limit:
                break
    return list(seen)


def bm25s_run(
    data: BeirData, *, top_k: int = 100, progress: Callable[[str], None] | None = None
) -> dict[str, list[str]]:
    """The plain BM25 baseline: bm25s (k1=1.5, b=0.75, Lucene variant) with English stop words and stemming."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")  # bm25s's own recipe, not ``text.terms``: the baseline as others run it
    ids: list[str] = []
    texts: list[str] = []
    for record in data.documents():
        ids.append(str(record.get("_id", "")))
        texts.append(f"{record.get('title') or ''} {record.get('text') or ''}".strip())
    if progress:
        progress(f"bm25s: indexing {len(ids)} documents")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    query_ids = list(data.queries)
    tokens = bm25s.tokenize([data.queries[q] for q in query_ids], stopwords="en", stemmer=stemmer, show_progress=False)
    results, _ = retriever.retrieve(tokens, k=min(top_k, len(ids)), show_progress=False, n_threads=1)
    return {query_id: [ids[int(i)] for i in row] for query_id, row in zip(query_ids, results, strict=True)}


# Running a knowledge base over BEIR data ---------------------------------------------------------------------------
def corpus_documents(data: BeirData) -> Iterator[Any]:
    """The corpus as ``Document`` objects keyed ``<corpus file name>#<_id>`` (the JSONL record-key convention)."""
    from researchcrew.knowledge.documents import Document

    for record in data.documents():
        corpus_id = str(record.get("_id", "")).strip()
        title = str(record.get("title") or "").strip() or None
        text = str(record.get("text") or "").strip() or (title or "")
        if not corpus_id or not text:
            continue
        yield Document(
            source_key=f"{data.corpus_path.name}#{corpus_id}",
            text=text,
            title=title,
            metadata={"corpus_id": corpus_id, "source": data.corpus_path.name},
        )


def corpus_id_of(source_key: str) -> str:
    return source_key.rsplit("#", 1)[-1]


def run_knowledge_base(
    kb: Any,
    queries: Mapping[str, str],
    *,
    mode: str = "hybrid",
    depth: int = 100,
    on_query: Callable[[], None] | None = None,
) -> dict[str, list[str]]:
    """Document rankings (``depth`` documents) of the knowledge base for each query.

    ``top_k`` asks for enough chunks to fill ``depth`` distinct documents (two chunks per document on average
    in abstract-sized corpora, plus margin); the pool the pipeline fuses grows with it.
    """
    run: dict[str, list[str]] = {}
    for query_id, text in queries.items():
        hits = kb.search(text, top_k=depth * 2 + 50, min_relevance=0.0, mode=mode)
        run[query_id] = document_ranking((corpus_id_of(hit.source_key) for hit in hits), depth)
        if on_query:
            on_query()
    return run
