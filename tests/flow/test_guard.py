"""The input guard refuses only what no search could answer, and never crashes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from researchcrew.contracts.query import MAX_QUERY_CHARS
from researchcrew.pipeline._guard import check_question
from researchcrew.pipeline.reformulate import expanded_query, keyword_query

REAL_QUESTIONS = [
    "BERT?",
    "What is retrieval-augmented generation?",
    "How does RRF fuse BM25 and dense rankings in Milvus?",
    "Compare GPT-4 and Llama-3 on MMLU (5-shot).",
    "Wie funktioniert Aufmerksamkeit in Transformern?",
    "量子コンピュータとは何ですか",
    "arXiv 2104.12255 summary",
    "Effect of vitamin D on COVID-19 severity in RCTs",
    "strengths of CNNs",
]


@pytest.mark.parametrize("text", REAL_QUESTIONS)
def test_real_questions_pass(text: str) -> None:
    assert check_question(text).allowed


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("", "empty"),
        ("   \n\t ", "empty"),
        ("x" * (MAX_QUERY_CHARS + 1), "too_long"),
        ("sdfghjkl qwrtzpsd", "incoherent"),
        ("#### $$$ %%% 1234 !!!", "incoherent"),
        ("aaaaaaaaaaaaaaaaa", "incoherent"),
        ("what is \x00\x07 this", "incoherent"),
    ],
)
def test_noise_is_refused_politely(text: str, kind: str) -> None:
    verdict = check_question(text)
    assert not verdict.allowed
    assert verdict.kind == kind
    assert verdict.reason and verdict.reply
    assert "please" in verdict.reply.lower() or "could you" in verdict.reply.lower()


@given(st.text(max_size=300))
def test_guard_never_raises(text: str) -> None:
    verdict = check_question(text)
    assert verdict.allowed or verdict.reply


@given(
    st.lists(
        st.sampled_from(["attention", "transformer", "model", "dense", "retrieval", "BM25", "is", "the"]),
        min_size=1,
        max_size=12,
    )
)
def test_sentences_of_real_words_pass(words: list[str]) -> None:
    assert check_question(" ".join(words) + "?").allowed


def test_keyword_query_drops_question_words_and_duplicates() -> None:
    assert keyword_query("What is the role of attention in the Transformer attention heads?") == (
        "role attention Transformer heads"
    )


def test_expanded_query_adds_salient_evidence_terms() -> None:
    evidence = ["Dense retrieval with dual encoders.", "Dual encoders embed queries.", "Encoders and retrieval."]
    assert expanded_query("what is dense retrieval", evidence) == "dense retrieval encoders dual"
