"""The Flow's decisions with the real agents behind it: contradictions shown as perspectives, low confidence
reformulated at most twice, the deadline answered with what was gathered, noise refused without a search."""

from __future__ import annotations

import time
from pathlib import Path

from researchcrew.assistant import ResearchAssistant
from researchcrew.memory.store import MemoryStore
from researchcrew.settings import ConfidenceSettings
from researchcrew.testing.llm import FakeLLM
from tests.e2e.support import SpyTool, assert_every_claim_cited, evidence, offline_settings
from tests.e2e.test_llm_answers import CHUNKS, QUESTION, draft

POOLING_A = evidence(
    "pool-a",
    "The pooled test reaches a sensitivity of 95% on the screening cohort. Pooling samples improves screening "
    "throughput in large populations.",
    title="Pooling study A",
)
POOLING_B = evidence(
    "pool-b",
    "On the screening cohort, the pooled test's sensitivity is only 70%. We find that pooling samples does not "
    "improve screening throughput in large populations.",
    title="Pooling study B",
    source_type="arxiv",
)
OVERVIEW = evidence(
    "overview", "Group testing screens many samples with few tests by pooling them.", title="Group testing overview"
)


async def test_numeric_and_polarity_contradictions_are_presented_side_by_side(tmp_path: Path) -> None:
    tools = [SpyTool([POOLING_A, OVERVIEW]), SpyTool([POOLING_B], source_type="arxiv")]
    async with ResearchAssistant(offline_settings(tmp_path), tools=tools, remember=False) as assistant:
        response = await assistant.ask("Does pooling samples improve screening throughput?")

    assert response.answer_kind == "extractive"
    assert response.generation_method == "multi_perspective"
    kinds = {record.kind: record for record in response.contradictions}
    assert set(kinds) == {"numeric", "polarity"}
    for record in kinds.values():
        assert {record.chunk_id_a, record.chunk_id_b} == {"pool-a", "pool-b"}
    assert "70%" in kinds["numeric"].claim_a + kinds["numeric"].claim_b
    assert "95%" in kinds["numeric"].claim_a + kinds["numeric"].claim_b
    # Each disagreement is shown with both sides, each side attributed and citing its own source.
    number_of = {citation.chunk_id: citation.number for citation in response.citations}
    perspectives = [section for section in response.sections if section.perspective]
    assert len(perspectives) == 4
    for record in kinds.values():
        sides = [
            section
            for section in perspectives
            if any(claim.text in (record.claim_a, record.claim_b) for claim in section.claims)
        ]
        assert {section.perspective for section in sides} == {"Pooling study A (rag)", "Pooling study B (arxiv)"}
        cited = {n for section in sides for claim in section.claims for n in claim.citations}
        assert cited == {number_of["pool-a"], number_of["pool-b"]}
    assert response.answer.count("Sources disagree") == 2
    assert_every_claim_cited(response)


async def test_low_confidence_is_reformulated_twice_then_answered_with_uncertainty(tmp_path: Path) -> None:
    weak = [
        evidence("weak-1", "Group testing pools samples to screen many people with few tests.", relevance=0.32),
        evidence("weak-2", "Mutation testing injects faults to measure how good a test suite is.", relevance=0.3),
    ]
    tool = SpyTool(weak)
    events = []
    # Evidence this far off the question is normally not worth a reformulated search (see the next test); with the
    # floor at 0 every weak result is, which is what this test follows through.
    settings = offline_settings(tmp_path, confidence=ConfidenceSettings(reformulate_min_support=0.0))
    async with ResearchAssistant(settings, tools=[tool], remember=False) as assistant:
        async for item in assistant.stream("How do quantum computers factor large integers?"):
            events.append(item)
    response = events.pop()

    question = "How do quantum computers factor large integers?"
    assert len(tool.queries) == 3 and tool.queries[0] == question
    assert len(set(tool.queries)) == 3  # each reformulation searched something new
    assert response.reformulations == tool.queries[1:]
    assert response.answer_kind == "uncertainty" and response.confidence_level == "insufficient"
    assert all(f"“{query}”" in response.answer for query in tool.queries)  # says what was searched
    assert "Best matches (low relevance)" in response.answer
    assert [c.chunk_id for c in response.citations] == ["weak-1", "weak-2"]  # the best weak matches, cited
    decisions = [e.detail["decision"] for e in events if e.stage == "confidence" and e.status == "finished"]
    assert decisions == ["low_confidence", "low_confidence", "uncertain"]
    assert not [e for e in events if e.stage == "synthesize"]


async def test_off_topic_evidence_gets_the_uncertainty_answer_at_once(tmp_path: Path) -> None:
    """Evidence that shares words but not the subject (hot Jupiters, for a question about Jupiter's moons) is not
    answered from, whatever relevance its source claims."""
    off_topic = [
        evidence(
            "hot-jupiters",
            "We derive the frequencies of hot Jupiters with 3-5 day periods from the OGLE-III transit surveys.",
            relevance=0.98,
            title="Frequency of Hot Jupiters and Very Hot Jupiters from the OGLE-III Transit Surveys",
        )
    ]
    tool = SpyTool(off_topic)
    async with ResearchAssistant(offline_settings(tmp_path), tools=[tool], remember=False) as assistant:
        response = await assistant.ask("How much gallium is on Jupiter's moons?")

    # The evidence names one of the question's three subjects ("Jupiter"), so it supports the question at ~0.3:
    # weak enough never to be answered from, not so far off that a reworded search is pointless.
    assert tool.queries[0] == "How much gallium is on Jupiter's moons?" and len(tool.queries) <= 3
    assert response.answer_kind == "uncertainty" and response.confidence_level == "insufficient"
    assert response.final_reason.startswith("confidence_too_low_clarify: the best evidence supports the question")
    assert response.confidence < 0.45


async def test_slow_model_at_the_deadline_gives_a_partial_extractive_answer(tmp_path: Path) -> None:
    llm = FakeLLM([draft(("Too late to matter.", [1]))], delay_s=3)
    async with ResearchAssistant(
        offline_settings(tmp_path), tools=[SpyTool(CHUNKS)], llm=llm, remember=False
    ) as assistant:
        started = time.monotonic()
        response = await assistant.ask(QUESTION, deadline_s=1.5)
        elapsed = time.monotonic() - started

    assert elapsed < 3.5  # cut near the 1.5 s deadline, not after the model's 3 s
    assert response.partial
    assert response.answer_kind == "extractive"
    assert any("time limit" in caveat for caveat in response.caveats)
    assert_every_claim_cited(response)
    assert "Too late" not in response.answer


async def test_hung_source_is_cut_at_the_deadline_and_reported(tmp_path: Path) -> None:
    hung = SpyTool(
        [evidence("never", "This evidence arrives too late.")], delay_s=30, source_type="web", name="hung_web"
    )
    fast = SpyTool(CHUNKS)
    async with ResearchAssistant(offline_settings(tmp_path), tools=[fast, hung], remember=False) as assistant:
        started = time.monotonic()
        response = await assistant.ask(QUESTION, deadline_s=2.0)
        elapsed = time.monotonic() - started

    assert elapsed < 4.0
    assert hung.queries == [QUESTION]  # it was asked, and not waited for
    web = next(report for report in response.source_reports if report.source_type == "web")
    assert web.status == "failed" and web.failure is not None and web.failure.kind == "timeout"
    assert response.answer_kind == "extractive"
    assert {citation.chunk_id for citation in response.citations} <= {chunk.chunk_id for chunk in CHUNKS}
    assert any(caveat.startswith("web (hung_web)") for caveat in response.caveats)


async def test_incoherent_input_is_refused_politely_without_any_search(
    tmp_path: Path, memory_store: MemoryStore
) -> None:
    tool = SpyTool(CHUNKS)
    async with ResearchAssistant(offline_settings(tmp_path), tools=[tool], memory_store=memory_store) as assistant:
        refused = [
            await assistant.ask(text, user_id="ada")
            for text in ("sdfghjkl qwrtzpsd ;;;; ###", "   ", "?!?!?!?!?!?!?!?!")
        ]
        assert await assistant.flush_memory(timeout_s=60)
    history = await memory_store.history(user_id="ada", session_id=None)

    assert tool.queries == []
    assert history == []  # nothing to remember either
    for response in refused:
        assert response.answer_kind == "refusal"
        assert response.citations == [] and response.source_reports == []
        assert response.answer.startswith(("I could not make out", "Please ask"))
        assert response.caveats and response.caveats[0].startswith("Not researched:")
