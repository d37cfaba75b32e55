"""Typed filters in the Milvus expression (issue 22): the same results as filtering every annotation in Python on
the benchmark's structured question set, only matching rows read from a collection of 10,000 annotations, and
collections made before the filter fields or with label embeddings in every row upgraded in place."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from benchmarks.structured import build_corpus, questions
from researchcrew.embedding.embedder import Embedder
from researchcrew.knowledge import _schema as schema
from researchcrew.knowledge.annotations import AnnotationIndex, annotations_search, index_for, parse_question
from researchcrew.knowledge.annotations._filters import DAY, NUMBERS, TERMS
from researchcrew.knowledge.annotations._index import PLACEHOLDER, PLACEHOLDER_DIMENSION, SUFFIX
from researchcrew.knowledge.annotations._search import SearchResult
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.knowledge.ingest import ingest_paths
from researchcrew.settings import Settings
from tests.structured.python_filters import search_in_python

EXTRA_QUESTIONS = [
    "receipts containing tires in 2024",
    "List every item with a price under $100",
    "Which solar panels have a width of at most 1.2 m?",
    "Which receipts from 2023 contain toner?",
]


def _identity(result: SearchResult) -> dict[str, Any]:
    return {
        "matches": [
            (m.collection, os.path.basename(m.annotation.source_key), m.annotation.chunk_id, m.annotation.row)
            for m in result.matches
        ],
        "labels": result.labels,
        "ambiguous": result.ambiguous,
        "notes": result.notes,
        "relaxed": result.relaxed,
    }


@pytest.fixture(scope="module")
def benchmark_index(module_kb: KnowledgeBase, tmp_path_factory: pytest.TempPathFactory) -> tuple[AnnotationIndex, Any]:
    folder = tmp_path_factory.mktemp("benchmark-corpus")
    corpus = build_corpus(folder)
    report = ingest_paths(module_kb, folder, progress=False)
    assert report.aborted is None and not report.errors
    index = index_for(module_kb)
    assert index is not None
    return index, corpus


def test_pushed_down_filters_give_what_python_filtering_gave(benchmark_index: tuple[AnnotationIndex, Any]) -> None:
    index, corpus = benchmark_index
    asked = [item["question"] for item in questions(corpus)] + EXTRA_QUESTIONS
    assert len(asked) >= 80
    compared = 0
    for text in asked:
        question = parse_question(text)
        expected = _identity(search_in_python(index, question, ["shared"]))
        assert _identity(annotations_search(index, question, ["shared"])) == expected, text
        compared += len(expected["matches"])
    assert compared > 500  # the set exercises the filters, it is not a set of empty answers


def test_filters_read_only_the_matching_rows(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from researchcrew.knowledge.loaders import load_file

    documents = []
    for part in range(2):  # two CSV files of 5,000 rows (the loader's cap per file)
        lines = ["Model,Width,Weight,Released"]
        lines += [f"P{part}-{i},{1000 + i} mm,{20 + i % 7} kg,2024-0{1 + i % 9}-1{i % 10}" for i in range(5000)]
        path = tmp_path / f"panels-{part}.csv"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        documents += load_file(path).documents
    with KnowledgeBase(Settings(data_dir=tmp_path / "data"), embedder=embedder) as kb:
        index = index_for(kb)
        assert index is not None
        # The annotations only (embedding a thousand chunks of these tables is not what this test measures); every
        # passage counts as present, so the rows the filters let through are the matches.
        assert index.annotate(documents).annotations == 10_000
        monkeypatch.setattr(index, "passages", lambda ids, collections: {("shared", i): {"text": ""} for i in ids})
        assert index.count(["shared"]) == 10_000
        index.rows_read = 0
        result = annotations_search(index, parse_question("Which panels have a width of at most 1.004 m?"), ["shared"])
        models = sorted(item.annotation.values[0].text for item in result.matches)
        assert models == [f"P{part}-{i}" for part in range(2) for i in range(5)]
        # besides the matches: the 2 documents' markers, read for the labels, the dimensions and the subject words
        assert index.rows_read <= len(result.matches) + 3 * 2, index.rows_read
        dated_question = parse_question("Which panels have a weight of at least 26 kg released in 2024-03?")
        index.rows_read = 0
        dated = annotations_search(index, dated_question, ["shared"])
        assert len(dated.matches) > 100 and all(
            item.annotation.values[3].text.startswith("2024-03") and item.annotation.values[2].number == 26
            for item in dated.matches
        )
        assert index.rows_read <= len(dated.matches) + 3 * 2, index.rows_read
        index.rows_read = 0
        assert _identity(search_in_python(index, dated_question, ["shared"])) == _identity(dated)
        assert index.rows_read >= 10_000  # what filtering in Python read


def _old_schema(client: Any, name: str, dimension: int) -> None:
    """The annotation collection as it was made before the filter fields (commit 99576c8)."""
    from pymilvus import DataType, MilvusClient

    built = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    built.add_field(schema.PK, DataType.VARCHAR, is_primary=True, max_length=256)
    built.add_field(schema.COLLECTION, DataType.VARCHAR, max_length=1024, is_partition_key=True)
    built.add_field(schema.SOURCE_KEY, DataType.VARCHAR, max_length=8192)
    built.add_field(schema.DOC_ID, DataType.VARCHAR, max_length=64)
    built.add_field(schema.CHUNK_ID, DataType.VARCHAR, max_length=128)
    built.add_field("kind", DataType.VARCHAR, max_length=16)
    built.add_field("labels", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=64, max_length=200)
    built.add_field(schema.TEXT, DataType.VARCHAR, max_length=65535)
    built.add_field("properties", DataType.JSON)
    built.add_field(schema.DENSE, DataType.FLOAT_VECTOR, dim=dimension)
    params = client.prepare_index_params()
    params.add_index(field_name=schema.DENSE, index_type="FLAT", metric_type="COSINE")
    client.create_collection(name, schema=built, index_params=params, consistency_level="Strong")


def test_a_collection_made_before_the_filter_fields_is_upgraded(
    tmp_path: Path, embedder: Embedder, corpus_dir: Path
) -> None:
    with KnowledgeBase(Settings(data_dir=tmp_path / "data"), embedder=embedder) as kb:
        ingest_paths(kb, corpus_dir, progress=False)
        index = index_for(kb)
        assert index is not None
        asked = ["receipts containing tires", "Which solar panels have a width ≤ 1.2 m?", "receipts from 2024"]
        asked += ["Which studies report a sample size above 1,000?"]
        before = [_identity(annotations_search(index, parse_question(q), ["shared"])) for q in asked]
        name = kb.store.collection + SUFFIX
        rows = kb.store.call("read", lambda c, **kw: c.query(name, filter='pk != ""', output_fields=["*"], **kw))
        old_rows = []
        for row in rows:
            old = {key: value for key, value in row.items() if key not in (NUMBERS, DAY, TERMS)}
            if old["kind"] == "document":  # markers had no summary then
                old["properties"] = {k: old["properties"][k] for k in ("notes", "annotations", "title")}
            old[schema.DENSE] = [1.0] + [0.0] * (embedder.dimension - 1)  # the vector field was the embedder's then
            old_rows.append(old)

        def replace(client: Any, **kw: Any) -> None:
            client.drop_collection(name, **kw)
            _old_schema(client, name, embedder.dimension)
            client.insert(name, old_rows, **kw)

        kb.store.call("make the old collection", replace)
        kb.store.close()  # as a new process would find it: a client opens (and upgrades) a companion collection once
        fresh = index_for(kb)
        assert fresh is not None
        after = [_identity(annotations_search(fresh, parse_question(q), ["shared"])) for q in asked]
        assert after == before and any(entry["matches"] for entry in after)
        fields = kb.store.call("describe", lambda c, **kw: c.describe_collection(name, **kw))["fields"]
        assert {NUMBERS, DAY, TERMS} <= {field["name"] for field in fields}
        assert fresh.count(["shared"]) == index.count(["shared"])


def test_a_collection_with_label_embeddings_is_upgraded_to_placeholder_vectors(
    tmp_path: Path, embedder: Embedder, corpus_dir: Path
) -> None:
    """Before, every row's vector embedded its labels (the embedder's dimension); nothing read them. A collection made
    then is copied into one with the placeholder vector on open: every read answers as before, and writes go on."""
    with KnowledgeBase(Settings(data_dir=tmp_path / "data"), embedder=embedder) as kb:
        ingest_paths(kb, corpus_dir, progress=False)
        index = index_for(kb)
        assert index is not None
        name = kb.store.collection + SUFFIX
        fields = kb.store.call("describe", lambda c, **kw: c.describe_collection(name, **kw))["fields"]
        dense = next(field for field in fields if field["name"] == schema.DENSE)
        assert int(dense["params"]["dim"]) == PLACEHOLDER_DIMENSION  # a new collection holds no embeddings
        asked = ["receipts containing tires", "Which solar panels have a width ≤ 1.2 m?", "receipts from 2024"]
        asked += ["Which studies report a sample size above 1,000?", "items with a quantity above 3"]
        before = [_identity(annotations_search(index, parse_question(q), ["shared"])) for q in asked]
        rows = kb.store.call("read", lambda c, **kw: c.query(name, filter='pk != ""', output_fields=["*"], **kw))
        assert rows and all(row[schema.DENSE] == PLACEHOLDER for row in rows)
        texts = [row[schema.TEXT] for row in rows]
        embedded = {text: vector.tolist() for text, vector in zip(texts, embedder.embed_documents(texts), strict=True)}
        old_rows = [{**row, schema.DENSE: embedded[row[schema.TEXT]]} for row in rows]

        def replace(client: Any, **kw: Any) -> None:
            built = client.describe_collection(name, **kw)
            client.drop_collection(name, **kw)
            _embedding_schema(client, name, built["fields"], embedder.dimension)
            client.insert(name, old_rows, **kw)

        kb.store.call("make the collection as it was", replace)
        kb.store.close()  # as a new process would find it
        fresh = index_for(kb)
        assert fresh is not None
        after = [_identity(annotations_search(fresh, parse_question(q), ["shared"])) for q in asked]
        assert after == before and any(entry["matches"] for entry in after)
        fields = kb.store.call("describe", lambda c, **kw: c.describe_collection(name, **kw))["fields"]
        dense = next(field for field in fields if field["name"] == schema.DENSE)
        assert int(dense["params"]["dim"]) == PLACEHOLDER_DIMENSION
        assert fresh.count(["shared"]) == index.count(["shared"])
        copied = kb.store.call("read", lambda c, **kw: c.query(name, filter='pk != ""', output_fields=["*"], **kw))
        assert sorted(row[schema.PK] for row in copied) == sorted(row[schema.PK] for row in rows)
        report = ingest_paths(kb, corpus_dir, progress=False)  # unchanged documents: their annotations are current
        assert report.annotations_added == 0 and not report.errors
        assert fresh.count(["shared"]) == index.count(["shared"])


def _embedding_schema(client: Any, name: str, fields: list[dict[str, Any]], dimension: int) -> None:
    """The annotation collection as made before placeholder vectors: the same fields, the vector the embedder's."""
    from pymilvus import DataType, MilvusClient

    built = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    for field in fields:
        params = dict(field.get("params") or {})
        options: dict[str, Any] = {key: int(params[key]) for key in ("max_length", "max_capacity") if key in params}
        if field["type"] == DataType.FLOAT_VECTOR:
            options["dim"] = dimension
        if field["type"] == DataType.ARRAY:
            options["element_type"] = field["element_type"]
        built.add_field(
            field["name"],
            field["type"],
            is_primary=field.get("is_primary", False),
            is_partition_key=field.get("is_partition_key", False),
            **options,
        )
    params = client.prepare_index_params()
    params.add_index(field_name=schema.DENSE, index_type="FLAT", metric_type="COSINE")
    client.create_collection(name, schema=built, index_params=params, consistency_level="Strong")
