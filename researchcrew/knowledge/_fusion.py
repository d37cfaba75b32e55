"""Fusing dense and BM25 evidence into one score per chunk, and calibrating it to a relevance in [0, 1].

**Fusion** (``hybrid_fusion="weighted"``, the default): every candidate of the two pools is scored on both sides,
each side is min-max normalised over the unfiltered pool, and ``fused = w·dense + (1 − w)·bm25``. Milvus' own
``hybrid_search`` rankers (RRF, weighted) see only two top-k lists and count a side's miss as zero, which measured
lower on SciFact, so fusion happens here; ``"rrf"`` remains available (Σ 1/(k + rank), scaled to [0, 1]).

**Calibration**: ``relevance = σ(A·fused + B·cosine + C)``. A fused score is relative (every query's best hit gets
1.0), so the absolute dense cosine enters too. A, B, C are a class-balanced logistic regression fitted on SciFact's
tuning half (``benchmarks/calibrate_relevance.py``): the relevance is the probability that a hit is relevant under
equal priors, so ``min_relevance`` thresholds mean the same whatever the corpus. A query-level gate on the best
cosine (``GATE_*``) scales relevance down when nothing in the knowledge base is close to the query, except for a
chunk that holds a rare name or identifier of the query word for word (``exact``): its relevance is at least its
BM25 side's calibrated one, ungated (the dense side of a small model knows nothing of a rare name). Hits are ordered
by the fused score; the single-side diagnostic modes use their own constants (``SINGLE_*``). The measurements
behind each choice (fusion variants, the relevance bands on held-out queries): benchmarks/README.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from researchcrew.knowledge import _schema as schema

if TYPE_CHECKING:
    from researchcrew.settings import RetrievalSettings

Mode = Literal["hybrid", "dense", "bm25"]

# Calibration constants (see the module docstring): class-balanced logistic regression on the SciFact tuning half
# (even query ids), samples = the top 100 hits per query, labels = the chunk's document is judged relevant.
# Refit with benchmarks/calibrate_relevance.py whenever analysis, chunking or fusion change.
CALIBRATION_FUSED = 12.213
CALIBRATION_COSINE = 1.251
CALIBRATION_BIAS = -8.617
SINGLE_FUSED = 6.89
SINGLE_BIAS = -3.008

# Query-level gate: when even the best candidate's cosine is low, the knowledge base has nothing on the query and
# every relevance is scaled down: × clip((best cosine − LOW) / (HIGH − LOW), 0, 1). On SciFact's tuning half the
# best cosine per query is ≥ 0.39 for 99 % of queries (all of which have a relevant document), so the gate leaves
# them alone; off-topic queries ("best pizza recipes in Naples") have best cosines of 0.1–0.2 and drop to ~0.
GATE_LOW = 0.25
GATE_HIGH = 0.40

# A hinted search (seed 000) ranks in-period evidence ahead of equally relevant evidence from elsewhere.
DATE_HINT_BONUS = 0.05


@dataclass
class Request:
    """One retrieval: the query embedding, its analysed BM25 form, and how many candidates per side."""

    vector: list[float] | None
    analysed: str
    pool: int
    mode: Mode


@dataclass
class Candidate:
    """A chunk returned by either side, with what each side said about it."""

    pk: str
    row: dict[str, Any]
    dense: float | None = None
    bm25: float | None = None
    dense_rank: int | None = None
    bm25_rank: int | None = None
    in_period: bool = False
    exact_terms: tuple[str, ...] = ()  # rare exact terms of the query it holds (``exact``): no query-level gate

    @classmethod
    def from_row(cls, hit: dict[str, Any]) -> Candidate:
        row = {name: hit.get(name) for name in (*schema.OUTPUT_FIELDS, schema.COLLECTION)}
        return cls(pk=str(hit[schema.PK]), row=row)


@dataclass(frozen=True)
class Scale:
    """Min-max normalisation constants of one query, taken from its unfiltered candidate pool."""

    dense_min: float
    dense_max: float
    bm25_min: float
    bm25_max: float

    @classmethod
    def of(cls, candidates: Iterable[Candidate], *, depth: int | None = None) -> Scale:
        """Min and max over the candidates either side ranked within ``depth`` (all when None).

        Taking the scale from a fixed depth keeps the top of the ranking the same whether a caller asks for 5
        hits or 300 (a deeper pool would otherwise lower the minimum and shift every normalised score).
        """
        items = [
            c
            for c in candidates
            if depth is None
            or (c.dense_rank is not None and c.dense_rank < depth)
            or (c.bm25_rank is not None and c.bm25_rank < depth)
        ]
        dense = [c.dense for c in items if c.dense is not None] or [0.0]
        bm25 = [c.bm25 for c in items if c.bm25 is not None] or [0.0]
        return cls(min(dense), max(dense), min(bm25), max(bm25))


@dataclass
class Scored:
    candidate: Candidate
    fused: float
    relevance: float
    rerank: float | None = field(default=None)
    rerank_order: float = field(default=0.0)


def fuse(candidates: Sequence[Candidate], scale: Scale, settings: RetrievalSettings, *, mode: Mode) -> list[Scored]:
    """Fused score and calibrated relevance per candidate, best first."""
    scored: list[Scored] = []
    gate = 1.0 if mode == "bm25" else max(0.0, min(1.0, (scale.dense_max - GATE_LOW) / (GATE_HIGH - GATE_LOW)))
    dense_ranks = _ranks(candidates, "dense")
    bm25_ranks = _ranks(candidates, "bm25")
    for candidate in candidates:
        dense = _minmax(candidate.dense, scale.dense_min, scale.dense_max)
        bm25 = _minmax(candidate.bm25, scale.bm25_min, scale.bm25_max)
        if mode == "dense":
            fused, logit = dense, SINGLE_FUSED * dense + SINGLE_BIAS
        elif mode == "bm25":
            fused, logit = bm25, SINGLE_FUSED * bm25 + SINGLE_BIAS
        else:
            if settings.hybrid_fusion == "rrf":
                k = settings.rrf_k
                fused = (_rrf(dense_ranks.get(candidate.pk), k) + _rrf(bm25_ranks.get(candidate.pk), k)) / (
                    2.0 / (k + 1)
                )
            else:
                fused = settings.dense_weight * dense + (1.0 - settings.dense_weight) * bm25
            logit = CALIBRATION_FUSED * fused + CALIBRATION_COSINE * (candidate.dense or 0.0) + CALIBRATION_BIAS
        if candidate.exact_terms and mode != "dense":
            # A rare name or identifier of the query, word for word: the knowledge base has something on it, and
            # the lexical side is the evidence (the dense side knows nothing of a rare name); no gate applies.
            relevance = max(sigmoid(logit), sigmoid(SINGLE_FUSED * bm25 + SINGLE_BIAS))
        else:
            relevance = gate * sigmoid(logit)
        scored.append(Scored(candidate, fused, relevance))
    scored.sort(key=lambda item: item.fused, reverse=True)
    return scored


def sigmoid(value: float) -> float:
    if value >= 0:
        return 1.0 / (1.0 + math.exp(-value))
    exp = math.exp(value)
    return exp / (1.0 + exp)


def unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def cosine(query_unit: Sequence[float], vector: Sequence[float]) -> float:
    norm = math.sqrt(sum(float(x) * float(x) for x in vector)) or 1.0
    return sum(q * float(x) for q, x in zip(query_unit, vector, strict=True)) / norm


def _ranks(candidates: Sequence[Candidate], side: Literal["dense", "bm25"]) -> dict[str, int]:
    present = [c for c in candidates if getattr(c, side) is not None and getattr(c, f"{side}_rank") is not None]
    present.sort(key=lambda c: getattr(c, f"{side}_rank"))
    return {c.pk: rank for rank, c in enumerate(present)}


def _rrf(rank: int | None, k: int) -> float:
    return 0.0 if rank is None else 1.0 / (k + rank + 1)


def _minmax(value: float | None, low: float, high: float) -> float:
    if value is None:
        return 0.0
    if high <= low:
        return 1.0 if value >= high else 0.0
    return max(0.0, min(1.0, (value - low) / (high - low)))
