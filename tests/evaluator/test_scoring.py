"""The seed's quality score on hand-computed examples, reputation overrides and recency decay."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from researchcrew.contracts import UserPreferences
from researchcrew.pipeline.evaluate._evaluator import Evaluator
from researchcrew.pipeline.evaluate._scoring import Scorer, ScoreWeights, quality_score, recency, reputation_table
from researchcrew.settings import EvaluationSettings, Settings
from tests.evaluator.factories import HALF_LIFE, NOW, chunk, request

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


def test_hand_computed_score_normalised_and_literal() -> None:
    # arXiv (0.85), exactly one half-life old (recency 0.5), relevance 0.9, the seed's weights 0.3/0.2/0.4:
    # weighted sum 0.255 + 0.1 + 0.36 = 0.715; normalised by the weight sum 0.9 → 0.7944.
    item = chunk("a", "text", source_type="arxiv", relevance=0.9, date=NOW - HALF_LIFE)
    normalised = Scorer.for_request(request([item]), EvaluationSettings()).score(item)
    assert normalised.reputation == 0.85
    assert normalised.recency == pytest.approx(0.5)
    assert normalised.score == pytest.approx(0.715 / 0.9)

    literal = Scorer.for_request(request([item]), EvaluationSettings(normalize_weights=False)).score(item)
    assert literal.score == pytest.approx(0.715)


def test_perfect_chunk_reaches_one_only_when_normalised() -> None:
    item = chunk("a", "text", source_type="arxiv", relevance=1.0, date=NOW)
    perfect = request([item], source_reputation_weights={"arxiv": 1.0})
    assert Scorer.for_request(perfect, EvaluationSettings()).score(item).score == pytest.approx(1.0)
    assert Scorer.for_request(perfect, EvaluationSettings(normalize_weights=False)).score(item).score == (
        pytest.approx(0.9)
    )


def test_custom_weights_from_the_input() -> None:
    # web 0.6, recency 1.0, relevance 0.5 with weights source 1, recency 0, relevance 1 → (0.6 + 0.5) / 2.
    item = chunk("a", "text", source_type="web", relevance=0.5, date=NOW)
    req = request([item], source_weight=1.0, recency_weight=0.0, relevance_weight=1.0)
    assert Scorer.for_request(req, EvaluationSettings()).score(item).score == pytest.approx(0.55)
    # Literal formula with weights summing to 2: 1.1, clamped to 1.0 as the seed says.
    assert Scorer.for_request(req, EvaluationSettings(normalize_weights=False)).score(item).score == 1.0


def test_reputation_precedence_settings_then_user_then_call() -> None:
    settings = EvaluationSettings(source_reputation={"web": 0.6, "rag": 0.8})
    table = reputation_table(settings, {"web": 0.3, "memory": 0.9}, {"web": 0.1})
    assert table == {"web": 0.1, "rag": 0.8, "memory": 0.9}
    # Out-of-range user preferences (unbounded in their contract) are clamped, not trusted.
    assert reputation_table(settings, {"web": 7.0, "rag": -1.0}, None) == {"web": 1.0, "rag": 0.0}


async def test_overrides_change_the_evaluator_score() -> None:
    item = chunk("a", "text", source_type="web", relevance=0.5, date=NOW)
    agent = Evaluator()
    base = (await agent.run(request([item], quality_threshold=0.0))).filtered_context.chunks[0]
    assert base.source_reputation == 0.6
    prefs = UserPreferences(source_reputation={"web": 0.2})
    by_user = await agent.run(request([item], quality_threshold=0.0, user_preferences=prefs))
    assert by_user.filtered_context.chunks[0].source_reputation == 0.2
    by_call = await agent.run(
        request([item], quality_threshold=0.0, user_preferences=prefs, source_reputation_weights={"web": 0.95})
    )
    assert by_call.filtered_context.chunks[0].source_reputation == 0.95
    assert (
        by_call.filtered_context.chunks[0].quality_score
        > base.quality_score
        > by_user.filtered_context.chunks[0].quality_score
    )


def test_unknown_source_type_gets_the_default_reputation() -> None:
    item = chunk("a", "text", source_type="patents")
    scorer = Scorer.for_request(request([item]), EvaluationSettings(default_reputation=0.42))
    assert scorer.score(item).reputation == 0.42


@pytest.mark.parametrize(
    ("age", "expected"),
    [
        (timedelta(0), 1.0),
        (HALF_LIFE, 0.5),
        (HALF_LIFE * 2, 0.25),
        (HALF_LIFE * 3, 0.125),
        (-timedelta(days=30), 1.0),  # future-dated: brand new, not > 1
    ],
)
def test_recency_halves_every_half_life(age: timedelta, expected: float) -> None:
    assert recency(NOW - age, NOW, HALF_LIFE.days + 0.25, 0.5) == pytest.approx(expected)


def test_undated_chunk_gets_the_neutral_recency() -> None:
    assert recency(None, NOW, 365.0, 0.5) == 0.5
    item = chunk("a", "text", date=None)
    parts = Scorer.for_request(request([item]), EvaluationSettings(undated_recency=0.3)).score(item)
    assert parts.recency == 0.3 and parts.dated is False


def test_half_life_is_configurable_through_settings_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCHCREW_EVALUATION__RECENCY_HALF_LIFE_DAYS", "365")
    settings = Settings()
    assert settings.evaluation.recency_half_life_days == 365
    item = chunk("a", "text", date=NOW - timedelta(days=365))
    assert Scorer.for_request(request([item]), settings.evaluation).score(item).recency == pytest.approx(0.5)


def test_settings_reject_inconsistent_values() -> None:
    with pytest.raises(ValueError, match="source_reputation"):
        EvaluationSettings(source_reputation={"web": 1.5})
    with pytest.raises(ValueError, match="redundancy_threshold"):
        EvaluationSettings(duplicate_threshold=0.5, redundancy_threshold=0.7)


@given(unit, unit, unit, unit, unit, unit, st.booleans())
def test_score_stays_in_unit_interval(
    rep: float, fresh: float, rel: float, ws: float, wr: float, wl: float, normalize: bool
) -> None:
    score = quality_score(rep, fresh, rel, ScoreWeights(ws, wr, wl, normalize))
    assert 0.0 <= score <= 1.0
    if normalize and ws + wr + wl > 0:
        # A weighted mean lies between its smallest and largest weighted component.
        used = [v for v, w in ((rep, ws), (fresh, wr), (rel, wl)) if w > 0]
        assert min(used) - 1e-9 <= score <= max(used) + 1e-9


@given(st.floats(min_value=-1e5, max_value=7e5, allow_nan=False), st.floats(min_value=1.0, max_value=1e4))
def test_recency_stays_in_unit_interval_and_decreases(age_days: float, half_life: float) -> None:
    value = recency(NOW - timedelta(days=age_days), NOW, half_life, 0.5)
    older = recency(NOW - timedelta(days=age_days + 1), NOW, half_life, 0.5)
    assert 0.0 <= value <= 1.0 and not math.isnan(value)
    assert older <= value
