"""Companion rows are written as columns (``CollectionStore.upsert_companion``): what is stored is what the rows held,
field for field, as pymilvus' row upsert stores it (JSON given as text, arrays, the vector, the partition key). A
pymilvus without the gRPC handler the column path uses gets the rows as rows, and stores the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from researchcrew.embedding.embedder import Embedder
from researchcrew.knowledge import _schema as schema
from researchcrew.knowledge.annotations import index_for
from researchcrew.knowledge.annotations._index import SUFFIX
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.knowledge.ingest import ingest_paths
from researchcrew.settings import Settings


def _all(kb: KnowledgeBase, name: str) -> list[dict[str, Any]]:
    rows = kb.store.call("read", lambda c, **kw: c.query(name, filter='pk != ""', output_fields=["*"], **kw))
    return sorted((dict(row) for row in rows), key=lambda row: str(row[schema.PK]))


def _empty(kb: KnowledgeBase, name: str) -> None:
    kb.store.call("empty", lambda c, **kw: c.delete(name, filter='pk != ""', **kw))
    assert _all(kb, name) == []


class _WithoutColumnHandler:
    """A client as a pymilvus release without the private handler calls would be: everything else is the client's."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.upserts = 0

    def __getattr__(self, name: str) -> Any:
        if name in ("_get_connection", "_generate_call_context"):
            raise AttributeError(name)
        return getattr(self._client, name)

    def upsert(self, *args: Any, **kwargs: Any) -> Any:
        self.upserts += 1
        return self._client.upsert(*args, **kwargs)


def test_columns_store_what_rows_store(
    tmp_path: Path, embedder: Embedder, corpus_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with KnowledgeBase(Settings(data_dir=tmp_path / "data"), embedder=embedder) as kb:
        assert ingest_paths(kb, corpus_dir, progress=False).annotations_added > 0
        assert index_for(kb) is not None
        name = kb.store.collection + SUFFIX
        stored = _all(kb, name)
        kinds = {row["kind"] for row in stored}
        assert len(stored) > 10 and "document" in kinds and len(kinds) > 1
        written = [dict(row) for row in stored]
        for row in written:  # as the pass hands them over: the JSON field of numbers as text
            row["numbers"] = json.dumps(row["numbers"])

        _empty(kb, name)
        kb.store.call("rows", lambda c, **kw: c.upsert(name, written, **kw))
        as_rows = _all(kb, name)
        _empty(kb, name)
        kb.store.upsert_companion(name, written, operation="columns")
        as_columns = _all(kb, name)

        assert as_columns == as_rows == stored

        _empty(kb, name)
        without = _WithoutColumnHandler(kb.store.client)
        monkeypatch.setattr(type(kb.store), "client", property(lambda _store: without))
        kb.store.upsert_companion(name, written, operation="rows, no column handler")
        monkeypatch.undo()
        assert without.upserts == 1
        assert _all(kb, name) == stored
