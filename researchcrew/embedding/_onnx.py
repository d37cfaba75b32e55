"""Sentence embeddings on ONNX Runtime: the same vectors as sentence-transformers on torch, several times faster on
CPU.

The model is converted once (``onnx_export``: traced, fused, int8 by default) and cached. Encoding tokenises with
the model's own ``tokenizer.json`` (``tokenizers``), runs the session, then mean pooling and L2 normalisation in
numpy — what the model's sentence-transformers modules (``1_Pooling``, ``2_Normalize``) do.

Throughput on a small CPU comes from parallel single-threaded runs (one session, one worker thread per core): many
small per-operator synchronisations of intra-op threads stall whenever a core is busy elsewhere. The int8 model runs
one text per call, because its activation scales are computed per call (in a batch, one text's vector would depend
on its neighbours and on padding); the float model runs length-sorted batches. Figures: benchmarks/README.md.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import numpy.typing as npt

from researchcrew.embedding._cpu import usable_cpus
from researchcrew.embedding._onnx_export import export_model
from researchcrew.embedding._onnx_layout import ModelLayout, inspect_model
from researchcrew.embedding._query_cache import QueryVectors
from researchcrew.embedding.tokens import TokenVectors, unit_rows
from researchcrew.errors import ModelUnavailableError

logger = logging.getLogger(__name__)

__all__ = ["ModelLayout", "OnnxEmbedder", "export_model", "inspect_model", "load_onnx_embedder"]


def _ort_errors() -> tuple[type[Exception], ...]:
    """ONNX Runtime's own exception classes (pybind types, not subclasses of RuntimeError)."""
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    names = ("Fail", "InvalidArgument", "InvalidGraph", "InvalidProtobuf", "NoSuchFile", "NotImplemented")
    return tuple(getattr(state, name) for name in names if isinstance(getattr(state, name, None), type))


class OnnxEmbedder:
    """Sentence embeddings with ONNX Runtime on CPU. Thread-safe; one instance per process is enough."""

    backend = "onnx"

    def __init__(
        self,
        layout: ModelLayout,
        onnx_file: Path,
        *,
        model_name: str,
        batch_size: int = 64,
        max_seq_length: int = 256,
        workers: int | None = None,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # parallelism comes from the worker threads (see the module docstring)
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        load_errors: tuple[type[BaseException], ...] = (*_ort_errors(), OSError, RuntimeError)
        try:
            self._session = ort.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
        except load_errors as error:
            raise ModelUnavailableError(f"ONNX Runtime cannot load {onnx_file}: {error}") from error
        self._inputs = [item.name for item in self._session.get_inputs()]
        tokenizer = Tokenizer.from_file(str(layout.tokenizer_path))
        tokenizer.no_padding()  # batches are padded here, per length-sorted group
        tokenizer.enable_truncation(max_length=max_seq_length)
        self._tokenizer = tokenizer
        self._tokenizer_lock = threading.Lock()
        self._pooling = layout.pooling
        self._dimension = layout.dimension
        self._batch_size = batch_size
        self._workers = max(1, workers or usable_cpus())
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        self.model_name = model_name
        self.tokenizer_path = layout.tokenizer_path
        self.onnx_file = onnx_file
        self.quantized = onnx_file.parent.name.endswith("-int8")
        self._queries = QueryVectors()

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed_documents(self, texts: list[str]) -> npt.NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        with self._tokenizer_lock:
            encodings = [encoding.ids for encoding in self._tokenizer.encode_batch_fast(texts)]  # ids only
        order = sorted(range(len(encodings)), key=lambda index: len(encodings[index]))
        step = 1 if self.quantized else self._batch_size
        groups = [order[start : start + step] for start in range(0, len(order), step)]
        out = np.empty((len(texts), self._dimension), dtype=np.float32)
        if len(groups) == 1 or self._workers == 1:
            results = [self._encode([encodings[index] for index in group]) for group in groups]
        else:
            results = list(self._pool().map(lambda group: self._encode([encodings[i] for i in group]), groups))
        for group, vectors in zip(groups, results, strict=True):
            out[group] = vectors
        return out

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """One text's vector; recent queries are remembered (``query_cache``): a question is embedded once."""
        return self._queries.get(text, lambda query: self.embed_documents([query])[0])

    def embed_tokens(self, texts: list[str]) -> list[TokenVectors]:
        """Each text's word pieces and their unit vectors (the model's last hidden states, before pooling; [CLS]
        and [SEP] left out), for late interaction (``pipeline/_late.py``). One session run per text, on the
        worker threads when there are several."""
        if not texts:
            return []
        with self._tokenizer_lock:
            encodings = self._tokenizer.encode_batch(texts)  # with the pieces' strings (the fast call has none)
            pieces = [(list(encoding.ids), list(encoding.tokens)) for encoding in encodings]

        def run(ids: list[int]) -> npt.NDArray[np.float32]:
            input_ids = np.asarray([ids], dtype=np.int64)
            feed = {"input_ids": input_ids, "attention_mask": np.ones_like(input_ids)}
            feed["token_type_ids"] = np.zeros_like(input_ids)
            (hidden,) = self._session.run(None, {name: feed[name] for name in self._inputs})
            return unit_rows(np.asarray(hidden, dtype=np.float32)[0, 1:-1])

        if len(pieces) == 1 or self._workers == 1:
            hidden = [run(ids) for ids, _ in pieces]
        else:
            hidden = list(self._pool().map(lambda item: run(item[0]), pieces))
        return [TokenVectors(tokens[1:-1], vectors) for (_, tokens), vectors in zip(pieces, hidden, strict=True)]

    def _pool(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self._workers, thread_name_prefix="onnx-embed")
            return self._executor

    def _encode(self, sequences: Sequence[list[int]]) -> npt.NDArray[np.float32]:
        """Vectors for token-id sequences (one session run, padded to the longest)."""
        width = max(len(ids) for ids in sequences)
        input_ids = np.zeros((len(sequences), width), dtype=np.int64)
        attention = np.zeros((len(sequences), width), dtype=np.int64)
        for row, ids in enumerate(sequences):
            input_ids[row, : len(ids)] = ids
            attention[row, : len(ids)] = 1
        feed = {"input_ids": input_ids, "attention_mask": attention, "token_type_ids": np.zeros_like(input_ids)}
        (hidden,) = self._session.run(None, {name: feed[name] for name in self._inputs})
        return self._pooled(np.asarray(hidden, dtype=np.float32), attention)

    def _pooled(self, hidden: npt.NDArray[np.float32], attention: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        if self._pooling == "cls":
            pooled = hidden[:, 0]
        elif self._pooling == "max":
            pooled = np.where(attention[..., None] > 0, hidden, -np.inf).max(axis=1)
        else:
            mask = attention[..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.clip(norms, 1e-12, None), dtype=np.float32)

    def close(self) -> None:
        """Stop the worker threads (they also stop at interpreter exit)."""
        with self._executor_lock:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None


def load_onnx_embedder(
    model_path: str, *, model_name: str, cache_dir: Path, quantize: bool, batch_size: int, max_seq_length: int
) -> OnnxEmbedder:
    """Inspect, export (once, cached) and load; every failure is a ``ModelUnavailableError`` naming the cause."""
    try:
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as error:
        raise ModelUnavailableError(f"the ONNX backend needs onnxruntime and tokenizers: {error}") from error
    layout = inspect_model(Path(model_path))
    onnx_file = export_model(layout, cache_dir, quantize=quantize)
    return OnnxEmbedder(layout, onnx_file, model_name=model_name, batch_size=batch_size, max_seq_length=max_seq_length)
