"""Issue 17, item 10: facts the user stated answer questions about them, and the support gate judges memory evidence
on what it is (the user's statement about themself), not by word overlap with a research question.

No model here: the statement rules (memory/statements.py), the gate (pipeline/_support.py) with an embedder that
must not be called for memory it can judge by kind, the extractive answer, the citation label, the LLM prompt and
the clarification-reply rule."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from researchcrew.contracts.chunks import ContextChunk
from researchcrew.contracts.evaluator import FilteredContext, ScoredChunk
from researchcrew.contracts.query import Query
from researchcrew.contracts.synthesizer import SynthesizerInput
from researchcrew.memory.statements import personal_question, stated_answers, statements
from researchcrew.pipeline._support import EmbeddingSupport, relevance_support
from researchcrew.pipeline.clarify import looks_like_new_question
from researchcrew.pipeline.synthesize._citations import citation_for
from researchcrew.pipeline.synthesize.extractive import extractive_draft, stated_claims
from researchcrew.pipeline.synthesize.prompts import USER_STATEMENT_GUIDANCE, task_description
from researchcrew.settings import ConfidenceSettings

# (what the user said, questions it answers) — several phrasings of several kinds of fact.
FACTS = [
    (
        "my project code is BLUEFALCON-7731",
        [
            "what is my project code?",
            "What's my project code again?",
            "what did I say my project code was?",
            "remind me of my project code",
            "Can you remind me what my project code is?",
            "do you remember my project code?",
            "what is my code?",
            "What is my project codename?",
        ],
    ),
    ("call me Zed", ["what's my name?", "who am I?", "do you remember my name?", "what should you call me?"]),
    ("Hi, my name is Ada Lovelace.", ["what is my name?", "So, what's my name again?"]),
    (
        "our deadline is March 3, 2027",
        ["when is our deadline?", "what's my deadline?", "Remind me, what is our deadline?"],
    ),
    ("I'm using Postgres for the database", ["which database am I using?", "what database do we use?"]),
    ("we use Zotero as our reference manager", ["what reference manager do I use?", "which tool am I using?"]),
    ("BLUEFALCON-7731 is my project code.", ["what is my project code?"]),
    ("My project codename is BLUEFALCON-7731, what is metamorphic testing?", ["What is my project codename?"]),
]
FACT_CASES = [(said, asked) for said, questions in FACTS for asked in questions]

# Questions that are research, or about the conversation: no personal fact is asked for.
NOT_PERSONAL = [
    "What is metamorphic testing?",
    "what is my risk of heart disease if I smoke every day?",
    "what was my last question?",
    "How do I use Postgres for full-text search?",
]
# A statement that does not answer the question: another fact, or someone else's.
MISMATCHED = [
    ("my project code is BLUEFALCON-7731", "what is my favourite colour?"),
    ("call me Zed", "what's my dog's name?"),
    ("my project code is BLUEFALCON-7731", "what is my project?"),
    ("I'm using Postgres for the database", "what is my deadline?"),
    ("what is my project code?", "what is my project code?"),  # a question states nothing
    ("Can you suggest a code name for my project?", "what is my project code?"),
]


@pytest.mark.parametrize(("said", "asked"), FACT_CASES)
def test_a_statement_of_the_user_answers_questions_about_that_fact(said: str, asked: str) -> None:
    assert personal_question(asked) is not None, asked
    [statement] = stated_answers(said, asked)
    assert statement.text in said  # quoted as said, not rewritten


@pytest.mark.parametrize("question", NOT_PERSONAL)
def test_research_and_conversation_questions_are_not_personal(question: str) -> None:
    assert personal_question(question) is None


@pytest.mark.parametrize(("said", "asked"), MISMATCHED)
def test_a_statement_about_something_else_answers_nothing(said: str, asked: str) -> None:
    assert stated_answers(said, asked) == []


def test_a_reply_stored_in_parentheses_is_a_clause_of_its_own() -> None:
    """A message answering clarifying questions is stored as "<question> (<reply>)" (pipeline/conversation.py)."""
    said = statements("my project code is BLUEFALCON-7731 (call me Zed)")
    assert [s.text for s in said] == ["my project code is BLUEFALCON-7731", "call me Zed"]


def test_one_message_can_state_several_facts() -> None:
    said = statements("Hi, my name is Zed and my project code is X-17; our deadline is Friday.")
    assert [(s.text, s.value) for s in said] == [
        ("my name is Zed", "Zed"),
        ("my project code is X-17", "X-17"),
        ("our deadline is Friday", "Friday"),
    ]


# ---- the support gate -------------------------------------------------------------------------------------------

T1 = datetime(2026, 1, 5, tzinfo=UTC)


def said_chunk(
    statement: str, *, response_id: str = "r1", same_session: bool = True, when: datetime = T1
) -> ContextChunk:
    """A memory chunk quoting the user, as tools/memory_recall.py builds it."""
    return ContextChunk(
        chunk_id=f"memory:said:{response_id}:0",
        source_type="memory",
        content=f'You said: "{statement}".',
        semantic_relevance=0.95,
        title="What you said earlier in this conversation",
        source_id=response_id,
        source_date=when,
        metadata={
            "recalled_as": "user_statement",
            "speaker": "user",
            "statement": statement,
            "session_id": "s1" if same_session else "s0",
            "same_session": same_session,
        },
        tool_name="memory_recall",
    )


def exchange_chunk(
    question: str, answer: str, *, answer_kind: str = "extractive", relevance: float = 0.81
) -> ContextChunk:
    """An earlier exchange as memory recall returns it (the user's question and the assistant's answer)."""
    return ContextChunk(
        chunk_id="memory:r2",
        source_type="memory",
        content=f"The user asked earlier in this conversation: {question}\nThe answer given then: {answer}",
        semantic_relevance=relevance,
        title=f"Earlier question: {question}",
        source_id="r2",
        metadata={"question": question, "answer_kind": answer_kind, "same_session": True, "session_id": "s1"},
        tool_name="memory_recall",
    )


class NoEmbedder:
    """The gate must judge memory by what it is: being asked to embed it is a failure of this test."""

    def embed_query(self, text: str) -> Any:
        raise AssertionError(f"embedded the question {text!r}")

    def embed_documents(self, texts: Sequence[str]) -> Any:
        raise AssertionError(f"embedded {list(texts)!r}")


async def test_the_gate_judges_the_users_statement_as_what_it_is() -> None:
    """The issue's case: the statement got 'no_answer' (the earlier reply was clarifying questions) and support 0."""
    settings = ConfidenceSettings()
    chunk = said_chunk("my project code is BLUEFALCON-7731")
    for scorer in (EmbeddingSupport(NoEmbedder(), settings), relevance_support):  # type: ignore[arg-type]
        [support] = (await scorer("what is my project code?", [chunk])).values()
        assert support.basis == "user_statement"
        assert support.score == settings.stated_fact_support >= settings.answer_min_support


async def test_the_assistants_earlier_answer_is_no_evidence_of_the_users_facts() -> None:
    """Only the assistant said it: high word overlap and recall relevance, and still no support."""
    reply = exchange_chunk(
        "Can you suggest a code name for my project?", "Your project code could be REDFOX-12: it is short."
    )
    statement = said_chunk("my project code is BLUEFALCON-7731")
    supports = await EmbeddingSupport(NoEmbedder())("what is my project code?", [reply, statement])  # type: ignore[arg-type]
    assert (supports[reply.chunk_id].basis, supports[reply.chunk_id].score) == ("not_stated", 0.0)
    assert supports[statement.chunk_id].basis == "user_statement"
    alone = await relevance_support("what is my project code?", [reply])
    assert alone[reply.chunk_id].score == 0.0


async def test_a_statement_of_another_fact_does_not_support_the_question() -> None:
    chunk = said_chunk("my project code is BLUEFALCON-7731")
    [support] = (await relevance_support("what is my favourite colour?", [chunk])).values()
    assert (support.basis, support.score) == ("not_stated", 0.0)


async def test_an_earlier_answer_supports_no_research_question() -> None:
    """The assistant's earlier answer is context, not evidence (issue 20): it supports a research question not at
    all, and is not even embedded."""

    class Recording:
        def __init__(self) -> None:
            self.texts: list[str] = []

        def embed_query(self, text: str) -> Any:
            return np.ones(4, dtype=np.float32) / 2

        def embed_documents(self, texts: Sequence[str]) -> Any:
            self.texts.extend(texts)
            return np.ones((len(texts), 4), dtype=np.float32) / 2

    embedder = Recording()
    chunk = exchange_chunk("What is metamorphic testing?", "It checks relations between outputs.")
    [support] = (await EmbeddingSupport(embedder)("How does metamorphic testing work?", [chunk])).values()  # type: ignore[arg-type]
    assert (support.basis, support.score) == ("context", 0.0) and not embedder.texts


# ---- the answer ---------------------------------------------------------------------------------------------------


def synthesizer_input(question: str, chunks: list[ContextChunk]) -> tuple[SynthesizerInput, list[ScoredChunk]]:
    scored = [
        ScoredChunk(chunk=chunk, quality_score=0.8, source_reputation=0.7, recency=1.0, relevance=0.9)
        for chunk in chunks
    ]
    request = SynthesizerInput(
        filtered_context=FilteredContext(query_text=question, chunks=scored),
        original_query=Query(text=question, user_id="ada", session_id="s1"),
    )
    return request, scored


def test_the_extractive_answer_quotes_the_user_newest_first() -> None:
    older = said_chunk("my project code is BLUEFALCON-7731", response_id="r1", when=datetime(2026, 1, 1, tzinfo=UTC))
    newer = said_chunk("my project code is REDFOX-12", response_id="r3", when=datetime(2026, 1, 9, tzinfo=UTC))
    other = exchange_chunk("What is metamorphic testing?", "It checks relations between outputs.")
    request, scored = synthesizer_input("what is my project code?", [other, older, newer])

    claims = extractive_draft(request, scored).sections[0].claims

    assert [(c.text, c.citations) for c in claims] == [
        ('You said: "my project code is REDFOX-12".', [3]),
        ('Before that, you said: "my project code is BLUEFALCON-7731".', [2]),
    ]
    assert stated_claims("What is metamorphic testing?", scored) == []


def test_the_citation_says_the_user_said_it() -> None:
    here = citation_for(1, said_chunk("call me Zed"))
    there = citation_for(2, said_chunk("call me Zed", same_session=False))
    assert here.location == "you said, earlier in this conversation"
    assert there.location == "you said, in an earlier conversation (session s0)"
    assert citation_for(3, exchange_chunk("What is BM25?", "A ranking function.")).location == (
        "earlier in this conversation"
    )


def test_the_llm_prompt_marks_the_users_statement() -> None:
    request, scored = synthesizer_input(
        "what is my project code?",
        [said_chunk("my project code is BLUEFALCON-7731"), exchange_chunk("What is BM25?", "A ranking function.")],
    )
    prompt = task_description(request, scored)
    first, second = prompt.split("<<<EVIDENCE 2>>>", 1)
    assert "speaker: the user, about themself (you said, earlier in this conversation)" in first
    assert "speaker:" not in second.split("<<<END EVIDENCE 2>>>")[0]  # the assistant's answer is not marked
    assert USER_STATEMENT_GUIDANCE in prompt
    plain, plain_scored = synthesizer_input("What is BM25?", [exchange_chunk("What is BM25?", "A ranking function.")])
    assert USER_STATEMENT_GUIDANCE not in task_description(plain, plain_scored)


def test_a_question_about_the_users_facts_is_never_a_reply_to_clarifying_questions() -> None:
    """'my project code is X' got clarifying questions; merging the next question into it searched the statement."""
    assert looks_like_new_question("what is my project code?", "my project code is BLUEFALCON-7731")
    assert not looks_like_new_question("since 2019, on compilers", "What is metamorphic testing?")
