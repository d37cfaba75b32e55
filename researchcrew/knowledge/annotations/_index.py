"""The annotations' Milvus collection, beside the chunks' (``<chunks collection>_annotations``, same Milvus).

One row per annotation: its document collection (the partition key, filtered exactly as chunk searches are:
``knowledge/access.py``), source key, document and chunk ids, kind, the normalised labels (an ARRAY the label
filter reads), the serialised ``label: value`` text, a vector, and the whole annotation with typed properties as
JSON, and the scalar fields the typed filters read in Milvus (``_filters``: normalised numbers with their dimension,
the day, the stemmed words; a collection made before them is upgraded on open, ``_upgrade``). Values are matched by
the typed filters, exactly; labels by their words or by meaning ("qty" finds "quantity": ``_search``, which embeds
the labels the documents' markers list, once per index, at question time). So a row's vector holds no embedding:
Milvus wants a vector field in every collection, and this one has a two-dimensional placeholder that nothing
searches (``PLACEHOLDER``). Each row carried the embedding of its labels before, which no query read, and writing
384 floats per row was most of what the annotations added to an ingest (``benchmarks/structured.py``); a collection
made then is upgraded on open like one without the filter fields.

One marker row per document (kind ``document``) records that its
annotations are current for its ``doc_id``, what the caps cut and a summary (labels, dimensions, subject words) that
the query side reads instead of every annotation, so an unchanged document is not extracted again and
a document indexed before annotations existed is annotated on its next ingest or reindex.

A document's rows are replaced as a whole when its content changes (or it is annotated again) and removed
with it. The same client as the chunks is used (Milvus Lite is one process per file).

What the route rules read for every question that is not conceptual — how many annotations a set of collections
holds, their labels and subject words — is kept per knowledge base (``_CoverageCache``, shared by every index over the
same store, so an ingest's index invalidates what the structured stage's reads): a question then makes no
annotation round trip, and a knowledge base without annotations is known to have none after one count. Every
write through an index clears it; against a Milvus server, which other processes may write to, an entry also
expires after ``COVERAGE_TTL_S``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import Field

from researchcrew.contracts._base import Contract
from researchcrew.knowledge import _schema as schema
from researchcrew.knowledge.annotations._extract import Annotation, Extraction, extract
from researchcrew.knowledge.annotations._filters import (
    DAY,
    LABEL_BYTES,
    LABELS,
    MAX_LABELS,
    MAX_TERMS,
    NUMBERS,
    TERM_BYTES,
    TERMS,
    document_day,
    document_summary,
    filter_fields,
)

if TYPE_CHECKING:
    from researchcrew.embedding.embedder import Embedder
    from researchcrew.knowledge._chunking import Chunker
    from researchcrew.knowledge._store import CollectionStore
    from researchcrew.knowledge.annotations._llm import LLMExtractor
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.knowledge.documents import Chunk, Document

logger = logging.getLogger(__name__)

SUFFIX = "_annotations"
KIND = "kind"
PROPERTIES = "properties"
DOCUMENT_MARKER = "document"
_WRITE_ROWS = 512
_KEYS_PER_QUERY = 1024
_FIELDS = [schema.PK, schema.COLLECTION, schema.SOURCE_KEY, schema.DOC_ID, schema.CHUNK_ID, KIND, PROPERTIES]
_SCHEMA_FIELDS = (NUMBERS, DAY, TERMS)  # a collection without them predates filters in Milvus: upgraded on open
UPGRADE_SUFFIX = "__filters"
PLACEHOLDER_DIMENSION = 2  # the vector field's: Milvus wants one in every collection; nothing searches it
PLACEHOLDER = [1.0, 0.0]  # every row's vector (a zero vector has no cosine)
COVERAGE_TTL_S = 30.0  # against a Milvus server (other processes write): how old a cached summary may be
_COVERAGE_SCOPES = 256  # collection sets whose summary is kept (each user reads shared + private + their teams)
_T = TypeVar("_T")


class AnnotationReport(Contract):
    """What one annotation pass did."""

    documents: int = Field(default=0, ge=0, description="Documents whose annotations were (re)derived.")
    annotations: int = Field(default=0, ge=0, description="Annotations written.")
    dropped: int = Field(default=0, ge=0, description="Values left out: not found verbatim in a passage.")
    notes: list[str] = Field(default_factory=list, description="What caps cut, per document.")
    seconds: float = Field(default=0.0, ge=0, description="Wall time.")


@dataclass
class StoredAnnotation:
    """An annotation read back, with the document collection it is in."""

    annotation: Annotation
    collection: str
    extra: dict[str, Any] = field(default_factory=dict)


class _CoverageCache:
    """Per knowledge base (store): what the route rules read of a set of collections, computed once per write
    (see the module docstring). Thread-safe; a value computed while a write happened is not kept."""

    def __init__(self, ttl_s: float | None) -> None:
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._generation = 0
        self._entries: OrderedDict[tuple[str, tuple[str, ...]], tuple[float, Any]] = OrderedDict()

    def get(self, kind: str, collections: Sequence[str], compute: Callable[[], _T]) -> _T:
        key = (kind, tuple(sorted(set(collections))))
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and (self.ttl_s is None or now - entry[0] < self.ttl_s):
                self._entries.move_to_end(key)
                return entry[1]  # type: ignore[no-any-return]
            generation = self._generation
        value = compute()
        with self._lock:
            if generation == self._generation:  # no write in between: the value is current
                self._entries[key] = (now, value)
                while len(self._entries) > _COVERAGE_SCOPES:
                    self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._generation += 1
            self._entries.clear()


_COVERAGE_CACHES: weakref.WeakKeyDictionary[CollectionStore, _CoverageCache] = weakref.WeakKeyDictionary()
_COVERAGE_CACHES_LOCK = threading.Lock()


def _coverage_cache_of(store: CollectionStore) -> _CoverageCache:
    with _COVERAGE_CACHES_LOCK:
        found = _COVERAGE_CACHES.get(store)
        if found is None:
            found = _COVERAGE_CACHES[store] = _CoverageCache(None if store.lite else COVERAGE_TTL_S)
        return found


def _document_scope(collection: str, source_key: str) -> str:
    return hashlib.sha256(f"{collection}\n{source_key}".encode()).hexdigest()[:16]


class AnnotationIndex:
    """Annotations of a knowledge base's documents, in a Milvus collection of their own (see the module docstring)."""

    def __init__(
        self,
        store: CollectionStore,
        embedder: Callable[[], Embedder],
        chunker: Callable[[], Chunker],
        *,
        extractor: LLMExtractor | None = None,
    ) -> None:
        self.store = store
        self.name = f"{store.collection}{SUFFIX}"
        self._embedder = embedder
        self._chunker = chunker
        self.extractor = extractor
        self._ready = False
        self._lock = store.companion_lock(self.name)  # shared by every index of this store: one loads at a time
        self._label_vectors: dict[str, Any] = {}
        self.rows_read = 0  # annotation rows queries returned (what a filter pushed into Milvus saves)
        self._coverage_cache = _coverage_cache_of(store)

    @classmethod
    def of(cls, kb: KnowledgeBase, *, extractor: LLMExtractor | None = None) -> AnnotationIndex:
        """The annotation index beside ``kb``'s chunks (shares its Milvus client, embedder and chunker)."""
        return cls(kb.store, lambda: kb.embedder, lambda: kb.chunker, extractor=extractor)

    @property
    def embedder(self) -> Embedder:
        return self._embedder()

    # Collection ------------------------------------------------------------------------------------------------
    def _ensure(self) -> None:
        if self._ready:
            return
        with self._lock:
            if self._ready or self.store.companion_ready(self.name):  # another index of this store opened it
                self._ready = True
                return
            lite = self.store.lite

            def exists(client: Any, *, timeout: float) -> tuple[bool, bool]:
                if not client.has_collection(self.name, timeout=timeout):
                    return False, False
                described = client.describe_collection(self.name, timeout=timeout)["fields"]
                fields = {field["name"]: field for field in described}
                return True, all(name in fields for name in _SCHEMA_FIELDS) and _placeholder_vectors(fields)

            def create(client: Any, *, timeout: float, name: str = self.name) -> None:
                from pymilvus import DataType, MilvusClient

                built = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
                built.add_field(schema.PK, DataType.VARCHAR, is_primary=True, max_length=256)
                built.add_field(schema.COLLECTION, DataType.VARCHAR, max_length=1024, is_partition_key=True)
                built.add_field(schema.SOURCE_KEY, DataType.VARCHAR, max_length=8192)
                built.add_field(schema.DOC_ID, DataType.VARCHAR, max_length=64)
                built.add_field(schema.CHUNK_ID, DataType.VARCHAR, max_length=128)
                built.add_field(KIND, DataType.VARCHAR, max_length=16)
                built.add_field(
                    LABELS,
                    DataType.ARRAY,
                    element_type=DataType.VARCHAR,
                    max_capacity=MAX_LABELS,
                    max_length=LABEL_BYTES,
                )
                built.add_field(schema.TEXT, DataType.VARCHAR, max_length=65535)
                built.add_field(PROPERTIES, DataType.JSON)
                built.add_field(NUMBERS, DataType.JSON)
                built.add_field(DAY, DataType.VARCHAR, max_length=10)
                built.add_field(
                    TERMS,
                    DataType.ARRAY,
                    element_type=DataType.VARCHAR,
                    max_capacity=MAX_TERMS,
                    max_length=TERM_BYTES,
                )
                built.add_field(schema.DENSE, DataType.FLOAT_VECTOR, dim=PLACEHOLDER_DIMENSION)
                params = schema.dense_index_params(
                    client, lite=lite, filtered=(schema.SOURCE_KEY, schema.DOC_ID, KIND, LABELS, DAY, TERMS)
                )
                client.create_collection(
                    name, schema=built, index_params=params, consistency_level="Strong", timeout=timeout
                )
                client.load_collection(name, timeout=timeout)

            found, current = self.store.call("open annotations", exists)
            if not found:
                self.store.call("create annotations", create)
            elif not current:
                self._upgrade(lambda client, timeout: create(client, timeout=timeout, name=self.name + UPGRADE_SUFFIX))
            else:
                self.store.call("load annotations", lambda c, **kw: c.load_collection(self.name, **kw))
            self._ready = True
            self.store.mark_companion_ready(self.name)

    def _upgrade(self, create: Callable[[Any, float], None]) -> None:
        """A collection made before the filter fields (``NUMBERS``, ``DAY``, ``TERMS``) or with embeddings in its
        vector field is copied into one of the current schema, the fields derived from each row's stored annotation
        and its document's facts (nothing is extracted again), then replaces it. Interrupted before the swap, the
        old collection is untouched and the next open copies again."""
        from researchcrew.knowledge.annotations._upgrade import copy_with_filters

        copy = self.name + UPGRADE_SUFFIX

        def fresh(client: Any, *, timeout: float) -> None:
            if client.has_collection(copy, timeout=timeout):
                client.drop_collection(copy, timeout=timeout)
            create(client, timeout)

        self.store.call("create the upgraded annotations", fresh)
        copied = copy_with_filters(self.store, self.name, copy)

        def swap(client: Any, *, timeout: float) -> None:
            client.release_collection(self.name, timeout=timeout)
            client.drop_collection(self.name, timeout=timeout)
            client.rename_collection(copy, self.name, timeout=timeout)
            client.load_collection(self.name, timeout=timeout)

        self.store.call("replace the annotations by their upgraded copy", swap)
        logger.info("annotations %s upgraded to filters in Milvus: %d rows copied", self.name, copied)

    def _query(self, expression: str, fields: Sequence[str], *, limit: int | None = None) -> list[dict[str, Any]]:
        self._ensure()
        base = expression or f'{schema.PK} != ""'
        extra: dict[str, Any] = {} if limit is None else {"limit": limit}
        rows = list(
            self.store.call(
                "query annotations",
                lambda c, **kw: c.query(self.name, filter=base, output_fields=list(fields), **extra, **kw),
            )
        )
        self.rows_read += len(rows)
        return rows

    def _delete(self, expression: str) -> None:
        self._ensure()
        try:
            self.store.call("delete annotations", lambda c, **kw: c.delete(self.name, filter=expression, **kw))
        finally:
            self._coverage_cache.clear()

    def _insert(self, rows: list[dict[str, Any]]) -> None:
        self._ensure()
        try:
            for start in range(0, len(rows), _WRITE_ROWS):
                batch = rows[start : start + _WRITE_ROWS]
                self.store.upsert_companion(self.name, batch, operation="write annotations")
        finally:
            self._coverage_cache.clear()

    # Writing ---------------------------------------------------------------------------------------------------
    def current(self, source_keys: Sequence[str], collection: str) -> dict[str, str]:
        """source key → the doc_id its annotations were derived from (documents with a marker row)."""
        found: dict[str, str] = {}
        for start in range(0, len(source_keys), _KEYS_PER_QUERY):
            keys = source_keys[start : start + _KEYS_PER_QUERY]
            expression = (
                f"{schema.COLLECTION} == {schema.quote(collection)} and {KIND} == {schema.quote(DOCUMENT_MARKER)} "
                f"and {schema.SOURCE_KEY} in [{', '.join(schema.quote(key) for key in keys)}]"
            )
            for row in self._query(expression, [schema.SOURCE_KEY, schema.DOC_ID]):
                found[row[schema.SOURCE_KEY]] = row[schema.DOC_ID]
        return found

    def annotate(
        self,
        documents: Sequence[Document],
        *,
        collection: str = schema.SHARED,
        only_missing: bool = False,
        chunks: Mapping[str, Sequence[Chunk]] | None = None,
    ) -> AnnotationReport:
        """Derive and store the annotations of ``documents`` in ``collection``, replacing what their keys held.
        ``only_missing``: skip documents whose annotations are current for their content already. ``chunks``:
        source key → the chunks ``add_documents`` has just made of that document (ingest passes them: chunking
        again is a tenth of the pass); a document without them, or whose chunks are of another version, is
        chunked here."""
        started = time.perf_counter()
        report = AnnotationReport()
        if not documents:
            return report
        latest = {document.source_key: document for document in documents}
        if only_missing:
            held = self.current(list(latest), collection)
            latest = {key: doc for key, doc in latest.items() if held.get(key) != doc.doc_id}
        rows: list[dict[str, Any]] = []
        markers: list[dict[str, Any]] = []
        known = chunks or {}
        for document in latest.values():
            passages = known.get(document.source_key)
            if not passages or any(chunk.doc_id != document.doc_id for chunk in passages):
                passages = self._chunker().chunk(document)
            extraction = self._extract(document, passages)
            report.documents += 1
            report.dropped += extraction.dropped
            notes = [*_loader_notes(document), *extraction.notes]
            report.notes.extend(f"{document.title or document.source_key}: {note}" for note in notes)
            scope = _document_scope(collection, document.source_key)
            day = document_day(extraction.annotations)
            for number, annotation in enumerate(extraction.annotations):
                rows.append(
                    {
                        schema.PK: f"{scope}:{annotation.chunk_id}:{number}",
                        schema.COLLECTION: collection,
                        schema.SOURCE_KEY: document.source_key,
                        schema.DOC_ID: document.doc_id,
                        schema.CHUNK_ID: annotation.chunk_id,
                        KIND: annotation.kind,
                        schema.TEXT: schema.clip(schema.TEXT, annotation.serialised()),
                        PROPERTIES: annotation.model_dump_json(),
                        **_serialised_numbers(filter_fields(annotation, day)),
                        schema.DENSE: PLACEHOLDER,
                    }
                )
            report.annotations += len(extraction.annotations)
            summary = document_summary(extraction.annotations)
            markers.append(self._marker(document, collection, scope, notes, len(extraction.annotations), summary))
        # What the keys held goes first; the markers come last, so a pass cut off part-way leaves documents without
        # a marker, which the next ingest annotates again (``only_missing``).
        self.remove(source_keys=list(latest), collection=collection)
        self._insert(rows + markers)
        report.seconds = time.perf_counter() - started
        return report

    def _extract(self, document: Document, chunks: Sequence[Chunk]) -> Extraction:
        extraction = extract(document, chunks)
        if self.extractor is not None:
            extraction = self.extractor.add_to(extraction, document, chunks)
        return extraction

    def _marker(
        self, document: Document, collection: str, scope: str, notes: list[str], count: int, summary: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            schema.PK: f"{scope}:{document.doc_id}:document",
            schema.COLLECTION: collection,
            schema.SOURCE_KEY: document.source_key,
            schema.DOC_ID: document.doc_id,
            schema.CHUNK_ID: "",
            KIND: DOCUMENT_MARKER,
            schema.TEXT: schema.clip(schema.TEXT, document.title or ""),
            PROPERTIES: json.dumps(
                {"notes": notes[:50], "annotations": count, "title": document.title, **summary}, ensure_ascii=False
            ),
            LABELS: [],
            NUMBERS: "{}",
            DAY: "",
            TERMS: [],
            schema.DENSE: PLACEHOLDER,
        }

    def remove(self, *, source_keys: Sequence[str] = (), collection: str | None = None) -> int:
        """Delete the annotations (and markers) of these source keys; returns how many rows went."""
        removed = 0
        for start in range(0, len(source_keys), _KEYS_PER_QUERY):
            keys = source_keys[start : start + _KEYS_PER_QUERY]
            expression = f"{schema.SOURCE_KEY} in [{', '.join(schema.quote(key) for key in keys)}]"
            if collection is not None:
                expression = f"{schema.COLLECTION} == {schema.quote(collection)} and {expression}"
            found = len(self._query(expression, [schema.PK]))
            if found:  # new documents hold nothing: no delete (a write, and a scan on Milvus Lite)
                self._delete(expression)
            removed += found
        return removed

    def remove_collection(self, collection: str) -> int:
        """Delete every annotation of ``collection`` (the collection itself is being removed)."""
        expression = f"{schema.COLLECTION} == {schema.quote(collection)}"
        removed = len(self._query(expression, [schema.PK]))
        if removed:
            self._delete(expression)
        return removed

    # Reading ---------------------------------------------------------------------------------------------------
    def read(
        self, collections: Sequence[str], *, labels: Sequence[str] | None = None, limit: int = 100_000
    ) -> list[StoredAnnotation]:
        """Annotations in ``collections`` (an empty list: none), those with one of ``labels`` when given."""
        if not collections:
            return []
        expression = self._scope(collections)
        if labels is not None:
            if not labels:
                return []
            expression += f" and array_contains_any({LABELS}, [{', '.join(schema.quote(k) for k in labels)}])"
        rows = self._query(expression, _FIELDS)[:limit]
        return [_stored(row) for row in rows]

    def where(
        self, collections: Sequence[str], clauses: Sequence[str], *, limit: int | None = None
    ) -> list[StoredAnnotation]:
        """Annotations in ``collections`` that pass every filter clause (``_filters``), read by Milvus."""
        if not collections:
            return []
        expression = " and ".join([self._scope(collections), *(f"({clause})" for clause in clauses)])
        return [_stored(row) for row in self._query(expression, _FIELDS, limit=limit)]

    def any_where(self, collections: Sequence[str], clauses: Sequence[str]) -> bool:
        """Whether any annotation in ``collections`` passes every clause (one row read at most)."""
        if not collections:
            return False
        expression = " and ".join([self._scope(collections), *(f"({clause})" for clause in clauses)])
        return bool(self._query(expression, [schema.PK], limit=1))

    def summaries(self, collections: Sequence[str]) -> list[dict[str, Any]]:
        """The marker rows' summaries of the documents in ``collections`` (``_filters.document_summary``)."""
        if not collections:
            return []
        expression = (
            f"{schema.COLLECTION} in [{', '.join(schema.quote(c) for c in sorted(set(collections)))}] and "
            f"{KIND} == {schema.quote(DOCUMENT_MARKER)}"
        )
        return [dict(row[PROPERTIES]) for row in self._query(expression, [PROPERTIES])]

    def labels(self, collections: Sequence[str]) -> dict[str, int]:
        """Every normalised label in ``collections`` and how many annotations carry it (from the documents'
        markers: one row read per document; cached until a write)."""
        if not collections:
            return {}
        return dict(self._coverage_cache.get("labels", collections, lambda: self._labels(collections)))

    def _labels(self, collections: Sequence[str]) -> dict[str, int]:
        if not self.count(collections):
            return {}  # known from the count: no query
        counts: dict[str, int] = {}
        for summary in self.summaries(collections):
            for label, count in (summary.get("labels") or {}).items():
                counts[label] = counts.get(label, 0) + int(count)
        return counts

    def dimensions(self, collections: Sequence[str]) -> dict[str, set[str]]:
        """label → the dimensions its numbers are in, over ``collections`` (from the markers; cached until a
        write — a copy, the cached sets stay as read)."""
        cached = self._coverage_cache.get("dimensions", collections, lambda: self._dimensions(collections))
        return {label: set(dimensions) for label, dimensions in cached.items()}

    def _dimensions(self, collections: Sequence[str]) -> dict[str, frozenset[str]]:
        if not self.count(collections):
            return {}
        found: dict[str, set[str]] = {}
        for summary in self.summaries(collections):
            for label, dimensions in (summary.get("dimensions") or {}).items():
                found.setdefault(label, set()).update(dimensions)
        return {label: frozenset(dimensions) for label, dimensions in found.items()}

    def notes(self, collections: Sequence[str]) -> list[str]:
        """What caps cut in the documents of ``collections`` (from their marker rows)."""
        if not collections:
            return []
        expression = (
            f"{schema.COLLECTION} in [{', '.join(schema.quote(c) for c in sorted(set(collections)))}] and "
            f"{KIND} == {schema.quote(DOCUMENT_MARKER)}"
        )
        notes: list[str] = []
        for row in self._query(expression, [PROPERTIES]):
            title = row[PROPERTIES].get("title") or "a document"
            notes.extend(f"{title}: {note}" for note in row[PROPERTIES].get("notes") or [])
        return notes

    def subject_words(self, collections: Sequence[str]) -> set[str]:
        """Stemmed words of the titles, sections and tables of the annotations in ``collections`` (what a question
        may name to narrow them: "solar panels", "receipts"), from the documents' markers; cached until a write."""
        return set(self._coverage_cache.get("subjects", collections, lambda: self._subject_words(collections)))

    def _subject_words(self, collections: Sequence[str]) -> frozenset[str]:
        if not self.count(collections):
            return frozenset()
        words: set[str] = set()
        for summary in self.summaries(collections):
            words.update(summary.get("subject") or [])
        return frozenset(words)

    def label_vectors(self, texts: Sequence[str]) -> Any:
        """Embeddings of labels and question phrases, one row each (cached: a knowledge base's labels are few and
        asked about often; the missing ones are embedded in one call)."""
        missing = [text for text in dict.fromkeys(texts) if text not in self._label_vectors]
        if missing:
            if len(self._label_vectors) > 50_000:
                self._label_vectors.clear()
            for text, vector in zip(missing, self.embedder.embed_documents(missing), strict=True):
                self._label_vectors[text] = vector
        import numpy as np

        return np.stack([self._label_vectors[text] for text in texts])

    def passages(self, chunk_ids: Sequence[str], collections: Sequence[str]) -> dict[tuple[str, str], dict[str, Any]]:
        """(collection, chunk id) → the chunk's row, for chunks that still exist in ``collections``: an annotation
        whose passage is gone (its document was removed) is never shown."""
        found: dict[tuple[str, str], dict[str, Any]] = {}
        ids = sorted(set(chunk_ids))
        if not ids or not collections:
            return found
        fields = [schema.CHUNK_ID, schema.TITLE, schema.TEXT, schema.SOURCE_KEY, schema.DOC_ID, schema.URL]
        fields += [schema.HEADING, schema.DATE, schema.METADATA]
        has_collections = self.store.has_collections
        if has_collections:
            fields.append(schema.COLLECTION)
        for start in range(0, len(ids), _KEYS_PER_QUERY):
            batch = ids[start : start + _KEYS_PER_QUERY]
            expression = f"{schema.CHUNK_ID} in [{', '.join(schema.quote(i) for i in batch)}]"
            if has_collections:
                scope = ", ".join(schema.quote(c) for c in sorted(set(collections)))
                expression = f"{schema.COLLECTION} in [{scope}] and {expression}"
            elif schema.SHARED not in collections:
                continue
            for row in self.store.rows(expression, fields):
                found[(str(row.get(schema.COLLECTION, schema.SHARED)), str(row[schema.CHUNK_ID]))] = row
        return found

    def _scope(self, collections: Sequence[str]) -> str:
        return (
            f"{schema.COLLECTION} in [{', '.join(schema.quote(c) for c in sorted(set(collections)))}] and "
            f"{KIND} != {schema.quote(DOCUMENT_MARKER)}"
        )

    def count(self, collections: Sequence[str]) -> int:
        """How many annotations ``collections`` hold (the coverage the route rules weigh); cached until a write."""
        if not collections:
            return 0
        return self._coverage_cache.get("count", collections, lambda: self._count(collections))

    def _count(self, collections: Sequence[str]) -> int:
        self._ensure()
        rows = self.store.call(
            "count annotations",
            lambda c, **kw: c.query(self.name, filter=self._scope(collections), output_fields=["count(*)"], **kw),
        )
        return int(rows[0]["count(*)"]) if rows else 0


def _placeholder_vectors(fields: Mapping[str, Any]) -> bool:
    """Whether the described vector field is the placeholder (a collection made before holds label embeddings)."""
    dense = fields.get(schema.DENSE) or {}
    return int((dense.get("params") or {}).get("dim", 0)) == PLACEHOLDER_DIMENSION


def _serialised_numbers(fields: dict[str, Any]) -> dict[str, Any]:
    """The filter fields with ``numbers`` as JSON text. pymilvus takes a JSON field's value as text as it is (it
    only checks that it parses) and walks a dict in Python first, value by value: for the two JSON fields of every
    annotation row that walk was a sixth of writing the rows. Milvus stores the same object either way."""
    return {**fields, NUMBERS: json.dumps(fields[NUMBERS], ensure_ascii=False)}


def _stored(row: dict[str, Any]) -> StoredAnnotation:
    return StoredAnnotation(
        annotation=Annotation.model_validate(row[PROPERTIES]), collection=str(row.get(schema.COLLECTION, ""))
    )


def _loader_notes(document: Document) -> list[str]:
    notes = document.metadata.get("table_notes")
    return [str(note) for note in notes] if isinstance(notes, list) else []


def index_for(kb: object) -> AnnotationIndex | None:
    """The annotation index of a knowledge base, as its settings ask (``settings.structured``): None when
    annotations are switched off or ``kb`` is not a ``KnowledgeBase`` (a test double); with ``llm_extraction`` and a
    model configured, the model's facts are added to the rules'."""
    from researchcrew.knowledge.collection import KnowledgeBase

    if not isinstance(kb, KnowledgeBase) or not kb.settings.structured.annotate:
        return None
    extractor = None
    if kb.settings.structured.llm_extraction:
        from researchcrew.knowledge.annotations._llm import LLMExtractor
        from researchcrew.llm import build_llm

        llm = build_llm(kb.settings.llm)
        extractor = LLMExtractor(llm) if llm is not None else None
    return AnnotationIndex.of(kb, extractor=extractor)
