"""The seed's quality score: source reputation, recency and relevance, weighted.

    score = source_weight·reputation + recency_weight·recency + relevance_weight·relevance

Normalisation (``EvaluationSettings.normalize_weights``, on by default): the seed's default weights sum to 0.9,
so with its literal formula a perfect chunk (reputation, recency and relevance all 1.0) scores 0.9 and a
threshold of 0.6 means "two thirds of the best possible". Dividing by the sum of the weights turns the score into
a weighted mean of three [0, 1] components: a perfect chunk reaches 1.0, a threshold reads as a fraction of
perfect, and callers who pass weights summing to more than 1 do not get every chunk clamped to 1.0. With
normalisation off the literal formula is used, clamped to [0, 1] as in the seed.

Reputation comes from a table: the configured one (``EvaluationSettings.source_reputation``), overridden by the
user's learned preferences (``UserPreferences.source_reputation``), overridden by this call's explicit
``EvaluatorInput.source_reputation_weights`` (the most specific wins). Unknown source types get
``default_reputation``.

Recency decays exponentially with the source's age: 0.5 ** (age / half_life). A chunk without a date gets
``undated_recency`` (0.5 by default: as if one half-life old, neither rewarded nor punished); a date in the future
(clock skew, "updated" stamps) counts as brand new. Age is measured from the moment retrieval finished
(``AggregatedContext.retrieved_at``), so the same input always scores the same.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from researchcrew.contracts.chunks import ContextChunk
from researchcrew.contracts.evaluator import EvaluatorInput
from researchcrew.settings import EvaluationSettings

logger = logging.getLogger(__name__)

_SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class ScoreWeights:
    """The three weights and whether the weighted sum is divided by their total."""

    source: float
    recency: float
    relevance: float
    normalize: bool = True

    @property
    def total(self) -> float:
        return self.source + self.recency + self.relevance

    @classmethod
    def from_input(cls, request: EvaluatorInput, settings: EvaluationSettings) -> ScoreWeights:
        return cls(request.source_weight, request.recency_weight, request.relevance_weight, settings.normalize_weights)


@dataclass(frozen=True)
class ScoreParts:
    """The components of one chunk's score, each in [0, 1], and the weighted result."""

    reputation: float
    recency: float
    relevance: float
    score: float
    dated: bool

    def components(self) -> dict[str, float]:
        return {
            "reputation": round(self.reputation, 4),
            "recency": round(self.recency, 4),
            "relevance": round(self.relevance, 4),
            "score": round(self.score, 4),
        }


def _clamp(value: float) -> float:
    return min(max(value, 0.0), 1.0)


def reputation_table(
    settings: EvaluationSettings,
    user_overrides: Mapping[str, float] | None = None,
    call_overrides: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Merge the configured reputations with the user's and this call's overrides (later wins).

    User preferences are not bounded by their contract, so out-of-range values are clamped (and logged) rather
    than allowed to push a score outside [0, 1].
    """
    table = dict(settings.source_reputation)
    for overrides in (user_overrides, call_overrides):
        for source_type, value in (overrides or {}).items():
            if not math.isfinite(value) or not 0.0 <= value <= 1.0:
                logger.warning("reputation override %s=%r is outside [0, 1]; clamped", source_type, value)
                value = _clamp(value) if math.isfinite(value) else settings.default_reputation
            table[source_type] = value
    return table


def recency(source_date: datetime | None, now: datetime, half_life_days: float, undated: float) -> float:
    """Exponential decay with the source's age: 1.0 when new, 0.5 at one half-life; ``undated`` without a date."""
    if source_date is None:
        return undated
    age_days = (now - source_date).total_seconds() / _SECONDS_PER_DAY
    if age_days <= 0:
        return 1.0
    return _clamp(0.5 ** (age_days / half_life_days))


def quality_score(reputation: float, recency_value: float, relevance: float, weights: ScoreWeights) -> float:
    """The weighted score, normalised by the weight sum when ``weights.normalize``, clamped to [0, 1]."""
    parts = ((weights.source, reputation), (weights.recency, recency_value), (weights.relevance, relevance))
    if weights.normalize and weights.total > 0:
        # Normalise the weights before weighting: dividing the weighted sum afterwards loses a component whose
        # weight is so small (subnormal) that weight * value underflows to 0 (found by hypothesis).
        return _clamp(sum((weight / weights.total) * value for weight, value in parts))
    return _clamp(sum(weight * value for weight, value in parts))


@dataclass(frozen=True)
class Scorer:
    """Scores chunks for one evaluation: the reputation table, weights and reference time are fixed per call."""

    reputations: Mapping[str, float]
    weights: ScoreWeights
    now: datetime
    settings: EvaluationSettings

    @classmethod
    def for_request(cls, request: EvaluatorInput, settings: EvaluationSettings) -> Scorer:
        user = request.user_preferences.source_reputation if request.user_preferences else None
        table = reputation_table(settings, user, request.source_reputation_weights)
        return cls(table, ScoreWeights.from_input(request, settings), request.aggregated_context.retrieved_at, settings)

    def reputation_of(self, source_type: str) -> float:
        return self.reputations.get(source_type, self.settings.default_reputation)

    def score(self, chunk: ContextChunk) -> ScoreParts:
        reputation = self.reputation_of(chunk.source_type)
        fresh = recency(
            chunk.source_date, self.now, self.settings.recency_half_life_days, self.settings.undated_recency
        )
        relevance = chunk.semantic_relevance
        return ScoreParts(
            reputation=reputation,
            recency=fresh,
            relevance=relevance,
            score=quality_score(reputation, fresh, relevance, self.weights),
            dated=chunk.source_date is not None,
        )

    def describe(self, chunk: ContextChunk, parts: ScoreParts) -> str:
        """A one-line, human-readable account of a score, for removal reasons and logs."""
        w = self.weights
        how = f"weighted mean, weights sum {w.total:.2f}" if w.normalize else "weighted sum"
        dated = "" if parts.dated else " (undated)"
        return (
            f"reputation {parts.reputation:.2f} [{chunk.source_type}] ×{w.source:.2f}, "
            f"recency {parts.recency:.2f}{dated} ×{w.recency:.2f}, "
            f"relevance {parts.relevance:.2f} ×{w.relevance:.2f} ({how}) = {parts.score:.3f}"
        )
