"""Optional cross-encoder reranking of the fused candidates.

Off by default (``settings.retrieval.rerank.enabled``): no cross-encoder ships with the project, and this machine
cannot download one. When it is switched on and the model cannot be loaded (not installed, no network for a Hub
name, a broken path), reranking is skipped with ONE logged notice per model and process, and search goes on with
the fused ranking; it never fails a search.

A cross-encoder reads query and passage together and outputs a logit; ``sigmoid(logit)`` is its probability that
the passage answers the query. The reranked relevance is the mean of that probability and the hit's calibrated
fused relevance, so one model's quirks cannot swing the ``min_relevance`` cut on their own; hits are re-ordered
by that mean.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from researchcrew.errors import ModelUnavailableError

logger = logging.getLogger(__name__)


class PairScorer(Protocol):
    """What a cross-encoder offers: one logit per (query, passage) pair (sentence-transformers' ``CrossEncoder``)."""

    def predict(self, sentences: list[tuple[str, str]], **kwargs: Any) -> Any: ...


_notified: set[str] = set()
_notified_lock = threading.Lock()


class Reranker:
    """Loads the cross-encoder on first use; ``scores`` returns None when it is unavailable."""

    def __init__(self, model: str, *, scorer: PairScorer | None = None, batch_size: int = 32) -> None:
        self.model = model
        self._scorer = scorer
        self._batch_size = batch_size
        self._failed = False
        self._lock = threading.Lock()

    @property
    def available(self) -> bool:
        return self._load() is not None

    def _load(self) -> PairScorer | None:
        if self._scorer is not None or self._failed:
            return self._scorer
        with self._lock:
            if self._scorer is None and not self._failed:
                try:
                    self._scorer = _load_cross_encoder(self.model)
                except ModelUnavailableError as error:
                    self._failed = True
                    _notify_once(self.model, str(error))
        return self._scorer

    def scores(self, query: str, passages: Sequence[str]) -> list[float] | None:
        """Probability-like scores in [0, 1] for each passage, or None when no model is available."""
        scorer = self._load()
        if scorer is None or not passages:
            return None if scorer is None else []
        logits = scorer.predict([(query, passage) for passage in passages], batch_size=self._batch_size)
        return [_sigmoid(float(value)) for value in list(logits)]


def _load_cross_encoder(model: str) -> PairScorer:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the Hub at run time
    try:
        from sentence_transformers import CrossEncoder
    except ImportError as error:
        raise ModelUnavailableError(f"sentence-transformers is not installed: {error}") from error
    try:
        encoder: PairScorer = CrossEncoder(model, device="cpu")
    except (OSError, ValueError, RuntimeError) as error:
        raise ModelUnavailableError(f"cannot load cross-encoder {model!r}: {error}") from error
    return encoder


def _notify_once(model: str, reason: str) -> None:
    with _notified_lock:
        if model in _notified:
            return
        _notified.add(model)
    logger.warning("reranking is switched on but skipped: %s (searches use the fused ranking)", reason)


def _sigmoid(value: float) -> float:
    if value >= 0:
        return 1.0 / (1.0 + math.exp(-value))
    exp = math.exp(value)
    return exp / (1.0 + exp)
