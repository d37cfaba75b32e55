"""Upgrade an annotation collection made before the current schema — before filters ran in Milvus, or when every row
carried the embedding of its labels — by copying its rows into one of the current schema.

The fields (``_filters``: ``numbers``, ``day``, ``terms``) and the markers' summaries are derived from what each row
already stores — its annotation as JSON — and from its document's other rows (the first date fact), so nothing is
extracted again; the old vectors are not read (each row gets the placeholder, ``_index.PLACEHOLDER``). Two passes over
the old collection: the documents' facts and summaries first, then the rows with their new fields.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from researchcrew.knowledge import _schema as schema
from researchcrew.knowledge.annotations._extract import Annotation
from researchcrew.knowledge.annotations._filters import (
    DAY,
    LABELS,
    NUMBERS,
    TERMS,
    document_day,
    document_summary,
    filter_fields,
)
from researchcrew.knowledge.annotations._index import PLACEHOLDER

if TYPE_CHECKING:
    from researchcrew.knowledge._store import CollectionStore

_PAGE = 1000
_KIND = "kind"
_PROPERTIES = "properties"
_MARKER = "document"
_COPIED = [schema.PK, schema.COLLECTION, schema.SOURCE_KEY, schema.DOC_ID, schema.CHUNK_ID, _KIND, schema.TEXT]
_COPIED += [_PROPERTIES, LABELS]


def _rows(store: CollectionStore, name: str, fields: Sequence[str]) -> Iterator[dict[str, Any]]:
    base = f'{schema.PK} != ""'
    if store.lite:  # Milvus Lite answers an unlimited query in one go (and implements no query iterator fully)
        yield from store.call(
            "read annotations", lambda c, **kw: c.query(name, filter=base, output_fields=list(fields), **kw)
        )
        return
    iterator = store.call(
        "read annotations",
        lambda c, **kw: c.query_iterator(name, batch_size=_PAGE, filter=base, output_fields=list(fields), **kw),
    )
    try:
        while page := store.call("read annotations", lambda _c, **_kw: iterator.next()):
            yield from page
    finally:
        iterator.close()


def copy_with_filters(store: CollectionStore, old: str, new: str) -> int:
    """Copy every row of ``old`` into ``new`` (the current schema); returns how many rows were copied."""
    documents: dict[tuple[str, str], list[Annotation]] = defaultdict(list)
    for row in _rows(store, old, [schema.COLLECTION, schema.SOURCE_KEY, _KIND, _PROPERTIES]):
        if row[_KIND] != _MARKER:
            documents[(row[schema.COLLECTION], row[schema.SOURCE_KEY])].append(
                Annotation.model_validate(row[_PROPERTIES])
            )
    days = {key: document_day(annotations) for key, annotations in documents.items()}
    copied = 0
    batch: list[dict[str, Any]] = []
    for row in _rows(store, old, _COPIED):
        key = (row[schema.COLLECTION], row[schema.SOURCE_KEY])
        copy = {field: row[field] for field in _COPIED}
        copy[schema.DENSE] = PLACEHOLDER
        if row[_KIND] == _MARKER:
            copy[_PROPERTIES] = {**row[_PROPERTIES], **document_summary(documents.get(key, []))}
            copy.update({LABELS: [], NUMBERS: {}, DAY: "", TERMS: []})
        else:
            copy.update(filter_fields(Annotation.model_validate(row[_PROPERTIES]), days.get(key, "")))
        batch.append(copy)
        if len(batch) >= _PAGE:
            copied += _write(store, new, batch)
            batch = []
    copied += _write(store, new, batch)
    return copied


def _write(store: CollectionStore, name: str, rows: list[dict[str, Any]]) -> int:
    if rows:
        store.call("copy annotations", lambda c, **kw: c.insert(name, rows, **kw))
    return len(rows)
