"""Which analysis and keyword window to index: SciFact nDCG@10 of the choices no setting switches.

    .venv/bin/python benchmarks/retrieval_ablation.py [--cache /tmp/ablation] > ablation.json

Building a Milvus index per variant would take minutes each, so this replays the pipeline in numpy: the project's
own chunker, analyzer and embedder, a BM25 with Milvus Lite's scoring (k1 = 1.5, b = 0.75, idf = ln(1 + (N − df +
0.5) / (df + 0.5)), query terms counted with repetition) and the default fusion (both sides min-max normalised over
the union of the two top-100 pools, w = 0.5). For the shipped configuration it gives the same nDCG@10 as
``retrieval_scifact.py`` on the real index (0.7500), and for the previous one the same as that index did (0.7307).

Variants: the analyzer with and without joined hyphenated compounds (``analysis``), and what BM25 reads for a
chunk: the chunk alone, the chunk between ±1 or ±2 neighbours (``chunking.keyword_text``), or its whole document.
The dense side is the same in all (the chunk's own vector). Embeddings are cached in ``--cache`` (about 150 s to
compute). Prints one JSON document: nDCG@10 / Recall@100 on the tune half, the held-out half and all queries, for
BM25 alone and fused, per variant; and RRF on the shipped variant.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sparse

ROOT = Path(__file__).resolve().parent.parent
SCIFACT = ROOT.parent / "shared" / "data" / "scifact"
POOL = 100
K1, B = 1.5, 0.75


class MilvusLikeBM25:
    """BM25 over a fixed set of texts, scored like Milvus Lite's BM25 function (checked against it, see above)."""

    def __init__(self, texts: Sequence[str], tokens: Callable[[str], list[str]]) -> None:
        self._tokens = tokens
        self.vocabulary: dict[str, int] = {}
        rows, columns, counts, lengths = [], [], [], []
        for row, text in enumerate(texts):
            terms = tokens(text)
            lengths.append(len(terms))
            frequency: dict[int, int] = defaultdict(int)
            for term in terms:
                frequency[self.vocabulary.setdefault(term, len(self.vocabulary))] += 1
            for column, count in frequency.items():
                rows.append(row)
                columns.append(column)
                counts.append(count)
        length = np.array(lengths, dtype=np.float64)
        document_frequency = np.bincount(columns, minlength=len(self.vocabulary))
        idf = np.log(1 + (len(texts) - document_frequency + 0.5) / (document_frequency + 0.5))
        tf = np.array(counts, dtype=np.float64)
        row_index, column_index = np.array(rows), np.array(columns)
        norm = K1 * (1 - B + B * length[row_index] / length.mean())
        weights = tf * (K1 + 1) / (tf + norm) * idf[column_index]
        shape = (len(self.vocabulary), len(texts))
        self._weights = sparse.csr_matrix((weights, (column_index, row_index)), shape=shape)

    def scores(self, query: str) -> np.ndarray:
        counts = np.zeros(len(self.vocabulary))
        for term in self._tokens(query):
            if term in self.vocabulary:
                counts[self.vocabulary[term]] += 1
        return np.asarray(self._weights.T @ counts).ravel()


def minmax(values: np.ndarray, pool: np.ndarray) -> np.ndarray:
    low, high = values[pool].min(), values[pool].max()
    return np.clip((values - low) / (high - low + 1e-12), 0, 1)


def ranks_descending(values: np.ndarray) -> np.ndarray:
    ranks = np.empty(len(values))
    ranks[np.argsort(-values, kind="stable")] = np.arange(len(values))
    return ranks


def document_run(chunk_docs: Sequence[str], scores: np.ndarray, depth: int = 100) -> list[str]:
    from researchcrew.knowledge.evaluation import document_ranking

    return document_ranking((chunk_docs[i] for i in np.argsort(-scores, kind="stable")), depth)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SCIFACT, help="BEIR SciFact folder")
    parser.add_argument("--cache", type=Path, default=None, help="folder to keep the embeddings in between runs")
    args = parser.parse_args()

    from researchcrew.embedding.embedder import get_embedder
    from researchcrew.knowledge._analysis import Analyzer
    from researchcrew.knowledge._chunking import indexed_text, keyword_text
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.knowledge.evaluation import QuerySplit, corpus_documents, load_beir, report
    from researchcrew.settings import Settings

    started = time.perf_counter()
    data = load_beir(args.data / "corpus.jsonl", args.data / "queries.jsonl", args.data / "qrels" / "test.tsv")
    split = QuerySplit.load(ROOT / "benchmarks" / "scifact_split.json")
    settings = Settings()
    embedder = get_embedder(settings)
    chunker = KnowledgeBase(settings, embedder=embedder).chunker
    chunks, chunk_docs, documents = [], [], {}
    for document in corpus_documents(data):
        corpus_id = str(document.metadata["corpus_id"])
        documents[corpus_id] = indexed_text(document.title, None, document.text)
        pieces = chunker.chunk(document)
        bodies = [piece.text for piece in pieces]
        chunks.extend((piece, bodies) for piece in pieces)
        chunk_docs.extend(corpus_id for _ in pieces)
    query_ids = list(data.queries)
    cached = args.cache / "chunk_vectors.npy" if args.cache else None
    if cached is not None and cached.exists() and len(np.load(cached)) == len(chunks):
        vectors = np.load(cached)
    else:
        vectors = embedder.embed_documents([indexed_text(c.title, c.heading, c.text) for c, _ in chunks])
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            np.save(cached, vectors)
    dense = [vectors @ embedder.embed_query(data.queries[q]) for q in query_ids]

    def keyword_texts(window: str) -> list[str]:
        """What BM25 reads for each chunk under a variant."""
        if window == "document":
            return [documents[doc] for doc in chunk_docs]
        if window == "chunk":
            return [indexed_text(chunk.title, chunk.heading, chunk.text) for chunk, _ in chunks]
        radius = int(window[-1])
        return [
            keyword_text(chunk.title, chunk.heading, bodies, chunk.position, radius=radius) for chunk, bodies in chunks
        ]

    results: dict[str, Any] = {}
    for join_compounds in (False, True):
        analyzer = Analyzer(join_compounds=join_compounds)
        for window in ("chunk", "chunk±1", "chunk±2", "document"):
            texts = keyword_texts(window)
            bm25 = MilvusLikeBM25(texts, analyzer.tokens)
            keyword = [bm25.scores(data.queries[q]) for q in query_ids]
            fused_run, bm25_run, rrf_run = {}, {}, {}
            for index, query_id in enumerate(query_ids):
                d, b = dense[index], keyword[index]
                pool = np.union1d(np.argsort(-d)[:POOL], np.argsort(-b)[:POOL])
                fused = np.full(len(d), -1.0)
                fused[pool] = (0.5 * minmax(d, pool) + 0.5 * minmax(b, pool))[pool]
                fused_run[query_id] = document_run(chunk_docs, fused)
                bm25_run[query_id] = document_run(chunk_docs, b)
                rrf = 1 / (61 + ranks_descending(d)) + 1 / (61 + ranks_descending(b))  # k = 60, ranks from 0
                rrf_run[query_id] = document_run(chunk_docs, rrf)
            name = f"{'compounds' if join_compounds else 'plain'} / {window}"
            results[name] = {
                "bm25": _brief(report(bm25_run, data.qrels, split)),
                "hybrid": _brief(report(fused_run, data.qrels, split)),
            }
            if join_compounds and window == "chunk±1":
                results[name]["hybrid_rrf"] = _brief(report(rrf_run, data.qrels, split))
    json.dump(
        {"chunks": len(chunks), "seconds": round(time.perf_counter() - started, 1), "variants": results},
        sys.stdout,
        indent=2,
    )
    sys.stdout.write("\n")
    return 0


def _brief(metrics: dict[str, Any]) -> dict[str, Any]:
    return {part: {key: values[key] for key in ("ndcg@10", "recall@100")} for part, values in metrics.items()}


if __name__ == "__main__":
    raise SystemExit(main())
