"""Issue 13, item 1: near-duplicate removal must never delete one side of a disagreement.

Two passages that say the same thing with another number, unit, percentage, direction or a negation are a
contradiction, not a duplicate: both are kept (unpenalised) and the contradiction is reported, from every source
type that carries claims. Passages that say the same thing in other words or units are still deduplicated.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from researchcrew.assistant import ResearchAssistant
from researchcrew.contracts import ContextChunk
from researchcrew.pipeline.evaluate._disagreement import disagreement
from researchcrew.pipeline.evaluate._evaluator import Evaluator
from tests.e2e.support import SpyTool, evidence, offline_settings
from tests.evaluator.factories import chunk, request

BASE = (
    "In a randomised trial of 4,000 adults, daily aspirin reduced the risk of heart attack by 30% over five years. "
    "The effect was consistent across age groups and did not depend on sex."
)
# (name, the second passage): each differs from BASE in one claim only.
DISAGREEING = [
    ("percentage", BASE.replace("by 30%", "by 5%")),
    ("number", BASE.replace("4,000 adults", "400 adults").replace("by 30%", "by 12%")),
    ("direction", BASE.replace("reduced the risk", "increased the risk")),
    ("negation", BASE.replace("The effect was consistent", "The effect was not consistent")),
    ("antonym prefix", BASE.replace("was consistent", "was inconsistent")),
]
LATENCY = "With the new cache the service answered in 20 ms per request on average, measured over one week of traffic."
UNITS = [
    ("unit", LATENCY, LATENCY.replace("20 ms", "20 s")),
    ("unit scale", LATENCY, LATENCY.replace("20 ms", "200 ms")),
]
AGREEING = [
    ("same percentage, other spelling", BASE, BASE.replace("by 30%", "by 30 percent")),
    ("same duration, other unit", LATENCY, LATENCY.replace("20 ms", "0.02 s")),
    ("a citation marker added", BASE, BASE + " [12]"),
]
# Conversation memory is not among them: what it holds is the user's words or context, never a claim to compare
# (the assistant's earlier answers are never evidence, issue 20; tests/evaluator/test_memory_not_evidence.py).
SOURCES = ["rag", "web", "arxiv"]


def _pair(first: str, second: str, source_a: str, source_b: str) -> list[ContextChunk]:
    return [
        chunk("a", first, source_type=source_a, relevance=0.95, url="https://example.org/a"),
        chunk("b", second, source_type=source_b, relevance=0.9, url="https://example.org/b"),
    ]


@pytest.mark.parametrize(("source_a", "source_b"), list(itertools.product(SOURCES, repeat=2)))
@pytest.mark.parametrize(
    ("kind", "first", "second"), [(name, BASE, text) for name, text in DISAGREEING] + UNITS, ids=lambda v: str(v)[:20]
)
def test_both_sides_of_a_disagreement_survive_dedup(
    kind: str, first: str, second: str, source_a: str, source_b: str
) -> None:
    output = Evaluator().evaluate(request(_pair(first, second, source_a, source_b), quality_threshold=0.0))

    kept = {scored.chunk.chunk_id: scored for scored in output.filtered_context.chunks}
    assert set(kept) == {"a", "b"}, output.removal_rationale
    assert not any(scored.redundancy_penalised for scored in kept.values())  # not treated as a repeat either
    pairs = [{record.chunk_id_a, record.chunk_id_b} for record in output.contradictions_found]
    assert {"a", "b"} in pairs, f"{kind}: no contradiction reported"


@pytest.mark.parametrize(("name", "first", "second"), AGREEING, ids=lambda v: str(v)[:20])
def test_the_same_claim_in_other_words_or_units_is_still_a_duplicate(name: str, first: str, second: str) -> None:
    output = Evaluator().evaluate(request(_pair(first, second, "rag", "web"), quality_threshold=0.0))

    kept = {scored.chunk.chunk_id: scored for scored in output.filtered_context.chunks}
    removed = {removal.chunk_id: removal.reason for removal in output.removal_rationale}
    # Removed as a duplicate, or (a short text, fewer shared shingles) kept with the redundancy penalty.
    assert removed.get("b") == "duplicate" or kept["b"].redundancy_penalised
    assert output.contradictions_found == []


def test_the_record_names_the_sentences_and_what_changed() -> None:
    a, b = _pair(BASE, BASE.replace("by 30%", "by 5%"), "rag", "web")
    record = disagreement(a, b)
    assert record is not None
    assert record.kind == "numeric"
    assert "30%" in record.claim_a and "5%" in record.claim_b
    assert record.explanation == "near-identical passages disagree: 30% vs 5%"
    assert record.subject is not None and "heart attack" in record.subject


async def test_the_answer_shows_both_sides_cited(tmp_path: Path) -> None:
    """End to end (the real pipeline, extractive): both sides reach the answer, each with its citation, and a
    caveat says the sources disagree."""
    trial = (
        "In a randomised trial of 4,000 adults, daily aspirin reduced the risk of heart attack by 30% over five years."
    )
    sources = [
        SpyTool([evidence("trial-rag", trial, source_type="rag")], source_type="rag"),
        SpyTool([evidence("trial-web", trial.replace("30%", "5%"), source_type="web")], source_type="web"),
    ]
    async with ResearchAssistant(offline_settings(tmp_path), tools=sources, remember=False) as assistant:
        response = await assistant.ask("By how much does daily aspirin reduce the risk of heart attack?")

    assert response.answer_kind == "extractive"
    assert {c.chunk_id for c in response.citations} == {"trial-rag", "trial-web"}
    assert "30%" in response.answer and "5%" in response.answer
    assert response.contradictions and response.generation_method == "multi_perspective"
    assert any(caveat.startswith("Sources disagree") for caveat in response.caveats)
    assert response.confidence_level != "high"  # a disagreement lowers confidence


def test_a_passage_quoting_other_sentences_is_not_a_disagreement() -> None:
    """An earlier answer quoting this passage and others (numbers in each) changes whole sentences, not one claim."""
    passage = "Flaky tests fail without code changes. We studied 7571 flaky tests in 22 projects."
    quoting = (
        "Flaky tests fail without code changes. Practitioners named 4 factors: 1) test quality, 2) code, 3) tools, "
        "4) infrastructure. We studied 7571 flaky tests in 22 projects."
    )
    a, b = _pair(passage, quoting, "rag", "memory")
    assert disagreement(a, b) is None
    assert disagreement(a, a.model_copy(update={"content": passage.replace("22 projects", "12 projects")}))
