"""The vectors of recent queries, so one question is embedded once.

A question is embedded by the knowledge-base search, by memory recall and by the support measure (pipeline/_support.py),
two of them at the same time on worker threads. ``QueryVectors`` keeps the last ``size`` query vectors by exact text;
a text another thread is embedding right now is waited for, not embedded twice. A model gives one text the same
vector every time (the int8 model runs one text per call), so a cached vector is the vector the model would give.
Callers get their own copy: no caller can change another's vector.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]

QUERY_VECTORS = 256  # recent queries kept; a vector of the default model is 1.5 KB


class QueryVectors:
    """A bounded, thread-safe cache of query vectors by exact text."""

    def __init__(self, size: int = QUERY_VECTORS) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        self._size = size
        self._done: OrderedDict[str, Vector] = OrderedDict()
        self._running: dict[str, Future[Vector]] = {}
        self._lock = threading.Lock()

    def get(self, text: str, embed: Callable[[str], Vector]) -> Vector:
        """The vector of ``text``: cached, or the one another thread is computing, or ``embed(text)``."""
        with self._lock:
            known = self._done.get(text)
            if known is not None:
                self._done.move_to_end(text)
                return known.copy()
            running = self._running.get(text)
            owner = running is None
            if running is None:
                running = self._running[text] = Future()
        if not owner:
            return running.result().copy()  # the owner's failure is raised here too
        try:
            vector = np.ascontiguousarray(embed(text), dtype=np.float32)
        except BaseException as error:
            with self._lock:
                del self._running[text]
            running.set_exception(error)
            raise
        with self._lock:
            del self._running[text]
            self._done[text] = vector
            while len(self._done) > self._size:
                self._done.popitem(last=False)
        running.set_result(vector)
        return vector.copy()

    def clear(self) -> None:
        with self._lock:
            self._done.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._done)


__all__ = ["QUERY_VECTORS", "QueryVectors"]
