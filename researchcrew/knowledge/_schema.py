"""The knowledge-base collection in Milvus: fields, indexes, and how a chunk becomes a row.

One row per chunk. Besides the chunk's own fields it carries its document's ``chunk_count``, so a document whose
insert was cut off (a crash between two batches) is recognisable as incomplete: fewer rows than ``chunk_count``.

BM25: ``search_text`` (the context header plus the chunk body between its neighbours' bodies, analysed
client-side — see ``chunking.keyword_text`` and ``analysis``) feeds a Milvus BM25 Function that fills the ``sparse``
field. Dense: ``dense`` holds the embedder's vector of the context-headed chunk alone, searched by cosine. Dates
are stored as epoch seconds so range filters are integer comparisons; an undated chunk holds ``NO_DATE``, which
every date filter excludes.

A collection property (``PROPERTY``) records the embedding model, its dimension and the analyzer version; opening a
collection built with different ones is refused with a hint rather than answered with nonsense.

Schema 2 adds ``collection``: the name of the document collection a chunk belongs to (``shared``, a user's private
``user:<id>``, or a named shared one; see ``knowledge/access.py``). It is the Milvus partition key, so a search
filtered by ``collection in [...]`` scans only the partitions those names hash to. A schema-1 knowledge base (made
before collections) has no such field; it is read as it is, every chunk in ``shared`` (``LEGACY_VERSIONS``), and
``researchcrew kb reindex`` upgrades it (``knowledge/upgrade.py``) before anything is stored in another collection.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from researchcrew.knowledge._analysis import ANALYZER_VERSION

SCHEMA_VERSION = 2
LEGACY_VERSIONS = frozenset({1})  # read as they are (every chunk in ``SHARED``); upgraded by ``kb reindex``
PROPERTY = "researchcrew"  # collection property holding ``description(...)``
UPGRADE_SUFFIX = "__schema2"  # the copy ``knowledge/upgrade.py`` fills before it takes the old collection's name

PK = "pk"
CHUNK_ID = "chunk_id"
DOC_ID = "doc_id"
SOURCE_KEY = "source_key"
SOURCE = "source"
TITLE = "title"
URL = "url"
HEADING = "heading"
TEXT = "text"
SEARCH_TEXT = "search_text"
DATE = "date"
POSITION = "position"
CHUNK_COUNT = "chunk_count"
INGESTED_AT = "ingested_at"
METADATA = "metadata"
DENSE = "dense"
SPARSE = "sparse"
COLLECTION = "collection"  # schema 2: the document collection the chunk belongs to (partition key)

SHARED = "shared"  # the collection every user may read; where chunks of schema-1 knowledge bases belong

NO_DATE = -(2**62)  # sentinel epoch for undated chunks; far below any real date

# Byte limits of the VARCHAR fields (Milvus counts UTF-8 bytes).
_LIMITS = {
    PK: 128,
    CHUNK_ID: 128,
    DOC_ID: 64,
    SOURCE_KEY: 8192,
    SOURCE: 8192,
    TITLE: 4096,
    URL: 4096,
    HEADING: 2048,
    TEXT: 65535,
    SEARCH_TEXT: 65535,
    COLLECTION: 1024,  # "user:" + a user id of up to 256 characters, in UTF-8 bytes
}

TEXT_LIMIT = _LIMITS[TEXT]  # bytes: a longer text in a result is not something Milvus can have stored

# Fields a search returns (never the vectors: they are large and nobody downstream needs them).
OUTPUT_FIELDS = [CHUNK_ID, DOC_ID, SOURCE_KEY, SOURCE, TITLE, URL, HEADING, TEXT, DATE, POSITION, CHUNK_COUNT, METADATA]

# BM25 parameters (index-time in Milvus). Lucene's/bm25s' defaults. Milvus Lite 3.2 does not read these from
# pymilvus 3's index request (it keeps its built-in 1.5 / 0.75), so other values would make Lite and a server rank
# differently; on SciFact's tuning half k1=1.2 was within 0.006 nDCG@10 of 1.5 for BM25 alone.
BM25_K1 = 1.5
BM25_B = 0.75


def is_lite(uri: str) -> bool:
    """Milvus Lite is a local ``.db`` file; anything else is a server."""
    return uri.endswith(".db")


def description(model: str, dimension: int, *, version: int = SCHEMA_VERSION) -> str:
    return json.dumps(
        {
            "researchcrew_schema": version,
            "embedding_model": model,
            "dimension": dimension,
            "analyzer": ANALYZER_VERSION,
        },
        sort_keys=True,
    )


def parse_description(text: str | None) -> dict[str, Any]:
    try:
        parsed = json.loads(text or "")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def build_schema(dimension: int) -> Any:
    """The collection schema (a ``pymilvus.CollectionSchema``)."""
    from pymilvus import DataType, Function, FunctionType, MilvusClient

    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field(PK, DataType.VARCHAR, is_primary=True, max_length=_LIMITS[PK])
    for name in (CHUNK_ID, DOC_ID, SOURCE_KEY, SOURCE, TITLE, URL, HEADING, TEXT):
        schema.add_field(name, DataType.VARCHAR, max_length=_LIMITS[name])
    schema.add_field(
        SEARCH_TEXT,
        DataType.VARCHAR,
        max_length=_LIMITS[SEARCH_TEXT],
        enable_analyzer=True,
        # The text arrives analysed (stemmed, stop words removed); this analyzer only splits it.
        analyzer_params={"tokenizer": "standard", "filter": ["lowercase"]},
    )
    # The partition key: a search filtered by collection scans only the partitions those names hash to.
    schema.add_field(COLLECTION, DataType.VARCHAR, max_length=_LIMITS[COLLECTION], is_partition_key=True)
    schema.add_field(DATE, DataType.INT64)
    schema.add_field(POSITION, DataType.INT64)
    schema.add_field(CHUNK_COUNT, DataType.INT64)
    schema.add_field(INGESTED_AT, DataType.INT64)
    schema.add_field(METADATA, DataType.JSON)
    schema.add_field(DENSE, DataType.FLOAT_VECTOR, dim=dimension)
    schema.add_field(SPARSE, DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(
        Function(
            name="search_text_bm25",
            function_type=FunctionType.BM25,
            input_field_names=[SEARCH_TEXT],
            output_field_names=[SPARSE],
        )
    )
    return schema


def dense_index_params(client: Any, *, lite: bool, filtered: Sequence[str]) -> Any:
    """Exact cosine search on Milvus Lite (brute force is fast at knowledge-base sizes), HNSW and inverted indexes on
    the ``filtered`` scalar fields on a server (Lite refuses scalar indexes on some types): for the chunks and their
    companion collections (annotations, summaries) alike."""
    params = client.prepare_index_params()
    if lite:
        params.add_index(field_name=DENSE, index_type="FLAT", metric_type="COSINE")
    else:
        params.add_index(
            field_name=DENSE, index_type="HNSW", metric_type="COSINE", params={"M": 16, "efConstruction": 200}
        )
        for name in filtered:
            params.add_index(field_name=name, index_type="INVERTED")
    return params


def build_index_params(client: Any, *, lite: bool) -> Any:
    """The chunks' indexes: ``dense_index_params`` plus BM25 over the analysed text."""
    params = dense_index_params(client, lite=lite, filtered=(DOC_ID, SOURCE_KEY, SOURCE, DATE))
    params.add_index(
        field_name=SPARSE,
        index_type="SPARSE_INVERTED_INDEX",
        metric_type="BM25",
        params={"bm25_k1": BM25_K1, "bm25_b": BM25_B},
    )
    return params


def dense_search_params(*, lite: bool, limit: int) -> dict[str, Any]:
    if lite:
        return {"metric_type": "COSINE"}
    return {"metric_type": "COSINE", "params": {"ef": max(64, limit)}}


def primary_key(source_key: str, chunk_id: str, collection: str = SHARED) -> str:
    """Row key: the chunk id, scoped by source key and collection (the same content under two keys, or the same key
    in two collections, is two sets of rows). Keys in ``shared`` are those of schema 1, unchanged."""
    scoped = source_key if collection == SHARED else f"{collection}\n{source_key}"
    scope = hashlib.sha256(scoped.encode()).hexdigest()[:16]
    return f"{scope}:{chunk_id}"


def epoch(value: datetime | None) -> int:
    if value is None:
        return NO_DATE
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp())


def from_epoch(value: int | None) -> datetime | None:
    if value is None or value == NO_DATE:
        return None
    return datetime.fromtimestamp(value, tz=UTC)


def clip(name: str, value: str | None) -> str:
    """A string cut to the field's byte limit (on a character boundary)."""
    text = value or ""
    limit = _LIMITS[name]
    encoded = text.encode()
    if len(encoded) <= limit:
        return text
    return encoded[:limit].decode(errors="ignore")


def quote(value: str) -> str:
    """A string literal for a Milvus filter expression (JSON escaping is what Milvus' parser accepts)."""
    return json.dumps(value, ensure_ascii=False)
