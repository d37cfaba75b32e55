"""The ONNX Runtime embedder gives the vectors sentence-transformers on torch gives; set-up is cached and safe."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from researchcrew.data import demo_corpus_path
from researchcrew.embedding import embedder as embedding_module
from researchcrew.embedding._cpu import read_cpu_info
from researchcrew.embedding.embedder import Embedder, get_embedder, load_embedder
from researchcrew.errors import ModelUnavailableError
from researchcrew.settings import EmbeddingSettings, Settings

QUERIES = [
    "quantum error correction",
    "Does aspirin reduce the risk of heart attacks?",
    "software testing of deep learning systems",
    "x",
]


@pytest.fixture(scope="module")
def abstracts() -> list[str]:
    """60 real abstracts of very different lengths (padding and length-sorting are exercised)."""
    records = [json.loads(line) for line in demo_corpus_path().read_text().splitlines()[:60]]
    return [f"{record['title']}\n{record['abstract']}" for record in records]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray((a * b).sum(axis=1))


def test_float_onnx_matches_torch(
    onnx_float_embedder: Embedder, torch_embedder: Embedder, abstracts: list[str]
) -> None:
    texts = abstracts + QUERIES
    onnx_vectors = onnx_float_embedder.embed_documents(texts)
    torch_vectors = torch_embedder.embed_documents(texts)
    assert onnx_vectors.shape == torch_vectors.shape == (len(texts), 384)
    assert onnx_vectors.dtype == np.float32
    assert _cosines(onnx_vectors, torch_vectors).min() > 0.9999
    np.testing.assert_allclose(np.linalg.norm(onnx_vectors, axis=1), 1.0, atol=1e-5)


# How close int8 vectors come to torch's. Where int8 products are summed in 32 bits (VNNI, AMX, non-x86) the
# per-channel recipe keeps every vector within 0.99. AVX2 alone sums pairs in 16 bits and saturates
# (researchcrew.embedding._cpu): these 60 abstracts measured min 0.988, mean 0.993 on an AMD EPYC Zen 3. A broken
# recipe is far below either bound (per-tensor weight scales: ~0.93 mean).
INT8_MIN_COSINE = 0.985 if read_cpu_info().int8_sums_saturate else 0.99


def test_int8_onnx_stays_close_to_torch(
    onnx_embedder: Embedder, torch_embedder: Embedder, abstracts: list[str]
) -> None:
    documents = _cosines(onnx_embedder.embed_documents(abstracts), torch_embedder.embed_documents(abstracts))
    assert documents.min() >= INT8_MIN_COSINE, documents.min()
    assert documents.mean() >= 0.99, documents.mean()
    queries = [float(onnx_embedder.embed_query(q) @ torch_embedder.embed_query(q)) for q in QUERIES[:3]]
    assert min(queries) >= INT8_MIN_COSINE, queries


def test_int8_onnx_ranks_like_torch(onnx_embedder: Embedder, torch_embedder: Embedder, abstracts: list[str]) -> None:
    """What retrieval needs: for a query about one abstract, the same abstracts come out on top."""
    onnx_documents = onnx_embedder.embed_documents(abstracts)
    torch_documents = torch_embedder.embed_documents(abstracts)
    for target in (0, 7, 21, 42):
        query = abstracts[target].split("\n", 1)[0]  # the paper's title
        onnx_scores = onnx_documents @ onnx_embedder.embed_query(query)
        torch_scores = torch_documents @ torch_embedder.embed_query(query)
        assert int(np.argmax(onnx_scores)) == int(np.argmax(torch_scores)) == target
        assert len(set(np.argsort(-onnx_scores)[:5]) & set(np.argsort(-torch_scores)[:5])) >= 4


def test_batch_composition_does_not_change_vectors(onnx_embedder: Embedder, abstracts: list[str]) -> None:
    together = onnx_embedder.embed_documents(abstracts[:10])
    alone = np.stack([onnx_embedder.embed_query(text) for text in abstracts[:10]])
    assert _cosines(together, alone).min() > 0.9999
    assert onnx_embedder.embed_documents([]).shape == (0, 384)


def test_get_embedder_shares_one_instance_and_reuses_the_export(model_cache: Path, onnx_embedder: Embedder) -> None:
    assert get_embedder(EmbeddingSettings(cache_dir=model_cache)) is onnx_embedder
    exports = sorted(p.relative_to(model_cache).as_posix() for p in model_cache.rglob("model.onnx"))
    assert exports and all(name.startswith("onnx/") for name in exports)
    assert not [p for p in (model_cache / "onnx").iterdir() if p.name.startswith(".")]  # no half-written exports
    model_file = Path(getattr(onnx_embedder, "onnx_file"))  # noqa: B009
    written = model_file.stat().st_mtime_ns
    again = load_embedder(EmbeddingSettings(cache_dir=model_cache), cache_dir=model_cache)
    assert Path(getattr(again, "onnx_file")) == model_file  # noqa: B009
    assert model_file.stat().st_mtime_ns == written  # loaded from the cache, not exported again


def test_whole_settings_put_exports_in_the_configured_cache(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", embedding=EmbeddingSettings(cache_dir=tmp_path / "models"))
    shared = dict(embedding_module._cache)  # the session's embedders stay shared for the tests after this one
    try:
        embedder = get_embedder(settings)
        assert Path(getattr(embedder, "onnx_file")).is_relative_to(tmp_path / "models")  # noqa: B009
        assert get_embedder(settings) is embedder
        embedder.close()  # type: ignore[attr-defined]
    finally:
        embedding_module._cache.clear()
        embedding_module._cache.update(shared)


def test_auto_falls_back_to_torch_with_one_notice(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    not_a_directory = tmp_path / "cache-is-a-file"
    not_a_directory.write_text("the export cannot be written here")
    with caplog.at_level(logging.WARNING, logger="researchcrew.embedding.embedder"):
        embedder = load_embedder(EmbeddingSettings(), cache_dir=not_a_directory)
    assert getattr(embedder, "backend", None) == "torch"
    notices = [r for r in caplog.records if r.name == "researchcrew.embedding.embedder"]
    assert len(notices) == 1 and "embedding with torch instead" in notices[0].getMessage()
    assert embedder.embed_query("still works").shape == (384,)


def test_explicit_onnx_backend_fails_loudly(tmp_path: Path) -> None:
    not_a_directory = tmp_path / "cache-is-a-file"
    not_a_directory.write_text("x")
    with pytest.raises(ModelUnavailableError, match="cannot export"):
        load_embedder(EmbeddingSettings(backend="onnx"), cache_dir=not_a_directory)


def test_models_the_numpy_pooling_cannot_reproduce_are_refused(tmp_path: Path) -> None:
    from researchcrew.embedding._onnx import inspect_model
    from researchcrew.embedding.embedder import resolve_model_path

    source = Path(resolve_model_path("all-MiniLM-L6-v2"))
    layout = inspect_model(source)
    assert (layout.pooling, layout.dimension) == ("mean", 384)
    copy = tmp_path / "with-dense"
    copy.mkdir()
    (copy / "tokenizer.json").write_bytes((source / "tokenizer.json").read_bytes())
    modules = json.loads((source / "modules.json").read_text())
    modules.append({"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"})
    (copy / "modules.json").write_text(json.dumps(modules))
    (copy / "1_Pooling").mkdir()
    (copy / "1_Pooling" / "config.json").write_bytes((source / "1_Pooling" / "config.json").read_bytes())
    with pytest.raises(ModelUnavailableError, match="Dense"):
        inspect_model(copy)
    with pytest.raises(ModelUnavailableError, match="local model directory"):
        inspect_model(tmp_path / "no-such-model")
    (copy / "modules.json").write_text("{not json")
    with pytest.raises(ModelUnavailableError, match="cannot read the model configuration"):
        inspect_model(copy)


def test_token_vectors_match_across_backends(onnx_embedder: Embedder, torch_embedder: Embedder) -> None:
    """Late interaction (pipeline/_late.py) reads each word piece's vector in context: both backends give the same
    pieces, without [CLS]/[SEP], with unit vectors close to torch's, one per piece; the mean of a text's token
    vectors (with the two left out) still points where its sentence vector does."""
    from researchcrew.embedding.tokens import TokenEmbedder

    assert isinstance(onnx_embedder, TokenEmbedder) and isinstance(torch_embedder, TokenEmbedder)
    texts = ["Placental weight is associated with preeclampsia risk.", "x"]
    onnx_tokens = onnx_embedder.embed_tokens(texts)
    torch_tokens = torch_embedder.embed_tokens(texts)
    assert onnx_tokens[0].tokens == torch_tokens[0].tokens
    assert onnx_tokens[0].tokens[:3] == ["place", "##ntal", "weight"] and onnx_tokens[1].tokens == ["x"]
    for mine, reference in zip(onnx_tokens, torch_tokens, strict=True):
        assert mine.vectors.shape == reference.vectors.shape == (len(mine.tokens), 384)
        np.testing.assert_allclose(np.linalg.norm(mine.vectors, axis=1), 1.0, atol=1e-5)
        assert _cosines(mine.vectors, reference.vectors).min() >= 0.95
    mean = onnx_tokens[0].vectors.mean(axis=0)
    assert float(mean @ onnx_embedder.embed_query(texts[0])) / float(np.linalg.norm(mean)) > 0.8
    assert onnx_embedder.embed_tokens([]) == []
