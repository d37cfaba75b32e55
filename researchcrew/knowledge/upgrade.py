"""Upgrade a knowledge base made before document collections (schema 1) to schema 2, in place of the old one.

A schema-1 collection is read as it is (every chunk in ``shared``), so nothing needs this to keep answering; it is
needed before documents are stored into another collection, and ``researchcrew kb reindex`` runs it. Milvus cannot
add a partition-key field to an existing collection (and Milvus Lite implements no field addition at all), so the
rows are copied, vectors included (nothing is re-embedded), into a new collection ``<name>__schema2`` with every
chunk in ``shared``; only when the copy holds every row is the old collection dropped and the copy renamed.

Interrupted: before the drop, the old collection is untouched and the next run starts the copy again; between the
drop and the rename, opening the knowledge base finishes the rename (``store.CollectionStore``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import Field

from researchcrew.contracts._base import Contract
from researchcrew.errors import KnowledgeBaseError
from researchcrew.knowledge import _schema as schema

if TYPE_CHECKING:
    from researchcrew.knowledge.collection import KnowledgeBase, ReindexReport

logger = logging.getLogger(__name__)

_ROWS_PER_INSERT = 512
# Every field a schema-1 row holds and a copy must carry (the sparse BM25 vector is Milvus' to recompute).
_COPIED = [
    schema.PK,
    schema.CHUNK_ID,
    schema.DOC_ID,
    schema.SOURCE_KEY,
    schema.SOURCE,
    schema.TITLE,
    schema.URL,
    schema.HEADING,
    schema.TEXT,
    schema.SEARCH_TEXT,
    schema.DATE,
    schema.POSITION,
    schema.CHUNK_COUNT,
    schema.INGESTED_AT,
    schema.METADATA,
    schema.DENSE,
]


class UpgradeReport(Contract):
    """What ``upgrade_to_collections`` did."""

    upgraded: bool = Field(description="Whether the knowledge base was schema 1 and is schema 2 now.")
    chunks: int = Field(default=0, ge=0, description="Chunks copied (all into `shared`).")
    seconds: float = Field(default=0.0, ge=0, description="Wall time.")


def upgrade_and_reindex(kb: KnowledgeBase) -> tuple[UpgradeReport, ReindexReport]:
    """`researchcrew kb reindex`: the collections upgrade (when the knowledge base predates them), then the keyword
    text re-analysed. The copy keeps the old analyzer's text, so the stale-analyzer check waits for the reindex."""
    kb.store.accept_stale_analyzer = True
    try:
        upgrade = upgrade_to_collections(kb)
    finally:
        kb.store.accept_stale_analyzer = False
    return upgrade, kb.reindex_keywords()


def upgrade_to_collections(kb: KnowledgeBase, *, progress: Callable[[int, int], None] | None = None) -> UpgradeReport:
    """Copy a schema-1 knowledge base into a schema-2 collection of the same name (a no-op when it is one)."""
    started = time.perf_counter()
    store = kb.store
    if store.has_collections:
        return UpgradeReport(upgraded=False)
    name, copy = store.collection, store.collection + schema.UPGRADE_SUFFIX
    recorded = dict(store.recorded)
    dimension = int(recorded.get("dimension") or 0)
    if dimension < 1:
        raise KnowledgeBaseError(f"collection {name!r} records no embedding dimension; it cannot be upgraded")
    label = json.dumps({**recorded, "researchcrew_schema": schema.SCHEMA_VERSION}, sort_keys=True)
    total = store.count()

    def create(client: Any, **kw: Any) -> None:
        if client.has_collection(copy, **kw):  # a copy an interrupted run left: start it again
            client.drop_collection(copy, **kw)
        client.create_collection(
            copy,
            schema=schema.build_schema(dimension),
            index_params=schema.build_index_params(client, lite=store.lite),
            consistency_level="Strong",
            **kw,
        )
        client.alter_collection_properties(copy, properties={schema.PROPERTY: label}, **kw)

    store.call("create the upgraded collection", create)
    copied = 0
    batch: list[dict[str, Any]] = []
    for row in store.rows("", _COPIED[1:]):
        batch.append({field: row[field] for field in _COPIED} | {schema.COLLECTION: schema.SHARED})
        if len(batch) >= _ROWS_PER_INSERT:
            copied += _insert(kb, copy, batch)
            batch = []
            if progress:
                progress(copied, total)
    copied += _insert(kb, copy, batch)
    store.call("flush the upgraded collection", lambda c, **kw: c.flush(copy, **kw))
    held = store.call(
        "count the upgraded collection",
        lambda c, **kw: c.query(copy, filter="", output_fields=["count(*)"], **kw),
    )
    if not held or int(held[0]["count(*)"]) != total:
        raise KnowledgeBaseError(f"the upgraded copy of {name!r} is incomplete; run `researchcrew kb reindex` again")

    def swap(client: Any, **kw: Any) -> None:
        client.release_collection(name, **kw)
        client.drop_collection(name, **kw)
        client.rename_collection(copy, name, **kw)

    store.call("replace the collection by its upgraded copy", swap)
    store.close()  # the next call reconnects and reads the new schema
    store.open()
    if progress:
        progress(total, total)
    logger.info("upgraded %s to document collections: %d chunks copied into %r", name, copied, schema.SHARED)
    return UpgradeReport(upgraded=True, chunks=copied, seconds=time.perf_counter() - started)


def _insert(kb: KnowledgeBase, collection: str, rows: list[dict[str, Any]]) -> int:
    if rows:
        kb.store.call("copy rows", lambda c, **kw: c.insert(collection, rows, **kw))
    return len(rows)
