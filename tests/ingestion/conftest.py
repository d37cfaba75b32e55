"""Fixtures for the ingestion tests: the real embedders (loaded once per session), Milvus Lite in tmp_path."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from researchcrew.embedding.embedder import Embedder, SentenceTransformerEmbedder, get_embedder
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.settings import EmbeddingSettings, Settings
from tests.e2e.support import MODEL_CACHE_DIR, shared_embedder


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model cache of this session's own, holding a copy of the machine's int8 export (made once, in the cache
    the end-to-end tests share: ``MODEL_CACHE_DIR``) instead of exporting again (~20 s, much more under load).
    The export files themselves are what some tests check; the float export is made here when a test asks."""
    path = tmp_path_factory.mktemp("models")
    shared_embedder()  # exports into the shared cache if it is not there
    shutil.copytree(MODEL_CACHE_DIR / "onnx", path / "onnx", ignore=shutil.ignore_patterns(".*"))
    return path


@pytest.fixture(scope="session")
def onnx_embedder(model_cache: Path) -> Embedder:
    """The default embedder (ONNX Runtime, int8), as ``get_embedder`` gives it to the knowledge base."""
    embedder = get_embedder(EmbeddingSettings(cache_dir=model_cache))
    assert getattr(embedder, "backend", None) == "onnx", "the default backend should be ONNX here"
    return embedder


@pytest.fixture(scope="session")
def onnx_float_embedder(model_cache: Path) -> Embedder:
    return get_embedder(EmbeddingSettings(backend="onnx", onnx_quantize=False, cache_dir=model_cache))


@pytest.fixture(scope="session")
def torch_embedder() -> Embedder:
    """The reference: sentence-transformers on torch."""
    return SentenceTransformerEmbedder()


class CountingEmbedder:
    """The real embedder, counting what it is asked to embed (to prove that skipped work is not done)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.texts_embedded = 0
        self.calls = 0
        self.tokenizer_path = getattr(inner, "tokenizer_path", None)
        self.model_name = getattr(inner, "model_name", "all-MiniLM-L6-v2")
        self.fail_on_call: int | None = None

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed_documents(self, texts: list[str]) -> Any:
        self.calls += 1
        if self.fail_on_call is not None and self.calls >= self.fail_on_call:
            from researchcrew.errors import ModelUnavailableError

            raise ModelUnavailableError("embedding model crashed (simulated)")
        self.texts_embedded += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray[Any, Any]:
        return self.inner.embed_query(text)


@pytest.fixture
def settings(tmp_path: Path, model_cache: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", embedding={"cache_dir": model_cache})


@pytest.fixture
def counting(onnx_embedder: Embedder) -> CountingEmbedder:
    return CountingEmbedder(onnx_embedder)


@pytest.fixture
def kb(settings: Settings, counting: CountingEmbedder) -> Iterator[KnowledgeBase]:
    with KnowledgeBase(settings, embedder=counting) as knowledge_base:
        yield knowledge_base
