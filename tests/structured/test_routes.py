"""Question parsing and route rules, and the LLM route prompt (validated, rules on failure)."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from researchcrew.knowledge.annotations import parse_question
from researchcrew.pipeline._structured import AnnotationStage, Coverage, rule_route
from researchcrew.testing import FakeLLM


@pytest.mark.parametrize(
    ("question", "intent", "low", "high", "dimension"),
    [
        ("Which solar panels have a width ≤ 1.2 m?", "enumeration", -math.inf, 1.2, "length"),
        ("Which studies report a sample size above 1,000?", "enumeration", 1000.0, math.inf, "number"),
        ("receipts under $50 in 2024", "enumeration", -math.inf, 50.0, "usd"),
        ("panels between 1 and 1.2 m wide", "enumeration", 1.0, 1.2, "length"),
        ("panels narrower than 45 in", "enumeration", -math.inf, 1.143, "length"),
    ],
)
def test_numeric_comparisons(question: str, intent: str, low: float, high: float, dimension: str) -> None:
    parsed = parse_question(question)
    assert parsed.intent == intent
    (found,) = parsed.numeric
    assert (found.low, found.dimension) == (low, dimension) and found.high == pytest.approx(high)


def test_strict_and_inclusive_bounds() -> None:
    (under,) = parse_question("price under $50").numeric
    (at_most,) = parse_question("price at most $50").numeric
    assert not under.admits(50.0) and at_most.admits(50.0)


def test_dates_items_aggregates() -> None:
    parsed = parse_question("How many receipts contain tires in 2024?")
    assert parsed.intent == "aggregate" and parsed.aggregate == "count" and parsed.items == ["tires"]
    assert parsed.dates is not None and (parsed.dates.start, parsed.dates.end) == ("2024-01-01", "2024-12-31")
    after = parse_question("invoices after 2023-06")
    assert after.dates is not None and after.dates.start == "2023-07-01" and after.dates.end is None
    grouped = parse_question("total price by vendor")
    assert (grouped.aggregate, grouped.group_by) == ("sum", "vendor")
    assert parse_question("Why does pooling save reagents?").intent == "conceptual"
    assert parse_question("What is the width of the SunMax 400?").intent == "numeric_lookup"


def test_rule_routes() -> None:
    enumeration = parse_question("Which panels are under 1.2 m wide?")
    assert rule_route(enumeration, Coverage(10, True)).route == "structured"
    assert rule_route(enumeration, Coverage(10, True)).fallbacks == ["hybrid", "long_text"]
    assert rule_route(enumeration, Coverage(0, False)).route == "hybrid"
    assert rule_route(parse_question("Why do panels degrade?"), Coverage(10, True)).route == "long_text"
    down = rule_route(enumeration, Coverage(0, False, healthy=False, problem="unreachable"))
    assert down.route == "long_text" and "unreachable" in down.reason


class _NoIndex:
    """Enough of an index for the route prompt: nothing is searched on the long-text route."""

    def count(self, collections: object) -> int:
        return 3

    def labels(self, collections: object) -> dict[str, int]:
        return {"width": 3}

    def subject_words(self, collections: object) -> set[str]:
        return {"panel"}

    def label_vectors(self, texts: object) -> object:
        raise AssertionError("not needed")


def test_llm_route_is_validated_and_rules_stand_in() -> None:
    question = "Which panels have a width under 1.2 m?"
    good = FakeLLM([json.dumps({"route": "long_text", "fallbacks": ["hybrid", "long_text"], "reason": "manual"})])
    stage = AnnotationStage(_NoIndex(), llm=good)  # type: ignore[arg-type]
    from researchcrew.contracts.tables import StructuredRequest

    outcome = asyncio.run(stage.run(StructuredRequest(question=question)))
    assert (outcome.route.route, outcome.route.decided_by, outcome.route.fallbacks) == ("long_text", "llm", ["hybrid"])
    bad = AnnotationStage(_NoIndex(), llm=FakeLLM(['{"route": "teleport"}']))  # type: ignore[arg-type]
    decided = bad._decide(StructuredRequest(question=question), parse_question(question), Coverage(3, True))
    assert (decided.route, decided.decided_by) == ("structured", "rules")
