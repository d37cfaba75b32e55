"""Token embeddings: each word piece's vector in context, for late interaction (``pipeline/_late.py``).

A sentence vector is the mean of these; a passage's vector averages away *which* of its words carry the question's
terms. Both backends offer them (``embed_tokens``); an embedder without the method (test doubles, other models' own
wrappers) simply has none, and late interaction is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class TokenVectors:
    """One text's word pieces ("place", "##ntal") and their unit vectors, one row each ([CLS]/[SEP] left out)."""

    tokens: list[str]
    vectors: npt.NDArray[np.float32]


@runtime_checkable
class TokenEmbedder(Protocol):
    """An embedder that also gives token vectors."""

    def embed_tokens(self, texts: list[str]) -> list[TokenVectors]: ...


def unit_rows(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Each row scaled to length 1 (a zero row stays zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.asarray(matrix / np.clip(norms, 1e-12, None), dtype=np.float32)


__all__ = ["TokenEmbedder", "TokenVectors", "unit_rows"]
