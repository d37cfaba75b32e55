"""Recall of earlier exchanges: the ``MemoryRecall`` interface and the built-in store's in-memory vector index.

``MemoryRecall`` is what ``MemoryTool`` searches. Two implementations: ``MemoryStore`` (embeddings stored with each
exchange, searched locally with numpy) and Zep (memory/zep.py). Both are strictly scoped to one user (and one
session when asked) and raise ``MemoryStoreError`` when their backend cannot answer.

Recall is **hybrid**, as the knowledge base's is: dense (the cosine of the query and exchange embeddings) and
lexical (which of the query's words the exchange contains, weighted by how rare each word is among the user's
exchanges). Dense alone misses what a user said verbatim — "My project codename is BLUEFALCON-7731, ..." embeds as
a question about whatever followed, and "What is my project codename?" scored 0.05–0.12 against it. The hybrid
score of an exchange is ``lexical_weight × lexical + (1 − lexical_weight) × dense``, where

    lexical = Σ idf(t) over the query terms t the exchange contains / Σ idf(t) over all query terms

(terms: lower-cased words without stopwords, lightly stemmed, hyphenated tokens also whole; idf over the user's
exchanges, BM25's ``ln(1 + (N − df + 0.5) / (df + 0.5))``), i.e. the share of the query's information the exchange
holds. The lexical side only ever adds evidence: relevance = max(dense, hybrid), so an exchange the embedding
finds is never demoted for phrasing the question differently. A per-user inverted index (term → rows) makes the
lexical side cost only the rows that share a term.

Why a cache: recalling over 10,000 exchanges must take ~20 ms, and reading 10,000 embedding blobs from SQL per
query takes longer than that. So each user's embeddings are loaded once into a float32 matrix and kept. Before
each search one primary-key read of the user's version row (``memory_users``: a random epoch, replaced when the
user is forgotten, and a generation, bumped by every write) tells whether anything changed — O(1), whatever the
number of exchanges — and only new rows are read (ids only grow, and one user's writes commit in id order
because they first lock that row). That keeps the cache correct when other processes write to the same
database. Users are evicted least-recently-used beyond a total budget.
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from researchcrew.memory.records import RecalledExchange
from researchcrew.text.terms import QUERY_STOP_WORDS, stem

Vector = npt.NDArray[np.float32]
DEFAULT_CACHE_MAX_VECTORS = 200_000  # ≈ 300 MB at 384 dimensions
DEFAULT_LEXICAL_WEIGHT = 0.5  # MemorySettings.lexical_weight


@runtime_checkable
class MemoryRecall(Protocol):
    """Finds a user's earlier exchanges relevant to a query. Never returns another user's memory."""

    async def recall(
        self,
        *,
        user_id: str,
        query_text: str,
        session_id: str | None = None,
        limit: int = 3,
        min_relevance: float = 0.0,
    ) -> list[RecalledExchange]:
        """Up to ``limit`` exchanges of ``user_id`` (only of ``session_id`` when given), most relevant first,
        each with relevance ≥ ``min_relevance``. Raises ``MemoryStoreError`` when the backend cannot answer."""
        ...


def encode_vector(vector: npt.ArrayLike) -> bytes:
    """Little-endian float32 bytes, the storage format of an exchange's embedding."""
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def decode_vector(blob: bytes | None, dimension: int) -> Vector | None:
    """The stored vector, or None when missing or of another dimension (embedded with a different model)."""
    if blob is None or len(blob) != 4 * dimension:
        return None
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


def relevance(cosine: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Cosine similarity of unit vectors mapped to [0, 1]: negative similarity means unrelated, so it clips to 0."""
    return np.clip(cosine, 0.0, 1.0)


def _dot(matrix: Vector, query: Vector) -> Vector:
    """``matrix @ query`` on one thread. A matrix-vector product is memory-bound: BLAS's worker threads add nothing
    but a wait for each of them to be scheduled, which on a busy 2-core machine made a 10,000 × 384 product take
    ~20 ms at the median instead of ~0.6 ms (measured; see benchmarks/memory_recall.py). einsum without
    ``optimize`` runs numpy's own single-threaded SIMD loop and touches no global BLAS thread setting."""
    result: Vector = np.einsum("ij,j->i", matrix, np.asarray(query, dtype=np.float32))
    return result


_TOKEN = re.compile(r"[a-z0-9]+(?:[-_'.][a-z0-9]+)*")
Row = tuple[int, str, bytes | None] | tuple[int, str, bytes | None, str]  # id, session, embedding[, text]


def lexical_terms(text: str) -> list[str]:
    """The words recall matches on: lower-cased, stopwords out, lightly stemmed; a hyphenated or dotted token
    ("bluefalcon-7731", "v2.1") counts whole and by its parts, so either spelling finds it."""
    terms: list[str] = []
    for token in _TOKEN.findall(text.lower()):
        parts = re.split(r"[-_'.]", token)
        if len(parts) > 1:
            terms.append(token)
        terms.extend(
            stem(part) for part in parts if part and part not in QUERY_STOP_WORDS and (len(part) > 1 or part.isdigit())
        )
    return terms


class UserVectors:
    """One user's exchange embeddings: a growable matrix, the row ids and session of each row, and a lexical index
    (term → positions) of each row's text for the lexical side of hybrid recall."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        # Appends and searches may run in worker threads at once (SQLite recall runs in one); an append can
        # reallocate the arrays, so both hold this lock. Both are short CPU work; nothing waits on I/O under it.
        self.lock = threading.Lock()
        self.size = 0
        self.rows_seen = 0  # rows of this user in the database accounted for, including ones without a vector
        self.max_id = 0
        self.version: tuple[Any, ...] | None = None  # the user's (epoch, generation) these vectors reflect
        self._ids = np.zeros(0, dtype=np.int64)
        self._sessions = np.zeros(0, dtype=np.int32)
        self._matrix = np.zeros((0, dimension), dtype=np.float32)
        self._session_codes: dict[str, int] = {}
        self._postings: dict[str, list[int]] = {}  # term → row positions (into _ids) whose text contains it

    @property
    def state(self) -> CacheState:
        return CacheState(self.version, self.max_id, self.rows_seen)

    def add_rows(self, rows: Iterable[Row], *, version: tuple[Any, ...] | None = None) -> None:
        """Append rows (id, session id, embedding blob[, text]) read from the database at ``version``. A row
        without a usable embedding (another model, or none) is still found by the lexical side."""
        with self.lock:
            self._add_rows(rows, version=version)

    def _add_rows(self, rows: Iterable[Row], *, version: tuple[Any, ...] | None) -> None:
        self.version = version
        ids: list[int] = []
        sessions: list[int] = []
        vectors: list[Vector] = []
        for row in rows:
            row_id, session_id, blob = row[0], row[1], row[2]
            text = row[3] if len(row) > 3 else ""
            self.rows_seen += 1
            self.max_id = max(self.max_id, row_id)
            vector = decode_vector(blob, self.dimension)
            if vector is None and not text:
                continue
            position = self.size + len(ids)
            for term in set(lexical_terms(text)):
                self._postings.setdefault(term, []).append(position)
            ids.append(row_id)
            sessions.append(self._session_codes.setdefault(session_id, len(self._session_codes)))
            vectors.append(vector if vector is not None else np.zeros(self.dimension, dtype=np.float32))
        if vectors:
            self._append(np.asarray(ids, dtype=np.int64), np.asarray(sessions, dtype=np.int32), np.stack(vectors))

    def _append(self, ids: npt.NDArray[np.int64], sessions: npt.NDArray[np.int32], matrix: Vector) -> None:
        needed = self.size + len(ids)
        if needed > len(self._ids):  # grow geometrically so appends are amortised O(1)
            capacity = max(needed, 2 * len(self._ids), 64)
            self._ids = np.resize(self._ids, capacity)
            self._sessions = np.resize(self._sessions, capacity)
            grown = np.zeros((capacity, self.dimension), dtype=np.float32)
            grown[: self.size] = self._matrix[: self.size]
            self._matrix = grown
        self._ids[self.size : needed] = ids
        self._sessions[self.size : needed] = sessions
        self._matrix[self.size : needed] = matrix
        self.size = needed

    def search(
        self,
        query: Vector,
        *,
        session_id: str | None,
        limit: int,
        min_relevance: float,
        query_text: str = "",
        lexical_weight: float = 0.0,
    ) -> list[tuple[int, float]]:
        """(row id, relevance) of the best rows, most relevant first (newer first on exact ties). With
        ``query_text`` and ``lexical_weight`` > 0 the relevance is hybrid (see the module docstring)."""
        with self.lock:
            return self._search(
                query,
                session_id=session_id,
                limit=limit,
                min_relevance=min_relevance,
                query_text=query_text,
                lexical_weight=lexical_weight,
            )

    def _search(
        self,
        query: Vector,
        *,
        session_id: str | None,
        limit: int,
        min_relevance: float,
        query_text: str,
        lexical_weight: float,
    ) -> list[tuple[int, float]]:
        if limit <= 0 or self.size == 0:
            return []
        ids = self._ids[: self.size]
        rows: npt.NDArray[np.intp] | None = None
        if session_id is None:
            cosines = _dot(self._matrix[: self.size], query)
        else:
            code = self._session_codes.get(session_id)
            if code is None:
                return []
            rows = np.flatnonzero(self._sessions[: self.size] == code)
            if rows.size == 0:
                return []
            ids = ids[rows]
            cosines = _dot(self._matrix[rows], query)
        if lexical_weight > 0 and query_text:
            lexical = self._lexical(query_text)
            if rows is not None:
                lexical = lexical[rows]
            dense = relevance(cosines)
            scores = np.maximum(dense, lexical_weight * lexical + (1.0 - lexical_weight) * dense)
            # Among equal hybrid scores the closer embedding first (the raw cosine keeps unrelated rows apart).
            tiebreak = cosines
        else:
            # Rank by raw cosine (clipping first would tie every unrelated row at 0), newer rows first on ties.
            scores, tiebreak = cosines, cosines
        keep = min(limit, scores.size)
        if keep < scores.size:  # O(n): every row at least as good as the keep-th best (ties at the edge too)
            kth_best = -np.partition(-scores, keep - 1)[keep - 1]
            top = np.flatnonzero(scores >= kth_best)
        else:
            top = np.arange(scores.size)
        order = top[np.lexsort((-ids[top], -tiebreak[top], -scores[top]))][:keep]
        final = relevance(scores)
        return [(int(ids[i]), float(final[i])) for i in order if final[i] >= min_relevance]

    def _lexical(self, query_text: str) -> npt.NDArray[np.float32]:
        """Per row (over all rows): the idf-weighted share of the query's terms the row's text contains."""
        scores = np.zeros(self.size, dtype=np.float32)
        terms = list(dict.fromkeys(lexical_terms(query_text)))
        if not terms:
            return scores
        count = self.size
        total = 0.0
        for term in terms:
            postings = self._postings.get(term, ())
            weight = math.log(1.0 + (count - len(postings) + 0.5) / (len(postings) + 0.5))
            total += weight
            if postings:
                scores[np.asarray(postings, dtype=np.intp)] += weight
        return scores / total if total > 0 else scores

    @property
    def nbytes(self) -> int:
        return int(self._matrix.nbytes)


class VectorCache:
    """Per-user ``UserVectors``, least recently used evicted beyond ``max_vectors`` in total. Thread-safe."""

    def __init__(self, max_vectors: int = DEFAULT_CACHE_MAX_VECTORS) -> None:
        self.max_vectors = max_vectors
        self._users: OrderedDict[str, UserVectors] = OrderedDict()
        self._lock = threading.Lock()

    def refresh(
        self, user_id: str, dimension: int, read_delta: Callable[[CacheState | None], VectorDelta]
    ) -> UserVectors:
        """The user's vectors, brought up to date: ``read_delta(what the cache knows)`` reads what is new.

        The read happens outside any lock. If another caller refreshed the same user meanwhile, its result is
        kept (and this caller's increment dropped): the next refresh catches up, because the versions tell it to.
        """
        with self._lock:
            cached = self._users.get(user_id)
            if cached is not None and cached.dimension != dimension:
                cached = None  # embedded by another model: not comparable
        known = cached.state if cached is not None else None
        delta = read_delta(known)
        if delta.full or cached is None:
            fresh = UserVectors(dimension)
            fresh.add_rows(delta.rows, version=delta.version)
            with self._lock:
                self._put(user_id, fresh)
            return fresh
        with self._lock:
            current = self._users.get(user_id)
            if current is not cached:  # replaced (or forgotten) meanwhile
                return current if current is not None and current.dimension == dimension else cached
            self._users.move_to_end(user_id)
        with cached.lock:
            if cached.state == known:
                cached._add_rows(delta.rows, version=delta.version)
        return cached

    def _put(self, user_id: str, vectors: UserVectors) -> None:
        self._users[user_id] = vectors
        self._users.move_to_end(user_id)
        total = sum(v.size for v in self._users.values())
        while total > self.max_vectors and len(self._users) > 1:
            _, evicted = self._users.popitem(last=False)
            total -= evicted.size

    def get(self, user_id: str) -> UserVectors | None:
        with self._lock:
            return self._users.get(user_id)

    def forget(self, user_id: str) -> None:
        with self._lock:
            self._users.pop(user_id, None)

    def clear(self) -> None:
        with self._lock:
            self._users.clear()

    def __contains__(self, user_id: object) -> bool:
        with self._lock:
            return user_id in self._users


@dataclass(frozen=True)
class CacheState:
    """What a user's cached vectors reflect: the user's version and the rows read so far."""

    version: tuple[Any, ...] | None  # (epoch, generation), or None when read without a version row
    max_id: int
    rows_seen: int


@dataclass(frozen=True)
class VectorDelta:
    """What the database holds beyond what a user's cached vectors know."""

    full: bool  # True: rebuild from ``rows``; False: append ``rows`` (possibly none) to the known state
    rows: list[Row]
    version: tuple[Any, ...] | None
