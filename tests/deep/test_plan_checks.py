"""Plans checked against the sources (issue 21 item 1): each candidate sub-question is searched as its research will
search it and kept only when its best three documents are on the topic, hold one of its own facet's documents and
share at most one with every sub-question kept before it; a candidate that fails is worded again with what sets its
facet apart, or dropped, and a topic with few documents gets a shorter plan that says why."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Sequence

import pytest

from researchcrew.contracts import ContextChunk
from researchcrew.deep._facet_search import ranked_documents, searched_facets
from researchcrew.deep._facets import Facet, Judgement, artefacts, draft_facets, select_facets
from researchcrew.deep._plan import llm_plan, rule_plan, topic_of
from researchcrew.testing import FakeLLM
from tests.deep.test_plan_facets import DemoProbe
from tests.e2e.support import shared_embedder

# Broad questions over the demo corpus that are not among benchmarks/data/deep_plan_questions.jsonl.
BROAD = [
    "How do researchers test deep learning models?",
    "What is known about the testing of games?",
    "How are test cases generated from models?",
]
# Topics the demo corpus holds two or three documents on.
SMALL = ["How are smart contracts tested?", "How are digital twins tested?"]


def _chunk(key: str, title: str, text: str) -> ContextChunk:
    return ContextChunk(
        chunk_id=key,
        source_type="rag",
        content=text,
        title=title,
        source_id=key,
        semantic_relevance=0.8,
        tool_name="corpus_search",
    )


POOLING = [
    _chunk("a", "Pooled testing designs", "Pooled testing screens many samples with few tests by mixing samples."),
    _chunk("b", "Dilution in large pools", "Dilution lowers the sensitivity of pooled testing in large pools."),
    _chunk("c", "Dorfman two-stage screening", "Dorfman screening retests the members of positive pools."),
    _chunk("d", "Reagent cost of pooling", "Pooling saves reagents and laboratory time during screening campaigns."),
]


def test_a_candidate_that_reads_a_kept_facets_evidence_is_worded_again_and_dropped_when_no_wording_fits() -> None:
    draft = draft_facets("What is known about pooled testing?", "pooled testing", POOLING)
    assert draft is not None
    draft = dataclasses.replace(
        draft,
        groups=(
            ((0,), ("Pooled testing designs",)),
            ((1,), ("Dilution", "large pools")),
            ((2,), ("Dorfman", "two-stage screening")),
        ),
    )
    asked: list[str] = []

    def judge(wording: str) -> Judgement:
        asked.append(wording)
        text = wording.lower()
        if "dorfman" in text and "notably" in text:
            return ("c", "e", "d"), True  # the distinctive wording finds its own document first
        if "dorfman" in text or "two-stage" in text:
            return ("a", "b", "c"), True  # the topic's words pull the central documents
        if "dilution" in text:
            return ("b", "a", "d"), True
        return ("a", "d", "b"), True

    selection = select_facets(draft, max_facets=8, top_count=3, max_shared=1, max_checks=50)
    try:
        wording = next(selection)
        while True:
            wording = selection.send(judge(wording))
    except StopIteration as done:
        facets = done.value
    # "Dilution" shares two of its three documents with the first facet in every wording: dropped, each tried once.
    assert [facet.keys for facet in facets] == [("a",), ("c",)]
    dilution = [text for text in asked if "dilution" in text.lower()]
    assert len(dilution) == len(set(dilution)) >= 2  # worded again (with "large pools"), each wording once
    assert facets[1].question == next(text for text in asked if "notably" in text and "dorfman" in text.lower())
    assert facets[1].top_evidence == ("c", "e", "d")
    assert all(artefacts(facet.question) == [] for facet in facets)


def test_off_topic_evidence_rejects_a_candidate_and_checks_are_bounded() -> None:
    draft = draft_facets("What is known about pooled testing?", "pooled testing", POOLING)
    assert draft is not None
    selection = select_facets(draft, max_facets=8, top_count=3, max_shared=1, max_checks=3)
    judged = 0
    try:
        next(selection)
        while True:
            judged += 1
            selection.send((("a", "b"), False))  # never on topic
    except StopIteration as done:
        assert done.value == []
    assert judged == 3


@pytest.fixture(scope="module")
def demo_probe() -> DemoProbe:
    return DemoProbe(shared_embedder())


async def _checked_plan(demo_probe: DemoProbe, question: str) -> tuple[list[tuple[str, ...]], list[Facet]]:
    async def search(text: str) -> Sequence[ContextChunk]:
        return demo_probe(text, 12)

    probe = demo_probe(question)
    facets = await searched_facets(
        question, topic_of(question), probe, search=search, max_facets=8, embedder=demo_probe.embedder
    )
    tops = [tuple(key for key, _ in ranked_documents(demo_probe(facet.question, 12))[:3]) for facet in facets]
    return tops, list(facets)


@pytest.mark.parametrize("question", BROAD)
async def test_each_checked_sub_question_retrieves_its_facets_documents_and_not_the_others(
    demo_probe: DemoProbe, question: str
) -> None:
    tops, facets = await _checked_plan(demo_probe, question)
    assert len(facets) >= 2
    for facet, top in zip(facets, tops, strict=True):
        assert set(facet.keys) & set(top), facet.question  # searched again: its own documents come back
        assert "memory-1" not in top
    for first, second in itertools.combinations(tops, 2):
        assert len(set(first) & set(second)) <= 1


@pytest.mark.parametrize("question", SMALL)
async def test_a_small_topic_gets_a_short_plan_that_says_why(demo_probe: DemoProbe, question: str) -> None:
    tops, facets = await _checked_plan(demo_probe, question)
    plan = rule_plan(question, None, max_items=8, facets=facets, checked=True)
    assert 1 <= len(plan.items) <= 2
    assert "not 8" in plan.note or plan.note.startswith("One sub-question")
    for first, second in itertools.combinations(tops, 2):
        assert len(set(first) & set(second)) <= 1
    assert all(artefacts(item.question) == [] for item in plan.items)


async def test_the_models_prompt_gets_the_checked_facets_and_how_many_there_are(demo_probe: DemoProbe) -> None:
    question = "How are digital twins tested?"
    _, facets = await _checked_plan(demo_probe, question)
    reply = json.dumps({"sub_questions": [{"question": "How are digital twins of industrial processes tested?"}]})
    llm = FakeLLM([reply])
    await llm_plan(llm, question, None, demo_probe(question), max_items=8, facets=facets)
    prompt = llm.calls[0].messages[1]["content"]
    assert "<<<FACETS FOUND>>>" in prompt and all(facet.label in prompt for facet in facets)
    assert f"{len(facets)} facet" in prompt
