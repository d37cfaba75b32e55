"""Recall of earlier exchanges: the ``MemoryRecall`` interface and the built-in store's in-memory vector index.

``MemoryRecall`` is what ``MemoryTool`` searches. Two implementations: ``MemoryStore`` (embeddings stored with each
exchange, searched locally with numpy) and Zep (memory/zep.py). Both are strictly scoped to one user (and one
session when asked) and raise ``MemoryStoreError`` when their backend cannot answer.

Why a cache: recalling over 10,000 exchanges must take ~20 ms, and reading 10,000 embedding blobs from SQL per
query takes longer than that. So each user's embeddings are loaded once into a float32 matrix and kept; before
each search one cheap indexed query (``count(*), max(id)`` for the user) tells whether rows were added (only
those are read: ids are never reused) or removed (the user's matrix is rebuilt). That keeps the cache correct
when other processes write to the same database. Users are evicted least-recently-used beyond a total budget.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from researchcrew.memory.records import RecalledExchange

Vector = npt.NDArray[np.float32]
DEFAULT_CACHE_MAX_VECTORS = 200_000  # ≈ 300 MB at 384 dimensions


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


class UserVectors:
    """One user's exchange embeddings: a growable matrix, the row ids and session of each row."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self.size = 0
        self.rows_seen = 0  # rows of this user in the database accounted for, including ones without a vector
        self.max_id = 0
        self._ids = np.zeros(0, dtype=np.int64)
        self._sessions = np.zeros(0, dtype=np.int32)
        self._matrix = np.zeros((0, dimension), dtype=np.float32)
        self._session_codes: dict[str, int] = {}

    def add_rows(self, rows: Iterable[tuple[int, str, bytes | None]]) -> None:
        """Append rows (id, session id, embedding blob) read from the database."""
        ids: list[int] = []
        sessions: list[int] = []
        vectors: list[Vector] = []
        for row_id, session_id, blob in rows:
            self.rows_seen += 1
            self.max_id = max(self.max_id, row_id)
            vector = decode_vector(blob, self.dimension)
            if vector is None:
                continue
            ids.append(row_id)
            sessions.append(self._session_codes.setdefault(session_id, len(self._session_codes)))
            vectors.append(vector)
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
        self, query: Vector, *, session_id: str | None, limit: int, min_relevance: float
    ) -> list[tuple[int, float]]:
        """(row id, relevance) of the best rows, most similar first (newer first on exact ties)."""
        if limit <= 0 or self.size == 0:
            return []
        ids = self._ids[: self.size]
        if session_id is None:
            scores = self._matrix[: self.size] @ query
        else:
            code = self._session_codes.get(session_id)
            if code is None:
                return []
            rows = np.flatnonzero(self._sessions[: self.size] == code)
            if rows.size == 0:
                return []
            ids = ids[rows]
            scores = self._matrix[rows] @ query
        # Rank by raw cosine (clipping first would tie every unrelated row at 0), newer rows first on exact ties.
        keep = min(limit, scores.size)
        if keep < scores.size:  # O(n): every row at least as similar as the keep-th best (ties at the edge too)
            kth_best = -np.partition(-scores, keep - 1)[keep - 1]
            top = np.flatnonzero(scores >= kth_best)
        else:
            top = np.arange(scores.size)
        order = top[np.lexsort((-ids[top], -scores[top]))][:keep]
        scores = relevance(scores)
        return [(int(ids[i]), float(scores[i])) for i in order if scores[i] >= min_relevance]

    @property
    def nbytes(self) -> int:
        return int(self._matrix.nbytes)


class VectorCache:
    """Per-user ``UserVectors``, least recently used evicted beyond ``max_vectors`` in total."""

    def __init__(self, max_vectors: int = DEFAULT_CACHE_MAX_VECTORS) -> None:
        self.max_vectors = max_vectors
        self._users: OrderedDict[str, UserVectors] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}

    def lock(self, user_id: str) -> asyncio.Lock:
        """Serialises refreshes of one user's vectors within this process."""
        lock = self._locks.get(user_id)
        if lock is None:
            lock = self._locks[user_id] = asyncio.Lock()
        return lock

    def get(self, user_id: str) -> UserVectors | None:
        vectors = self._users.get(user_id)
        if vectors is not None:
            self._users.move_to_end(user_id)
        return vectors

    def put(self, user_id: str, vectors: UserVectors) -> None:
        self._users[user_id] = vectors
        self._users.move_to_end(user_id)
        total = sum(v.size for v in self._users.values())
        while total > self.max_vectors and len(self._users) > 1:
            _, evicted = self._users.popitem(last=False)
            total -= evicted.size

    def forget(self, user_id: str) -> None:
        self._users.pop(user_id, None)

    def clear(self) -> None:
        self._users.clear()

    def __contains__(self, user_id: object) -> bool:
        return user_id in self._users
