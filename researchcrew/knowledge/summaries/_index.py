"""The summaries' Milvus collection beside the chunks' (``<chunks collection>_summaries``, same Milvus client).

Only *long* documents are summarised: those of at least ``settings.structured.summary_min_chunks`` chunks (a PDF
counts as one document of all its pages). Below that a search's top passages already cover the document, so a
summary adds nothing a question could use; above it no single passage stands for the document, which is what the
long-text route's "which documents and sections are about this?" step needs.

One row per summary: the document collection (the partition key, filtered exactly as chunk searches are:
``knowledge/access.py``), the document's group key (a PDF's file key; else its source key), the source key and
heading of the section it summarises (the chunks' own values, so a chunk filter can name them), the kind
(``document`` or ``section``), the summary text, its vector, and JSON properties. The ``document`` row's ``doc_id``
is the version of the group it was made from (a hash of its documents' ids): a group whose version is current is not
summarised again. A group's rows are replaced as a whole, removed with any of its documents, and removed with the
collection.

The summary texts are extractive (``_extractive.py``) and chosen from the chunks' stored vectors. A summary's vector
is the unit mean of its chunks' vectors (no embedding at ingest; on ``benchmarks/long_text.py`` it finds the right
section as often as the embedded summary text, which cost ~1.4 s more per 37 summaries), or with
``summary_vectors="text"`` the embedded summary text, one batch per pass.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from researchcrew.contracts._base import Contract
from researchcrew.knowledge import _schema as schema
from researchcrew.knowledge._chunking import indexed_text
from researchcrew.knowledge.summaries._extractive import Passage, Summary, document_summaries

if TYPE_CHECKING:
    from researchcrew.embedding.embedder import Embedder
    from researchcrew.knowledge._store import CollectionStore
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.knowledge.documents import Document

logger = logging.getLogger(__name__)

SUFFIX = "_summaries"
GROUP = "group_key"
KIND = "kind"
PROPERTIES = "properties"
DEFAULT_MIN_CHUNKS = 8
_KEYS_PER_QUERY = 1024
_WRITE_ROWS = 256
_FIELDS = [schema.COLLECTION, GROUP, schema.SOURCE_KEY, schema.HEADING, KIND, schema.TEXT, PROPERTIES]
_PAGE_SUFFIX = "#page="


class SummaryReport(Contract):
    """What one summary pass did."""

    documents: int = Field(default=0, ge=0, description="Long documents (a PDF: all its pages) summarised.")
    summaries: int = Field(default=0, ge=0, description="Summaries written (whole documents and sections).")
    short: int = Field(default=0, ge=0, description="Documents below the size threshold (not summarised).")
    seconds: float = Field(default=0.0, ge=0, description="Wall time.")


@dataclass
class SummaryHit:
    """A summary found by a search: what it covers, where, and how near the question it is (cosine)."""

    collection: str
    group: str
    source_key: str
    heading: str
    kind: str
    text: str
    score: float
    title: str | None = None
    pages: list[int] = field(default_factory=list)


def group_of(source_key: str) -> str:
    """The document a source key belongs to for summaries: a PDF page's file (``file#page=N`` → ``file``)."""
    head, separator, number = source_key.rpartition(_PAGE_SUFFIX)
    return head if separator and head and number.isdigit() else source_key


def _scope(collection: str, group: str) -> str:
    return hashlib.sha256(f"{collection}\n{group}".encode()).hexdigest()[:16]


def _version(doc_ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(sorted(doc_ids)).encode()).hexdigest()[:32]


class SummaryIndex:
    """Summaries of a knowledge base's long documents, in a Milvus collection of their own (module docstring)."""

    def __init__(
        self,
        store: CollectionStore,
        embedder: Callable[[], Embedder],
        *,
        min_chunks: int = DEFAULT_MIN_CHUNKS,
        vectors: Literal["centroid", "text"] = "centroid",
    ) -> None:
        self.store = store
        self.vectors = vectors
        self.name = f"{store.collection}{SUFFIX}"
        self._embedder = embedder
        self.min_chunks = min_chunks
        self._ready = False
        self._lock = store.companion_lock(self.name)  # shared by every index of this store: one loads at a time

    @classmethod
    def of(cls, kb: KnowledgeBase) -> SummaryIndex:
        """The summary index beside ``kb``'s chunks (shares its Milvus client and embedder)."""
        structured = kb.settings.structured
        return cls(
            kb.store, lambda: kb.embedder, min_chunks=structured.summary_min_chunks, vectors=structured.summary_vectors
        )

    @property
    def embedder(self) -> Embedder:
        return self._embedder()

    # Collection ------------------------------------------------------------------------------------------------
    def _open(self, *, create: bool) -> bool:
        """Whether the collection is there (loaded); with ``create``, made when it is not. Reads and deletes never
        create it: a knowledge base without long documents has none, and a question costs one existence check."""
        if self._ready:
            return True
        with self._lock:
            if self._ready or self.store.companion_ready(self.name):  # another index of this store opened it
                self._ready = True
                return True
            exists = self.store.call(
                "open summaries", lambda c, *, timeout: bool(c.has_collection(self.name, timeout=timeout))
            )
            if not exists and not create:
                return False
            dimension = self.embedder.dimension
            lite = self.store.lite

            def make(client: Any, *, timeout: float) -> None:
                if client.has_collection(self.name, timeout=timeout):
                    client.load_collection(self.name, timeout=timeout)
                    return
                from pymilvus import DataType, MilvusClient

                built = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
                built.add_field(schema.PK, DataType.VARCHAR, is_primary=True, max_length=256)
                built.add_field(schema.COLLECTION, DataType.VARCHAR, max_length=1024, is_partition_key=True)
                built.add_field(GROUP, DataType.VARCHAR, max_length=8192)
                built.add_field(schema.SOURCE_KEY, DataType.VARCHAR, max_length=8192)
                built.add_field(schema.DOC_ID, DataType.VARCHAR, max_length=64)
                built.add_field(schema.HEADING, DataType.VARCHAR, max_length=2048)
                built.add_field(KIND, DataType.VARCHAR, max_length=16)
                built.add_field(schema.TEXT, DataType.VARCHAR, max_length=65535)
                built.add_field(PROPERTIES, DataType.JSON)
                built.add_field(schema.DENSE, DataType.FLOAT_VECTOR, dim=dimension)
                params = schema.dense_index_params(client, lite=lite, filtered=(GROUP, schema.SOURCE_KEY, KIND))
                client.create_collection(
                    self.name, schema=built, index_params=params, consistency_level="Strong", timeout=timeout
                )
                client.load_collection(self.name, timeout=timeout)

            self.store.call("open summaries", make)
            self._ready = True
            self.store.mark_companion_ready(self.name)
            return True

    def _query(self, expression: str, fields: Sequence[str]) -> list[dict[str, Any]]:
        if not self._open(create=False):
            return []
        return list(
            self.store.call(
                "query summaries",
                lambda c, **kw: c.query(self.name, filter=expression, output_fields=list(fields), **kw),
            )
        )

    def _delete(self, expression: str) -> None:
        if not self._open(create=False):
            return
        self.store.call("delete summaries", lambda c, **kw: c.delete(self.name, filter=expression, **kw))

    # Writing ---------------------------------------------------------------------------------------------------
    def current(self, groups: Sequence[str], collection: str) -> dict[str, str]:
        """group key → the version its summaries were made from."""
        found: dict[str, str] = {}
        for start in range(0, len(groups), _KEYS_PER_QUERY):
            keys = groups[start : start + _KEYS_PER_QUERY]
            expression = (
                f"{schema.COLLECTION} == {schema.quote(collection)} and {KIND} == 'document' and "
                f"{GROUP} in [{', '.join(schema.quote(key) for key in keys)}]"
            )
            for row in self._query(expression, [GROUP, schema.DOC_ID]):
                found[row[GROUP]] = row[schema.DOC_ID]
        return found

    def summarise(
        self,
        documents: Sequence[Document],
        *,
        collection: str = schema.SHARED,
        only_missing: bool = False,
        chunk_counts: Mapping[tuple[str, str], int] | None = None,
    ) -> SummaryReport:
        """Summarise the long ones of ``documents`` (already stored as chunks in ``collection``), replacing their
        groups' earlier summaries. ``only_missing``: skip groups whose summaries are current. ``chunk_counts``:
        (source key, doc_id) → chunks, for documents whose chunks the caller has just written (ingest knows them);
        the others' counts are read from the chunks, so a pass over short documents reads nothing."""
        started = time.perf_counter()
        report = SummaryReport()
        groups: dict[str, dict[str, Document]] = {}
        for document in documents:
            groups.setdefault(group_of(document.source_key), {})[document.source_key] = document
        if not groups:
            return report
        # Without the collection (no long document was ever stored) there is nothing to compare or remove: one
        # existence check for the pass, not one per query.
        present = self._open(create=False)
        versions = {group: _version([d.doc_id for d in members.values()]) for group, members in groups.items()}
        if only_missing and present:
            held = self.current(list(groups), collection)
            groups = {group: members for group, members in groups.items() if held.get(group) != versions[group]}
        known = chunk_counts or {}
        counts = {
            (key, doc.doc_id): known[(key, doc.doc_id)]
            for members in groups.values()
            for key, doc in members.items()
            if (key, doc.doc_id) in known
        }
        unknown = [key for members in groups.values() for key, doc in members.items() if (key, doc.doc_id) not in known]
        counts.update(self._chunk_counts(unknown, collection))
        long_groups = {
            group: members
            for group, members in groups.items()
            if sum(counts.get((key, doc.doc_id), 0) for key, doc in members.items()) >= self.min_chunks
        }
        report.short = len(groups) - len(long_groups)
        rows: list[dict[str, Any]] = []
        texts: list[str] = []
        centroids: list[list[float]] = []
        for group, members in long_groups.items():
            passages = self._passages(members, collection)
            title = next((doc.title for doc in members.values() if doc.title), None)
            summaries = document_summaries(passages)
            if not summaries:
                continue
            report.documents += 1
            scope = _scope(collection, group)
            for number, summary in enumerate(summaries):
                rows.append(self._row(summary, number, scope, group, collection, title, versions[group]))
                texts.append(_embedded_text(title, summary))
                if summary.centroid is not None:
                    centroids.append(summary.centroid.tolist())
        vectors = self._vectors(texts) if self.vectors == "text" or len(centroids) != len(rows) else centroids
        for row, vector in zip(rows, vectors, strict=True):
            row[schema.DENSE] = vector
        report.summaries = len(rows)
        # Summaries of groups that are no longer long (or empty now) go too: only what was written stays.
        if present:
            self._remove_groups(list(groups), collection)
        if rows:
            self._open(create=True)
        for start in range(0, len(rows), _WRITE_ROWS):
            batch = rows[start : start + _WRITE_ROWS]
            self.store.call("write summaries", lambda c, b=batch, **kw: c.upsert(self.name, b, **kw))
        report.seconds = time.perf_counter() - started
        return report

    def _row(
        self,
        summary: Summary,
        number: int,
        scope: str,
        group: str,
        collection: str,
        title: str | None,
        version: str,
    ) -> dict[str, Any]:
        section = hashlib.sha256(f"{summary.source_key}\n{summary.heading}".encode()).hexdigest()[:16]
        return {
            schema.PK: f"{scope}:{summary.kind}:{number}:{section}",
            schema.COLLECTION: collection,
            GROUP: group,
            schema.SOURCE_KEY: summary.source_key or group,
            schema.DOC_ID: version if summary.kind == "document" else "",
            schema.HEADING: summary.heading,
            KIND: summary.kind,
            schema.TEXT: schema.clip(schema.TEXT, summary.text),
            PROPERTIES: {
                "title": title,
                "chunks": summary.chunks,
                "pages": summary.pages,
                "centrality": round(summary.centrality, 4),
            },
        }

    def _chunk_counts(self, source_keys: Sequence[str], collection: str) -> dict[tuple[str, str], int]:
        """(source key, doc_id) → its chunk count, from each stored document's first chunk."""
        counts: dict[tuple[str, str], int] = {}
        for start in range(0, len(source_keys), _KEYS_PER_QUERY):
            keys = source_keys[start : start + _KEYS_PER_QUERY]
            expression = f"{schema.POSITION} == 0 and {self._keys_clause(keys, collection)}"
            for row in self.store.rows(expression, [schema.SOURCE_KEY, schema.DOC_ID, schema.CHUNK_COUNT]):
                counts[(row[schema.SOURCE_KEY], row[schema.DOC_ID])] = int(row[schema.CHUNK_COUNT])
        return counts

    def _keys_clause(self, keys: Sequence[str], collection: str) -> str:
        clause = f"{schema.SOURCE_KEY} in [{', '.join(schema.quote(key) for key in keys)}]"
        if self.store.has_collections:
            clause = f"{schema.COLLECTION} == {schema.quote(collection)} and {clause}"
        return clause

    def _passages(self, members: dict[str, Document], collection: str) -> list[Passage]:
        """The chunks of these documents (their current versions) with their stored vectors."""
        fields = [schema.CHUNK_ID, schema.SOURCE_KEY, schema.DOC_ID, schema.HEADING, schema.POSITION, schema.TEXT]
        rows = self.store.rows(self._keys_clause(list(members), collection), [*fields, schema.DENSE])
        wanted = {key: doc.doc_id for key, doc in members.items()}
        return [
            Passage(
                chunk_id=str(row[schema.CHUNK_ID]),
                source_key=str(row[schema.SOURCE_KEY]),
                doc_id=str(row[schema.DOC_ID]),
                heading=str(row[schema.HEADING] or ""),
                position=int(row[schema.POSITION]),
                text=str(row[schema.TEXT]),
                vector=np.asarray(row[schema.DENSE], dtype=np.float32),
            )
            for row in rows
            if wanted.get(row[schema.SOURCE_KEY]) == row[schema.DOC_ID]
        ]

    def _vectors(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return [vector.tolist() for vector in self.embedder.embed_documents(texts)]

    def remove(self, *, source_keys: Sequence[str] = (), collection: str | None = None) -> int:
        """Delete the summaries of the documents these source keys belong to (a PDF's whole file when one of its
        pages goes: the rest is summarised again when it is ingested); returns how many rows went."""
        groups = sorted({group_of(key) for key in source_keys})
        return self._remove_groups(groups, collection)

    def _remove_groups(self, groups: Sequence[str], collection: str | None) -> int:
        removed = 0
        for start in range(0, len(groups), _KEYS_PER_QUERY):
            keys = groups[start : start + _KEYS_PER_QUERY]
            expression = f"{GROUP} in [{', '.join(schema.quote(key) for key in keys)}]"
            if collection is not None:
                expression = f"{schema.COLLECTION} == {schema.quote(collection)} and {expression}"
            count = len(self._query(expression, [schema.PK]))
            if count:
                self._delete(expression)
            removed += count
        return removed

    def remove_collection(self, collection: str) -> int:
        """Delete every summary of ``collection`` (the collection itself is being removed)."""
        expression = f"{schema.COLLECTION} == {schema.quote(collection)}"
        removed = len(self._query(expression, [schema.PK]))
        if removed:
            self._delete(expression)
        return removed

    # Reading ---------------------------------------------------------------------------------------------------
    def read(self, collections: Sequence[str]) -> list[SummaryHit]:
        """Every summary in ``collections`` (an empty list: none), unscored."""
        if not collections:
            return []
        return [_hit(row, 0.0) for row in self._query(self._in(collections), _FIELDS)]

    def search(self, vector: Sequence[float], collections: Sequence[str], *, limit: int = 10) -> list[SummaryHit]:
        """Summaries nearest ``vector`` (cosine) in ``collections``, best first."""
        if not collections or not self._open(create=False):
            return []
        hits = self.store.search_companion(
            self.name,
            vector,
            limit=limit,
            expression=self._in(collections),
            fields=_FIELDS,
            operation="search summaries",
        )
        return [_hit(entity, score) for entity, score in hits]

    @staticmethod
    def _in(collections: Sequence[str]) -> str:
        return f"{schema.COLLECTION} in [{', '.join(schema.quote(c) for c in sorted(set(collections)))}]"


def _hit(row: dict[str, Any], score: float) -> SummaryHit:
    properties = row.get(PROPERTIES) or {}
    return SummaryHit(
        collection=str(row.get(schema.COLLECTION, "")),
        group=str(row[GROUP]),
        source_key=str(row[schema.SOURCE_KEY]),
        heading=str(row.get(schema.HEADING) or ""),
        kind=str(row[KIND]),
        text=str(row[schema.TEXT]),
        score=score,
        title=properties.get("title") if isinstance(properties, dict) else None,
        pages=[int(page) for page in properties.get("pages") or []] if isinstance(properties, dict) else [],
    )


def _embedded_text(title: str | None, summary: Summary) -> str:
    heading = summary.heading or (f"page {summary.pages[0]}" if summary.kind == "section" and summary.pages else None)
    return indexed_text(title, heading, summary.text)


def summaries_for(kb: object) -> SummaryIndex | None:
    """The summary index of a knowledge base, as its settings ask (``settings.structured.summaries``): None when
    summaries are switched off or ``kb`` is not a ``KnowledgeBase`` (a test double)."""
    from researchcrew.knowledge.collection import KnowledgeBase

    if not isinstance(kb, KnowledgeBase) or not kb.settings.structured.summaries:
        return None
    return SummaryIndex.of(kb)
