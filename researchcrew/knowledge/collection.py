"""``KnowledgeBase``: documents in, cited passages out, over one Milvus collection.

Writes are idempotent and crash-safe:

* A document is identified by ``source_key`` (where it lives) and ``doc_id`` (a hash of its content). Every row
  stores its document's ``chunk_count``; a document counts as present only when all its rows are there.
* Adding a document whose key already holds the same ``doc_id`` completely does nothing. A key holding another
  ``doc_id`` is *replaced*: the new rows are written first, the old ones deleted after, so a crash in between
  leaves the old version searchable (and the next run finishes the job), never an empty key.
* Row keys are deterministic (``schema.primary_key``) and written with upsert, so redoing a document that a crash
  cut off overwrites its partial rows instead of duplicating them.
* Every document is written into one collection (``collection=``, default ``shared``; ``knowledge/access.py``):
  keys, replacement and removal are per collection, so the same file in two users' private collections is two
  documents.

Embedding runs in groups (one embedder call per ~256 chunks) on a helper thread, one group ahead of the thread
that chunks documents and writes rows, so ``add_documents`` costs little beyond the embedding itself.
"""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from researchcrew.blocking import BlockingPool
from researchcrew.contracts._base import Contract
from researchcrew.errors import KnowledgeBaseError
from researchcrew.knowledge import _schema as schema
from researchcrew.knowledge._analysis import ANALYZER_VERSION, default_analyzer
from researchcrew.knowledge._chunking import Chunker, indexed_text, keyword_texts
from researchcrew.knowledge._store import CollectionStore
from researchcrew.knowledge._tokens import TokenCounter, token_counter_for
from researchcrew.knowledge.access import check_collection
from researchcrew.knowledge.documents import Chunk, Document
from researchcrew.knowledge.filters import SearchFilters
from researchcrew.knowledge.search import Searcher, SearchHit

if TYPE_CHECKING:
    from pathlib import Path

    from researchcrew.embedding.embedder import Embedder, Vectors
    from researchcrew.settings import Settings

logger = logging.getLogger(__name__)

SearchMode = Literal["hybrid", "dense", "bm25"]

SEARCH_WORKERS = 4  # searches at once (each embeds the query and makes a few Milvus calls)
_EMBED_GROUP = 256  # chunks per embedder call; the embedder batches further inside
_UPSERT_ROWS = 512  # rows per upsert call
_KEYS_PER_LOOKUP = 2048  # source keys per state query (Milvus Lite scans the collection once per query)


class AddReport(Contract):
    """What ``add_documents`` did."""

    documents_added: int = Field(default=0, ge=0, description="New documents (or ones an earlier crash cut off).")
    documents_replaced: int = Field(default=0, ge=0, description="Keys whose content changed; old chunks removed.")
    documents_skipped: int = Field(default=0, ge=0, description="Unchanged documents, already complete.")
    documents_empty: int = Field(default=0, ge=0, description="Documents with no text to index.")
    chunks_added: int = Field(default=0, ge=0, description="Chunks written.")
    seconds: float = Field(default=0.0, ge=0, description="Wall time.")


class ReindexReport(Contract):
    """What ``reindex_keywords`` did."""

    analyzer_before: str = Field(description="The analyzer the collection's BM25 text came from.")
    analyzer_after: str = Field(default=ANALYZER_VERSION, description="The analyzer it comes from now.")
    documents: int = Field(default=0, ge=0, description="Documents whose chunks were rewritten.")
    chunks: int = Field(default=0, ge=0, description="Chunks rewritten (0 when the collection was already current).")
    seconds: float = Field(default=0.0, ge=0, description="Wall time.")


class KnowledgeBaseStats(Contract):
    """What the knowledge base holds."""

    documents: int = Field(description="Complete documents.")
    chunks: int = Field(description="Chunks (rows) in the collection.")
    incomplete_documents: int = Field(default=0, description="Documents an interrupted ingest left unfinished.")
    collection: str = Field(description="Milvus collection name.")
    uri: str = Field(description="Milvus URI (a Lite file path or a server URL).")
    embedding_model: str = Field(description="The embedding model the collection was built with.")
    dimension: int | None = Field(default=None, description="Embedding dimension.")
    sources: dict[str, int] = Field(default_factory=dict, description="Complete documents per source.")


class KnowledgeBase:
    """The knowledge base over one Milvus collection. Cheap to construct: Milvus is reached on first use."""

    def __init__(self, settings: Settings, *, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self._embedder = embedder
        model_name = getattr(embedder, "model_name", None) or settings.embedding.model
        self.model_name = str(model_name)
        self.store = CollectionStore(settings, dimension=lambda: self.embedder.dimension, model_name=self.model_name)
        self._chunker: Chunker | None = None
        self._searcher: Searcher | None = None
        # Searches run here, not on the loop's shared default executor: a caller whose time is up stops waiting,
        # and searches still running past it cannot starve other blocking work (see researchcrew.blocking).
        self.search_pool = BlockingPool("kb-search", max_workers=SEARCH_WORKERS)

    # Lazily built parts ----------------------------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from researchcrew.embedding.embedder import get_embedder

            self._embedder = get_embedder(self.settings)
        return self._embedder

    @property
    def chunker(self) -> Chunker:
        if self._chunker is None:
            self._chunker = Chunker(self._token_counter(), max_tokens=self.settings.embedding.max_seq_length)
        return self._chunker

    def _token_counter(self) -> TokenCounter:
        path = getattr(self._embedder, "tokenizer_path", None)
        if path is not None:
            return TokenCounter(path)
        from researchcrew.embedding.embedder import resolve_model_path

        return token_counter_for(resolve_model_path(self.settings.embedding.model))

    @property
    def searcher(self) -> Searcher:
        if self._searcher is None:
            self._searcher = Searcher(self.store, lambda: self.embedder, self.settings.retrieval)
        return self._searcher

    # Writing ---------------------------------------------------------------------------------------------------
    def add_documents(
        self,
        documents: Sequence[Document],
        *,
        progress: Callable[[int, int], None] | None = None,
        collection: str = schema.SHARED,
        chunked: Callable[[Document, list[Chunk]], None] | None = None,
    ) -> AddReport:
        """Add, skip or replace documents by source key within ``collection`` (see the module docstring).
        ``progress(done, total)``; ``chunked(document, chunks)`` for each document about to be written, as soon as
        it is chunked (what ingest derives from the same chunks: annotations)."""
        scope = self.collection_clause(collection, writing=True)
        started = time.perf_counter()
        report = AddReport()
        latest: dict[str, Document] = {}
        for document in documents:  # the same key twice in one call: the later one is the current content
            latest[document.source_key] = document
        pending = list(latest.values())
        total, done = len(documents), len(documents) - len(pending)
        group: list[_Pending] = []
        group_chunks = 0
        # One group is embedded on a helper thread while this thread chunks the next documents and stores the
        # group before: ONNX Runtime and torch release the GIL while they compute, so the CPU work around the
        # embedder overlaps with it instead of leaving cores idle between groups. Groups are stored in order, one
        # at a time, so a failure (raised here) leaves the groups before it complete and the rest untouched.
        with ThreadPoolExecutor(1, thread_name_prefix="embed-ahead") as ahead:
            queue: deque[tuple[list[_Pending], Future[Vectors], int]] = deque()

            def store_oldest() -> None:
                stored, vectors, done_then = queue.popleft()
                self._store(stored, vectors.result(), report, collection, scope)
                if progress:
                    progress(done_then, total)

            def embed_ahead(next_group: list[_Pending], done_now: int) -> None:
                queue.append((next_group, ahead.submit(self._embed, next_group), done_now))
                if len(queue) > 1:
                    store_oldest()

            for start in range(0, len(pending), _KEYS_PER_LOOKUP):
                batch = pending[start : start + _KEYS_PER_LOOKUP]
                state = self._state([document.source_key for document in batch], scope)
                for document in batch:
                    held = state.get(document.source_key, {})
                    done += 1
                    if held.get(document.doc_id) == "complete" and len(held) == 1:
                        report.documents_skipped += 1
                        continue
                    chunks = self.chunker.chunk(document)
                    if not chunks:
                        logger.warning("%s has no text to index; skipped", document.source_key)
                        report.documents_empty += 1
                        continue
                    if chunked is not None:
                        chunked(document, chunks)
                    group.append(_Pending(document, chunks, held))
                    group_chunks += len(chunks)
                    if group_chunks >= _EMBED_GROUP:
                        embed_ahead(group, done)
                        group, group_chunks = [], 0
            if group:
                embed_ahead(group, done)
            while queue:
                store_oldest()
        if progress:
            progress(total, total)
        report.seconds = time.perf_counter() - started
        return report

    def collection_clause(self, collection: str, *, writing: bool = False) -> str:
        """The filter clause that scopes rows to ``collection`` ("" on a schema-1 knowledge base, where every row
        is in ``shared``). Raises for an invalid name, and for writing another collection into a schema-1 one."""
        check_collection(collection)
        if self.store.has_collections:
            return f"{schema.COLLECTION} == {schema.quote(collection)}"
        if collection != schema.SHARED and writing:
            raise KnowledgeBaseError(
                f"the knowledge base {self.store.collection!r} at {self.store.display_uri} was made before document "
                f"collections and holds only {schema.SHARED!r}; run `researchcrew kb reindex` once to upgrade it "
                f"(nothing is re-embedded), then store documents in {collection!r}"
            )
        return "" if collection == schema.SHARED else f'{schema.PK} == ""'  # matches no row

    def _state(self, source_keys: Sequence[str], scope: str = "") -> dict[str, dict[str, str]]:
        """source_key → {doc_id: "complete" | "partial"} for the keys given (within ``scope``, a collection)."""
        if not source_keys:
            return {}
        expression = f"{schema.SOURCE_KEY} in [{', '.join(schema.quote(key) for key in source_keys)}]"
        expression = f"({scope}) and {expression}" if scope else expression
        return {
            key: {doc_id: status for doc_id, (status, _) in held.items()}
            for key, held in _completeness(self.store.rows(expression, _STATE_FIELDS)).items()
        }

    def _embed(self, group: list[_Pending]) -> Vectors:
        texts = [indexed_text(chunk.title, chunk.heading, chunk.text) for item in group for chunk in item.chunks]
        vectors = self.embedder.embed_documents(texts)
        if len(vectors) != len(texts):
            raise ValueError(f"embedder returned {len(vectors)} vectors for {len(texts)} texts")
        return vectors

    def _store(self, group: list[_Pending], vectors: Vectors, report: AddReport, collection: str, scope: str) -> None:
        analyzer = default_analyzer()
        now = int(time.time())
        fresh: list[dict[str, Any]] = []  # keys that hold nothing yet: plain inserts
        rewrites: list[dict[str, Any]] = []  # keys with earlier rows: upserts overwrite partial rows in place
        index = 0
        for item in group:
            document, chunks = item.document, item.chunks
            rows = rewrites if item.held else fresh
            metadata = _json_safe({**document.metadata, "authors": list(document.authors)})
            source = document.metadata.get("source")
            source_name = source if isinstance(source, str) and source else document.source_key.split("#", 1)[0]
            keywords = keyword_texts([(chunk.title, chunk.heading, chunk.text) for chunk in chunks], analyzer.analyze)
            for chunk, keyword_text_of_chunk in zip(chunks, keywords, strict=True):
                row: dict[str, Any] = {schema.COLLECTION: collection} if scope else {}
                rows.append(
                    row
                    | {
                        schema.PK: schema.primary_key(document.source_key, chunk.chunk_id, collection),
                        schema.CHUNK_ID: chunk.chunk_id,
                        schema.DOC_ID: chunk.doc_id,
                        schema.SOURCE_KEY: schema.clip(schema.SOURCE_KEY, document.source_key),
                        schema.SOURCE: schema.clip(schema.SOURCE, source_name),
                        schema.TITLE: schema.clip(schema.TITLE, chunk.title),
                        schema.URL: schema.clip(schema.URL, chunk.url),
                        schema.HEADING: schema.clip(schema.HEADING, chunk.heading),
                        schema.TEXT: schema.clip(schema.TEXT, chunk.text),
                        schema.SEARCH_TEXT: schema.clip(schema.SEARCH_TEXT, keyword_text_of_chunk),
                        schema.DATE: schema.epoch(chunk.source_date),
                        schema.POSITION: chunk.position,
                        schema.CHUNK_COUNT: len(chunks),
                        schema.INGESTED_AT: now,
                        schema.METADATA: metadata,
                        schema.DENSE: vectors[index].tolist(),
                    }
                )
                index += 1
        for start in range(0, len(fresh), _UPSERT_ROWS):
            self.store.insert(fresh[start : start + _UPSERT_ROWS])
        for start in range(0, len(rewrites), _UPSERT_ROWS):
            self.store.upsert(rewrites[start : start + _UPSERT_ROWS])
        # Only now that every new row is in place: drop what the new versions supersede (keys that held rows).
        within = f"{scope} and " if scope else ""
        stale = [
            f"({within}{schema.SOURCE_KEY} == {schema.quote(item.document.source_key)} and "
            f"({schema.DOC_ID} != {schema.quote(item.document.doc_id)} or {schema.POSITION} >= {len(item.chunks)}))"
            for item in group
            if item.held
        ]
        for start in range(0, len(stale), 64):
            self.store.delete(" or ".join(stale[start : start + 64]))
        for item in group:
            report.chunks_added += len(item.chunks)
            if any(doc_id != item.document.doc_id for doc_id in item.held):
                report.documents_replaced += 1
            else:
                report.documents_added += 1

    def reindex_keywords(self, *, progress: Callable[[int, int], None] | None = None) -> ReindexReport:
        """Rewrite every chunk's BM25 text with this version's analysis (``keyword_text`` + ``analysis``).

        The upgrade path when the analyzer changed: chunk texts, vectors and metadata are kept as stored and only
        ``search_text`` is recomputed (Milvus re-derives the sparse BM25 vector on upsert), so nothing is
        re-embedded. The collection is labelled current only after the last row is written: an interrupted run
        leaves it refused as before, and running again redoes the work. ``progress(done, total)`` in documents.
        """
        started = time.perf_counter()
        self.store.accept_stale_analyzer = True  # for the whole run: a reconnect midway must not be refused
        try:
            self.store.open()
            report = ReindexReport(analyzer_before=str(self.store.recorded.get("analyzer")))
            if not self.store.analyzer_current:
                keys = sorted({row[schema.SOURCE_KEY] for row in self.store.rows("", [schema.SOURCE_KEY])})
                for start in range(0, len(keys), _KEYS_PER_LOOKUP):
                    batch = keys[start : start + _KEYS_PER_LOOKUP]
                    documents, chunks = self._rewrite_keywords(batch)
                    report.documents += documents
                    report.chunks += chunks
                    if progress:
                        progress(start + len(batch), len(keys))
                self.store.mark_analyzer_current()
        finally:
            self.store.accept_stale_analyzer = False
        report.seconds = time.perf_counter() - started
        if report.chunks:
            logger.info(
                "re-analysed %d chunks of %d documents for BM25 (%s -> %s)",
                report.chunks,
                report.documents,
                report.analyzer_before,
                report.analyzer_after,
            )
        return report

    def _rewrite_keywords(self, source_keys: Sequence[str]) -> tuple[int, int]:
        """Recompute ``search_text`` for every row of these keys; (documents, chunks) rewritten."""
        expression = f"{schema.SOURCE_KEY} in [{', '.join(schema.quote(key) for key in source_keys)}]"
        fields = _STORED_FIELDS if self.store.has_collections else _STORED_FIELDS[:-1]  # schema 1: no collection
        documents: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
        for row in self.store.rows(expression, fields):
            documents[(row.get(schema.COLLECTION, ""), row[schema.SOURCE_KEY], row[schema.DOC_ID])].append(row)
        analyzer = default_analyzer()
        rows: list[dict[str, Any]] = []
        for chunks in documents.values():
            chunks.sort(key=lambda row: int(row[schema.POSITION]))
            pieces = [(row[schema.TITLE] or None, row[schema.HEADING] or None, str(row[schema.TEXT])) for row in chunks]
            for row, keywords in zip(chunks, keyword_texts(pieces, analyzer.analyze), strict=True):
                rows.append({**row, schema.SEARCH_TEXT: schema.clip(schema.SEARCH_TEXT, keywords)})
        for start in range(0, len(rows), _UPSERT_ROWS):
            self.store.upsert(rows[start : start + _UPSERT_ROWS])
        return len(documents), len(rows)

    def remove(
        self,
        *,
        source_keys: Sequence[str] = (),
        doc_ids: Sequence[str] = (),
        collection: str | None = None,
        derived: bool = True,
    ) -> int:
        """Delete the chunks of these source keys and/or documents (only those in ``collection`` when it is given;
        from every collection when None), and with ``derived`` their annotations and summaries (ingest, which
        re-derives them in the same pass, says False); returns how many chunks were removed."""
        if not source_keys and not doc_ids:
            return 0
        scope = self.collection_clause(collection) if collection is not None else ""
        # A key and an id are alternatives: remove what matches either.
        clauses = [
            SearchFilters(source_keys=list(source_keys)).expression() if source_keys else "",
            SearchFilters(doc_ids=list(doc_ids)).expression() if doc_ids else "",
        ]
        expression = " or ".join(f"({clause})" for clause in clauses if clause)
        expression = f"({scope}) and ({expression})" if scope else expression
        count = self.store.count(expression)
        if count and not derived:
            self.store.delete(expression)
        elif count:
            # The documents' annotations and summaries go with their chunks, whichever door removed them (the CLI's
            # `kb remove` by document id left them behind): they are keyed by source key, so read the keys first.
            removed_keys = sorted(
                {str(row[schema.SOURCE_KEY]) for row in self.store.rows(expression, [schema.SOURCE_KEY])}
            )
            self.store.delete(expression)
            self._remove_derived(removed_keys, collection)
        logger.info("removed %d chunks (%d source keys, %d doc ids asked)", count, len(source_keys), len(doc_ids))
        return count

    def _remove_derived(self, source_keys: Sequence[str], collection: str | None) -> None:
        """Delete what ingest derived from these documents: annotations (issue 22) and long-text summaries."""
        from researchcrew.knowledge.annotations import index_for
        from researchcrew.knowledge.summaries import summaries_for

        annotations = index_for(self)
        if annotations is not None:
            annotations.remove(source_keys=source_keys, collection=collection)
        summaries = summaries_for(self)
        if summaries is not None:
            summaries.remove(source_keys=source_keys, collection=collection)

    def remove_collection(self, collection: str) -> int:
        """Delete every chunk of ``collection`` (when the collection itself is removed: a collection made again
        under the same name must not show its predecessor's documents to new readers); returns the count."""
        scope = self.collection_clause(collection)
        if not scope or collection == schema.SHARED:
            raise KnowledgeBaseError(f"the {schema.SHARED!r} collection cannot be removed")
        count = self.store.count(scope)
        if count:
            self.store.delete(scope)
        from researchcrew.knowledge.annotations import index_for  # the annotations live and go with their chunks

        annotations = index_for(self)
        if annotations is not None:
            annotations.remove_collection(collection)
        from researchcrew.knowledge.summaries import summaries_for  # so do the long documents' summaries

        summaries = summaries_for(self)
        if summaries is not None:
            summaries.remove_collection(collection)
        logger.info("removed %d chunks of collection %s", count, collection)
        return count

    def flush(self) -> None:
        """Persist buffered writes now (Milvus Lite also does this on ``close``)."""
        self.store.flush()

    # Reading ---------------------------------------------------------------------------------------------------
    def document_index(self, collection: str | None = None) -> dict[str, str]:
        """source_key → doc_id of every complete document (the newest when a crash left two), of ``collection``
        when it is given."""
        rows = self.store.rows(self.collection_clause(collection) if collection is not None else "", _STATE_FIELDS)
        index: dict[str, str] = {}
        for key, held in _completeness(rows).items():
            complete = [(ingested, doc_id) for doc_id, (status, ingested) in held.items() if status == "complete"]
            if complete:
                index[key] = max(complete)[1]
        return index

    def stats(self) -> KnowledgeBaseStats:
        rows = list(self.store.rows("", [*_STATE_FIELDS, schema.SOURCE]))
        state = _completeness(rows)
        source_of = {(row[schema.SOURCE_KEY], row[schema.DOC_ID]): row[schema.SOURCE] for row in rows}
        sources: dict[str, int] = defaultdict(int)
        complete = incomplete = 0
        for key, held in state.items():
            for doc_id, (status, _) in held.items():
                if status == "complete":
                    complete += 1
                    sources[source_of[(key, doc_id)]] += 1
                else:
                    incomplete += 1
        recorded = self.store.recorded
        return KnowledgeBaseStats(
            documents=complete,
            chunks=len(rows),
            incomplete_documents=incomplete,
            collection=self.store.collection,
            uri=self.store.display_uri,
            embedding_model=str(recorded.get("embedding_model", self.model_name)),
            dimension=recorded.get("dimension"),
            sources=dict(sorted(sources.items())),
        )

    def search(
        self,
        query: str,
        *,
        top_k: int = 5,
        min_relevance: float = 0.0,
        filters: SearchFilters | None = None,
        mode: SearchMode = "hybrid",
        rerank: bool | None = None,
    ) -> list[SearchHit]:
        """The best chunks for ``query`` (see ``researchcrew.knowledge.search`` for the pipeline)."""
        return self.searcher.search(
            query, top_k=top_k, min_relevance=min_relevance, filters=filters, mode=mode, rerank=rerank
        )

    async def asearch(
        self,
        query: str,
        *,
        top_k: int = 5,
        min_relevance: float = 0.0,
        filters: SearchFilters | None = None,
        mode: SearchMode = "hybrid",
        rerank: bool | None = None,
    ) -> list[SearchHit]:
        """``search`` on a thread of ``search_pool``: embedding and pymilvus calls block, the event loop must not,
        and a caller whose time is up does not wait for them. Raises ``BlockingBacklogError`` when the pool is full
        of searches still running past their callers' time."""
        return await self.search_pool.run(
            self.search, query, top_k=top_k, min_relevance=min_relevance, filters=filters, mode=mode, rerank=rerank
        )

    def ingest(self, paths: Iterable[str | Path], **options: Any) -> Any:
        """Load files, folders or globs and add them (see ``researchcrew.knowledge.ingest``)."""
        from researchcrew.knowledge.ingest import ingest_paths

        return ingest_paths(self, paths, **options)

    # Lifecycle -------------------------------------------------------------------------------------------------
    def close(self) -> None:
        self.search_pool.close()
        self.store.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KnowledgeBase(uri={self.store.display_uri!r}, collection={self.store.collection!r})"


@dataclass
class _Pending:
    """A document about to be written: its chunks and what its key held before (doc_id → status)."""

    document: Document
    chunks: list[Chunk]
    held: dict[str, str]


_STATE_FIELDS = [schema.SOURCE_KEY, schema.DOC_ID, schema.CHUNK_COUNT, schema.INGESTED_AT]
# Every field a row is written with (the sparse BM25 vector is Milvus' to compute): what a rewrite reads back.
_STORED_FIELDS = [
    schema.CHUNK_ID,
    schema.DOC_ID,
    schema.SOURCE_KEY,
    schema.SOURCE,
    schema.TITLE,
    schema.URL,
    schema.HEADING,
    schema.TEXT,
    schema.DATE,
    schema.POSITION,
    schema.CHUNK_COUNT,
    schema.INGESTED_AT,
    schema.METADATA,
    schema.DENSE,
    schema.COLLECTION,  # last: a schema-1 knowledge base has every field but this one
]


def _completeness(rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, tuple[str, int]]]:
    """source_key → {doc_id: ("complete" | "partial", when it was written)} from rows of ``_STATE_FIELDS``."""
    counts: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        entry = counts.setdefault((row[schema.SOURCE_KEY], row[schema.DOC_ID]), [0, int(row[schema.CHUNK_COUNT]), 0])
        entry[0] += 1
        entry[2] = max(entry[2], int(row[schema.INGESTED_AT]))
    state: dict[str, dict[str, tuple[str, int]]] = defaultdict(dict)
    for (key, doc_id), (present, expected, ingested) in counts.items():
        state[key][doc_id] = ("complete" if present >= expected else "partial", ingested)
    return state


def _json_safe(value: dict[str, Any]) -> dict[str, Any]:
    """Document metadata as plain JSON (dates and other objects become strings)."""
    parsed: dict[str, Any] = json.loads(json.dumps(value, default=str))
    return parsed
