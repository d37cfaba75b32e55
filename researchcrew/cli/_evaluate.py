"""``researchcrew eval retrieval``: retrieval quality of the configured pipeline on labelled BEIR-layout data."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from researchcrew.cli._common import echo_json, load_settings

if TYPE_CHECKING:
    from researchcrew.knowledge.collection import KnowledgeBase

_EXISTING_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.group("eval")
def eval_group() -> None:
    """Evaluate retrieval quality on labelled data (BEIR layout)."""


@eval_group.command("retrieval")
@click.option("--corpus", type=_EXISTING_FILE, required=True, help="corpus.jsonl: {_id, title, text} per line.")
@click.option("--queries", type=_EXISTING_FILE, required=True, help="queries.jsonl: {_id, text} per line.")
@click.option("--qrels", type=_EXISTING_FILE, required=True, help="qrels TSV: query-id, corpus-id, score.")
@click.option(
    "--split-file",
    type=_EXISTING_FILE,
    default=None,
    help='JSON {"parts": {name: [query ids]}}: metrics for each part too (e.g. tune / heldout).',
)
@click.option(
    "--index",
    "index_uri",
    default=None,
    envvar="RESEARCHCREW_EVAL_INDEX",
    help="Milvus URI of the evaluation index (a .db file or http://host:19530). Built if missing, reused (and "
    "completed) if present. Default: a temporary Milvus Lite file, deleted afterwards.",
)
@click.option("--collection", default="beir_eval", show_default=True, help="Collection name for the index.")
@click.option("--compare", is_flag=True, help="Also BM25-only and dense-only from the same index, and bm25s.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def retrieval(
    corpus: Path,
    queries: Path,
    qrels: Path,
    split_file: Path | None,
    index_uri: str | None,
    collection: str,
    compare: bool,
    as_json: bool,
) -> None:
    """nDCG@10, Recall@100 and MRR@10 of the configured search pipeline on CORPUS/QUERIES/QRELS."""
    from researchcrew.errors import KnowledgeBaseError, ModelUnavailableError
    from researchcrew.knowledge.evaluation import QuerySplit, load_beir

    data = load_beir(corpus, queries, qrels)
    if not data.queries:
        raise click.ClickException(f"no query in {queries} has a relevance judgment in {qrels}")
    split = QuerySplit.load(split_file) if split_file else None
    with tempfile.TemporaryDirectory(prefix="researchcrew-eval-") as scratch:
        uri = index_uri or str(Path(scratch) / "eval.db")
        try:
            result = evaluate_beir(data, split, uri, collection, compare, quiet=as_json)
        except (KnowledgeBaseError, ModelUnavailableError) as error:
            raise click.ClickException(str(error)) from error
    if as_json:
        echo_json(result)
    else:
        _print_table(result)


def evaluate_beir(data: Any, split: Any, uri: str, collection: str, compare: bool, *, quiet: bool) -> dict[str, Any]:
    """Build (or complete) the index at ``uri``, run the pipeline (and with ``compare`` the baselines), score."""
    from researchcrew.runtime import open_runtime

    base = load_settings()
    settings = base.model_copy(update={"milvus": base.milvus.model_copy(update={"uri": uri, "collection": collection})})

    async def run() -> dict[str, Any]:
        async with open_runtime(settings) as runtime:
            knowledge_base = await runtime.knowledge_base()
            return await asyncio.to_thread(_index_and_search, knowledge_base, data, split, uri, compare, quiet)

    results = asyncio.run(run())
    if compare:
        from researchcrew.knowledge.evaluation import bm25s_run, report

        results["bm25s"] = report(bm25s_run(data), data.qrels, split)
    retrieval = settings.retrieval
    return {
        "pipeline": {
            "embedding_model": settings.embedding.model,
            "embedding_backend": settings.embedding.backend,
            "fusion": retrieval.hybrid_fusion,
            "dense_weight": retrieval.dense_weight,
            "candidate_pool": retrieval.candidate_pool,
            "rerank": retrieval.rerank.enabled,
        },
        "index": results.pop("index"),
        "results": results,
    }


def _index_and_search(kb: KnowledgeBase, data: Any, split: Any, uri: str, compare: bool, quiet: bool) -> dict[str, Any]:
    """Index the corpus into ``kb`` (unchanged documents are skipped) and score every mode; blocking."""
    from tqdm import tqdm

    from researchcrew.knowledge.evaluation import corpus_documents, report, run_knowledge_base

    results: dict[str, Any] = {}
    documents = list(corpus_documents(data))
    started = time.perf_counter()
    with tqdm(total=len(documents), desc="indexing", unit="doc", disable=quiet) as bar:
        added = kb.add_documents(documents, progress=lambda done, _total: bar.update(done - bar.n))
    kb.flush()
    index = {
        "uri": uri,
        "documents": len(documents),
        "chunks_added": added.chunks_added,
        "documents_skipped": added.documents_skipped,
        "seconds": round(time.perf_counter() - started, 1),
    }
    for mode in ("hybrid", "bm25", "dense") if compare else ("hybrid",):
        with tqdm(total=len(data.queries), desc=f"searching ({mode})", unit="query", disable=quiet) as bar:
            run = run_knowledge_base(kb, data.queries, mode=mode, on_query=lambda: bar.update(1))
        results[mode] = report(run, data.qrels, split)
    results["index"] = index
    return results


def _print_table(result: dict[str, Any]) -> None:
    index = result["index"]
    click.echo(
        f"index: {index['documents']} documents, {index['chunks_added']} chunks added "
        f"({index['documents_skipped']} already there) in {index['seconds']} s at {index['uri']}"
    )
    names = {"hybrid": "pipeline (hybrid)", "bm25": "BM25 only", "dense": "dense only", "bm25s": "bm25s baseline"}
    click.echo(f"{'run':<20} {'queries':>8} {'part':<10} {'nDCG@10':>8} {'R@100':>8} {'MRR@10':>8}")
    for run_name, parts in result["results"].items():
        for part, metrics in parts.items():
            click.echo(
                f"{names.get(run_name, run_name):<20} {metrics['queries']:>8} {part:<10} {metrics['ndcg@10']:>8.4f} "
                f"{metrics['recall@100']:>8.4f} {metrics['mrr@10']:>8.4f}"
            )
