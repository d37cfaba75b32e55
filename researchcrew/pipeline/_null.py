"""A knowledge base's *null*: how relevant its best passage looks to a question about nothing it holds — the mean
best dense cosine of ``OFF_TOPIC_PROBES`` (questions about nothing a research corpus holds). Support
(``pipeline/_support.py``) raises a knowledge base's semantic floor and full match by how far its null sits above
the demo corpus's (``REFERENCE_NULL_COSINE``), at most ``MAX_NULL_SHIFT`` (issue 20).

Cost, and who pays it (issue 20 item 7: a question must not get slower for it):

* the probes' vectors depend on the embedding model alone: embedded once per process and model
  (``probe_vectors``), whatever number of knowledge bases, stage sets (a deep run builds its own) or refreshes;
* the measurement is kept per knowledge base (per store, shared by every ``KnowledgeBaseNull`` over it) and written
  beside it (``<data dir>/knowledge-null.json``, keyed by Milvus URI, collection, model and probe set, with the
  number of chunks it was measured on), so a new process — a CLI command — starts from the last measurement instead
  of 32 embeddings and 32 searches, unless the knowledge base has grown or shrunk since (one count tells);
* only a knowledge base never measured is measured on a question's path (once). A measurement older than
  ``refresh_s`` is measured again on a background thread while questions go on with the value they have: none
  waits on a lock for it. A refresh that fails keeps the last value (and is tried again ``refresh_s`` later).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import statistics
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from researchcrew.knowledge.kept_values import KeptValues

if TYPE_CHECKING:
    from researchcrew.embedding.embedder import Embedder

logger = logging.getLogger(__name__)

# Questions about nothing a research corpus holds: how relevant a knowledge base's best passage looks to them is its
# null, the cosine at which a passage is "as relevant as any".
OFF_TOPIC_PROBES = (
    "What is the capital of Australia?",
    "How do I bake sourdough bread at home?",
    "Who won the 1998 football World Cup?",
    "When did the Roman Empire fall?",
    "How many moons does Jupiter have?",
    "Why is the sky blue?",
    "What is the best way to learn to play the guitar?",
    "How much does a new car cost in Germany?",
    "Who painted the Mona Lisa?",
    "What are the rules of chess castling?",
    "How do I file my taxes as a freelancer?",
    "Which hiking trails are in the Swiss Alps?",
    "What causes inflation in an economy?",
    "How tall is Mount Everest?",
    "Who wrote Pride and Prejudice?",
    "How do I train a puppy to sit?",
    "What is the plot of Hamlet?",
    "When was the printing press invented?",
    "How many calories are in an apple?",
    "Why do cats purr?",
    "What is the exchange rate of the yen?",
    "How do airplanes stay in the air?",
    "Which wine goes with fish?",
    "Who was the first person on the Moon?",
    "How do I repair a flat bicycle tyre?",
    "What languages are spoken in India?",
    "When is the best time to plant tomatoes?",
    "How does a mortgage work?",
    "What is the population of Brazil?",
    "Who composed the Four Seasons?",
    "How can I improve my sleep?",
    "What is the history of the Olympic Games?",
)
REFERENCE_NULL_COSINE = 0.17  # the demo corpus's null, where semantic_floor and semantic_full were set
MAX_NULL_SHIFT = 0.15
NULL_REFRESH_S = 600.0  # a knowledge base grows; its null is measured again at most this often
NULL_FILE = "knowledge-null.json"
_PROBES_DIGEST = hashlib.sha256("\n".join(OFF_TOPIC_PROBES).encode()).hexdigest()[:16]


class NullCosine(Protocol):
    """The knowledge base's null cosine (see the module docstring), or None when it is not known. Blocking; never
    raises."""

    def __call__(self) -> float | None: ...


class _DenseSearch(Protocol):
    def search_dense(self, vector: list[float], limit: int, expression: str) -> list[dict[str, Any]]: ...


_PROBE_VECTORS: weakref.WeakKeyDictionary[Any, list[list[float]]] = weakref.WeakKeyDictionary()
_PROBES_LOCK = threading.Lock()


def probe_vectors(embedder: Embedder) -> list[list[float]]:
    """The vectors of ``OFF_TOPIC_PROBES`` by ``embedder``: embedded once per process and embedder (the process's
    embedder is shared: ``embedding.get_embedder``)."""
    with _PROBES_LOCK:
        try:
            found = _PROBE_VECTORS.get(embedder)
        except TypeError:  # an embedder that cannot be weakly referenced: embedded each time
            found = None
        if found is None:
            vectors = np.asarray(embedder.embed_documents(list(OFF_TOPIC_PROBES)), dtype=float)
            found = [[float(x) for x in vector] for vector in vectors]
            with contextlib.suppress(TypeError):
                _PROBE_VECTORS[embedder] = found
        return found


@dataclass(frozen=True)
class _Measured:
    value: float | None
    at: float  # wall-clock seconds (compared across processes)


class _State:
    """What is known of one knowledge base's null, shared by every ``KnowledgeBaseNull`` over its store."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # guards the fields; never held while measuring
        self.measured: _Measured | None = None
        self.loaded = False  # the file beside the knowledge base was read
        self.refresh: threading.Thread | None = None


_STATES: weakref.WeakKeyDictionary[Any, _State] = weakref.WeakKeyDictionary()
_STATES_LOCK = threading.Lock()


def _state_of(store: object) -> _State:
    with _STATES_LOCK:
        try:
            state = _STATES.get(store)
            if state is None:
                state = _STATES[store] = _State()
        except TypeError:  # a store that cannot be weakly referenced: its own state
            state = _State()
        return state


class KnowledgeBaseNull:
    """A knowledge base's null cosine (see the module docstring). ``path``: the file the measurement is kept in
    across processes (None: this process only); ``key`` names the knowledge base in it."""

    def __init__(
        self,
        store: _DenseSearch,
        embedder: Embedder,
        *,
        refresh_s: float = NULL_REFRESH_S,
        path: Path | None = None,
        key: str = "",
        size: Callable[[], int] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.refresh_s = refresh_s
        self.path = path
        self.key = f"{key}|{getattr(embedder, 'model_name', type(embedder).__name__)}|{_PROBES_DIGEST}"
        self.size = size  # the knowledge base's number of chunks: a kept measurement of another size is not used
        self.clock = clock
        self._state = _state_of(store)

    def __call__(self) -> float | None:
        state = self._state
        with state.lock:
            if not state.loaded:
                state.loaded = True
                state.measured = state.measured or self._load()
            measured = state.measured
            if measured is not None:
                if self.clock() - measured.at >= self.refresh_s and state.refresh is None:
                    state.refresh = threading.Thread(target=self._refresh, name="kb-null-refresh", daemon=True)
                    state.refresh.start()
                return measured.value
        # Never measured: this question measures it (once per knowledge base; a question arriving meanwhile
        # measures too rather than wait).
        value, ok = self._measure()
        self._keep(_Measured(value, self.clock()), persist=ok)
        if not ok:
            logger.warning("measuring the knowledge base's null cosine failed; not calibrating")
        return value

    def settle(self, timeout_s: float | None = None) -> bool:
        """Wait for a refresh in flight (for tests and shutdown); True when none is running."""
        thread = self._state.refresh
        if thread is not None:
            thread.join(timeout_s)
            return not thread.is_alive()
        return True

    def _refresh(self) -> None:
        try:
            value, ok = self._measure()
            with self._state.lock:
                previous = self._state.measured
            if ok:
                self._keep(_Measured(value, self.clock()), persist=True)
            else:  # keep the last value; try again after refresh_s
                logger.info("refreshing the knowledge base's null cosine failed; keeping the last measurement")
                self._keep(_Measured(previous.value if previous else None, self.clock()), persist=False)
        finally:
            with self._state.lock:
                self._state.refresh = None

    def _measure(self) -> tuple[float | None, bool]:
        """(the null, whether it was measured): None for an empty knowledge base, or on failure."""
        try:
            best = [
                float(rows[0]["distance"])
                for rows in (self.store.search_dense(vector, 1, "") for vector in probe_vectors(self.embedder))
                if rows
            ]
        except Exception as error:  # a statistic for calibration: without it, no shift; never sinks an answer
            logger.info("measuring the knowledge base's null cosine failed: %s", error)
            return None, False
        return (statistics.fmean(best) if best else None), True  # an empty knowledge base has no null

    def _keep(self, measured: _Measured, *, persist: bool) -> None:
        with self._state.lock:
            self._state.measured = measured
        if persist and self.path is not None and measured.value is not None:
            self._save(measured)

    def _rows(self) -> int | None:
        if self.size is None:
            return None
        try:
            return int(self.size())
        except Exception as error:  # a count for a cache check: without it, the kept value is not trusted
            logger.info("counting the knowledge base for its null failed: %s", error)
            return -1

    def _load(self) -> _Measured | None:
        if self.path is None:
            return None
        entry = KeptValues(self.path).read(self.key)
        try:
            if entry is None or not isinstance(entry.get("value"), float):
                return None
            if entry.get("rows") != self._rows():
                return None  # measured on other content: measured again
            return _Measured(float(entry["value"]), float(entry["measured_at"]))
        except (ValueError, TypeError, KeyError):
            return None  # not an entry this version wrote: measured again

    def _save(self, measured: _Measured) -> None:
        """Write the measurement beside the knowledge base (atomically; other keys kept). Best effort."""
        assert self.path is not None  # noqa: S101 - checked by the caller
        KeptValues(self.path).write(
            self.key, {"value": measured.value, "measured_at": measured.at, "rows": self._rows()}
        )


def knowledge_base_null(tools: Sequence[object], embedder: Embedder) -> NullCosine | None:
    """The null of the knowledge base among ``tools`` (the tool with a ``knowledge_base``), if there is one; kept
    beside it in its settings' data directory."""
    for tool in tools:
        knowledge_base = getattr(tool, "knowledge_base", None)
        store = getattr(knowledge_base, "store", None)
        if store is not None and callable(getattr(store, "search_dense", None)):
            settings = getattr(knowledge_base, "settings", None)
            data_dir = getattr(settings, "data_dir", None)
            path = Path(data_dir) / NULL_FILE if isinstance(data_dir, str | Path) else None
            key = f"{getattr(store, 'display_uri', '')}#{getattr(store, 'collection', '')}"
            count = getattr(store, "count", None)
            size = count if callable(count) else None  # CollectionStore.count(): every chunk
            return KnowledgeBaseNull(store, embedder, path=path, key=key, size=size)
    return None


__all__ = [
    "MAX_NULL_SHIFT",
    "NULL_REFRESH_S",
    "OFF_TOPIC_PROBES",
    "REFERENCE_NULL_COSINE",
    "KnowledgeBaseNull",
    "NullCosine",
    "knowledge_base_null",
    "probe_vectors",
]
