"""The extractive synthesizer: quoted, cited, labelled, no model involved."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from researchcrew.contracts.evaluator import ScoredChunk
from researchcrew.pipeline.synthesize._citations import find_markers
from researchcrew.pipeline.synthesize._llm_writer import Synthesizer
from researchcrew.pipeline.synthesize._rendering import EXTRACTIVE_NOTICE
from researchcrew.pipeline.synthesize.extractive import (
    ExtractiveSynthesizer,
    quotable_sentences,
)
from researchcrew.text.questions import asks_about_the_conversation
from tests.conftest import PROJECT_ROOT
from tests.synthesizer.builders import contradiction, evidence, request, scored


def claims_of(output):  # type: ignore[no-untyped-def]
    return [claim for section in output.final_response.sections for claim in section.claims]


async def test_every_sentence_is_quoted_from_its_cited_chunk_and_labelled_extractive() -> None:
    req = request(evidence(3))
    output = await ExtractiveSynthesizer().run(req)
    response = output.final_response

    assert response.answer_kind == "extractive"
    assert response.answer.startswith(EXTRACTIVE_NOTICE)
    claims = claims_of(output)
    assert len(claims) >= 3
    by_number = {c.number: c.chunk_id for c in response.citations}
    contents = {s.chunk.chunk_id: s.chunk.content for s in req.filtered_context.chunks}
    for claim in claims:
        assert len(claim.citations) == 1
        assert claim.text in contents[by_number[claim.citations[0]]], "each sentence is quoted from the chunk it cites"
    # every rendered bullet carries a marker
    bullets = [line for line in response.answer.splitlines() if line.startswith("- ")]
    assert len(bullets) == len(claims) and all(find_markers(line) for line in bullets)
    assert response.citation_stats.removed == 0 and response.citation_stats.valid == len(claims)


async def test_sentences_about_the_query_come_first_and_duplicates_are_skipped() -> None:
    chunks = [
        scored(1, "Water boils at 100 degrees Celsius at sea level. The sky is often blue in summer afternoons."),
        scored(2, "Water boils at 100 degrees Celsius at sea level. Tea tastes best with fresh water boiled once."),
    ]
    output = await ExtractiveSynthesizer().run(request(chunks, question="At what temperature does water boil?"))
    texts = [claim.text for claim in claims_of(output)]
    assert texts.count("Water boils at 100 degrees Celsius at sea level.") == 1
    assert not any("sky" in text for text in texts), "a sentence sharing no query term is not picked"


def _recalled(number: int, question: str, answer: str) -> ScoredChunk:
    """A memory chunk as tools/memory_recall.py builds it: the earlier question restated, then the answer."""
    content = f"The user asked earlier in this conversation (2026-11-24): {question}\nThe answer given then: {answer}"
    chunk = scored(number, content, source_type="memory", title=f"Earlier question: {question}", quality=0.9)
    chunk.chunk.url = None
    return chunk


async def test_a_repeated_question_is_answered_from_the_sources_not_from_the_earlier_answer() -> None:
    question = "At what temperature does water boil at sea level?"
    earlier = _recalled(1, question, "Water boils at 100 degrees Celsius at sea level [1].")
    paper = scored(2, "Water boils at 100 degrees Celsius at sea level. Boiling needs vapour pressure to match air.")
    output = await ExtractiveSynthesizer().run(request([earlier, paper], question=question))

    cited = {citation.source_type for citation in output.final_response.citations}
    assert cited == {"web"}, "first-hand evidence is quoted and cited; the memory that restates it is not"
    assert not any("asked earlier" in claim.text for claim in claims_of(output))


async def test_memory_is_quoted_when_no_first_hand_source_is_on_topic() -> None:
    question = "Which dataset did we pick for the fact-checking study?"
    earlier = _recalled(1, "Which dataset should the fact-checking study use?", "SciFact, for its expert claims.")
    unrelated = scored(2, "Pressure cookers raise the boiling point of water to about 120 degrees Celsius.")
    output = await ExtractiveSynthesizer().run(request([unrelated, earlier], question=question))

    assert claims_of(output), "an on-topic earlier answer is better than an off-topic source"
    assert {citation.source_type for citation in output.final_response.citations} == {"memory"}


async def test_a_question_about_the_conversation_is_answered_from_memory() -> None:
    question = "What did I ask about boiling water before?"
    earlier = _recalled(1, "At what temperature does water boil at sea level?", "At 100 degrees Celsius [1].")
    paper = scored(2, "Water boils at 100 degrees Celsius at sea level. Boiling needs vapour pressure to match air.")
    output = await ExtractiveSynthesizer().run(request([earlier, paper], question=question))

    # the conversation is the first-hand source here; the paper shares the topic but not what was asked
    assert {citation.source_type for citation in output.final_response.citations} == {"memory"}
    assert any("asked earlier" in claim.text for claim in claims_of(output))


@pytest.mark.parametrize(
    ("question", "about_the_conversation"),
    [
        ("What did I ask about metamorphic testing before?", True),
        ("Have we already discussed SciFact?", True),
        ("Which dataset did you recommend last time?", True),
        ("Remind me what you said about BM25", True),
        ("Summarise our previous conversation", True),
        ("What is metamorphic testing and which problem does it address?", False),
        ("What happened before the Big Bang?", False),
        ("What can we say about protein folding?", False),
        ("Which methods did the authors ask participants to rank?", False),
    ],
)
def test_questions_about_the_conversation_are_recognised(question: str, about_the_conversation: bool) -> None:
    assert asks_about_the_conversation(question) is about_the_conversation


async def test_concise_answers_are_short_and_detailed_ones_longer() -> None:
    chunks = evidence(3)
    concise = await ExtractiveSynthesizer().run(request(chunks, response_format="concise"))
    detailed = await ExtractiveSynthesizer().run(request(chunks, response_format="detailed"))
    assert 1 <= len(claims_of(concise)) <= 3
    assert len(claims_of(detailed)) > len(claims_of(concise))
    assert len(concise.final_response.sections) == 1 and concise.final_response.sections[0].heading == ""
    # detailed answers are grouped by source document, titled after it
    headings = [section.heading for section in detailed.final_response.sections]
    assert len(headings) >= 2 and all(heading.startswith(("Boiling", "Phase", "Kitchen")) for heading in headings)


async def test_max_length_is_honoured() -> None:
    output = await ExtractiveSynthesizer().run(request(evidence(3), max_words=50))
    words = sum(len(claim.text.split()) for claim in claims_of(output))
    assert 0 < words <= 50


async def test_sections_off_gives_one_untitled_section() -> None:
    output = await ExtractiveSynthesizer().run(request(evidence(3), include_sections=False))
    assert [section.heading for section in output.final_response.sections] == [""]
    assert "## " not in output.final_response.answer


async def test_contradictions_are_shown_as_perspectives_with_both_sides_quoted_and_cited() -> None:
    record = contradiction("chunk-1", "chunk-3")
    output = await ExtractiveSynthesizer().run(request(evidence(3), contradictions=[record]))
    response = output.final_response
    assert output.generation_method == response.generation_method == "multi_perspective"
    perspectives = [section for section in response.sections if section.perspective]
    assert len(perspectives) == 2
    cited = {response.citations[c.citations[0] - 1].chunk_id: c.text for s in perspectives for c in s.claims}
    assert cited == {"chunk-1": record.claim_a, "chunk-3": record.claim_b}
    assert response.contradictions == [record]
    assert any("disagree" in caveat for caveat in response.caveats)
    assert "_Perspective: " in response.answer


async def test_a_sources_own_footnote_markers_never_become_citations() -> None:
    chunks = [scored(1, "Water boils at 100 degrees Celsius at sea level [12]. It boils lower at altitude [3][4].")]
    output = await ExtractiveSynthesizer().run(request(chunks, question="When does water boil at altitude?"))
    assert [c.chunk_id for c in output.final_response.citations] == ["chunk-1"]
    assert all(claim.citations == [1] for claim in claims_of(output))
    assert "[12]" not in output.final_response.answer


async def test_no_evidence_gives_an_uncertainty_answer_without_citations() -> None:
    output = await ExtractiveSynthesizer().run(request([]))
    assert output.final_response.answer_kind == "uncertainty"
    assert output.final_response.citations == [] and output.final_response.confidence_level == "insufficient"


def test_sentence_splitting_respects_abbreviations_and_markdown() -> None:
    text = "# Title\nSmith et al. found a drop of 3.4 °C, e.g. in Denver. Fig. 2 shows it.\n- A bullet point here.\n"
    assert quotable_sentences(text) == [
        "Smith et al. found a drop of 3.4 °C, e.g. in Denver.",
        "Fig. 2 shows it.",
        "A bullet point here.",
    ]


async def test_a_quotation_is_quoted_whole_with_its_closing_mark() -> None:
    content = (
        'Vaswani and colleagues call the core mechanism "self-attention." It relates every token to every other '
        "token in one step. Earlier models (e.g. LSTMs) read tokens one at a time."
    )
    output = await ExtractiveSynthesizer().run(request([scored(1, content)], question="What is self-attention?"))
    texts = [claim.text for claim in claims_of(output)]
    assert 'Vaswani and colleagues call the core mechanism "self-attention."' in texts
    assert all(text in content for text in texts), "every quote is a verbatim piece of the source"


def test_without_an_llm_crewai_is_never_imported_and_nothing_is_sent() -> None:
    """In a fresh interpreter: the no-LLM path answers without importing crewAI or opening any socket."""
    script = textwrap.dedent(
        """
        import asyncio, socket, sys
        def refuse(*args, **kwargs):
            raise AssertionError("a socket was opened")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        from researchcrew.pipeline.synthesize._llm_writer import Synthesizer
        from researchcrew.llm import build_llm
        from researchcrew.settings import LLMSettings
        from tests.synthesizer.builders import request
        agent = Synthesizer(build_llm(LLMSettings()))
        output = asyncio.run(agent.run(request()))
        assert output.final_response.answer_kind == "extractive", output
        print("crewai" in sys.modules, any(m.startswith("openai") for m in sys.modules))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False"]


async def test_synthesizer_agent_without_llm_answers_extractively() -> None:
    output = await Synthesizer(None).run(request())
    assert output.final_response.answer_kind == "extractive"
    assert re.search(r"\[\d+\]", output.final_response.answer)


@pytest.mark.parametrize(
    ("question", "content", "answer"),
    [
        (
            "What are the limitations of mutation testing?",
            "Mutation testing measures the quality of a test suite by introducing mutants. Mutation testing tools run "
            "the test suite against every mutant. Mutation testing is popular in research on test suite quality. "
            "The main drawback is equivalent mutants, which no test can ever kill.",
            "The main drawback is equivalent mutants, which no test can ever kill.",
        ),
        (
            "What are its limitations?",  # a follow-up researched as asked: only the aspect word is left
            "Equivalent mutants are the main limitation: no test can kill them, and deciding it is undecidable. "
            "Mutation testing measures the quality of a test suite by introducing small changes.",
            "Equivalent mutants are the main limitation: no test can kill them, and deciding it is undecidable.",
        ),
        (
            "What are the benefits of property-based testing?",
            "Property-based testing generates many inputs for each property. Property-based testing frameworks exist "
            "for Haskell, Python and Java. Property-based testing needs generators for every input type. Its main "
            "benefit is finding edge cases that hand-written examples miss.",
            "Its main benefit is finding edge cases that hand-written examples miss.",
        ),
        (
            "Why do tests become flaky?",
            "Flaky tests are tests that pass and fail on the same code. Flaky tests erode trust in the test suite. "
            "Teams often quarantine flaky tests for a while. Most of them fail because of asynchronous waits and "
            "shared state.",
            "Most of them fail because of asynchronous waits and shared state.",
        ),
    ],
)
async def test_the_sentence_naming_the_aspect_asked_for_is_quoted_first(
    question: str, content: str, answer: str
) -> None:
    """Limitations, advantages, causes (issue 20): the answering sentence names the aspect in a synonym or the
    singular and may share no other word with the question; it is quoted, first."""
    output = await ExtractiveSynthesizer().run(
        request([scored(1, content)], question=question, response_format="concise")
    )
    texts = [claim.text for claim in claims_of(output)]
    assert texts and texts[0] == answer, texts
