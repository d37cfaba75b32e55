"""Issue 20: a passage can paraphrase a question's words, not the names it uses. Near-miss questions about a
neighbouring thing ("How many GraphQL API testing tools were compared?" over a REST API study) were answered from the
neighbour at confidence 0.70; a passage lacking a question's names now supports it less."""

from __future__ import annotations

from typing import Any

import pytest

from researchcrew.contracts import ContextChunk
from researchcrew.pipeline._support import EmbeddingSupport, names_found, question_names, relevance_support
from researchcrew.settings import ConfidenceSettings


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("Who wrote QuickCheck?", ["quickcheck"]),
        ("How many GraphQL API testing tools were compared?", ["graphql", "api"]),
        ("Which simulator was used to test Tesla Autopilot's pedestrian detection?", ["tesla", "autopilot"]),
        ("What score does DeepSeek-R1 reach on MATH500?", ["deepseek-r1", "math500"]),
        ("How much gallium is on Jupiter\u2019s moons?", ["jupiter"]),
        ("What is the main limitation of mutation testing?", []),
        ("Mutation testing is expensive.", []),  # a capitalised first word is no name
        ("ALDH1 expression predicts poor prognosis.", ["aldh1"]),  # letters and digits are, even first
    ],
)
def test_question_names(question: str, names: list[str]) -> None:
    assert question_names(question) == names


def _chunk(chunk_id: str, question: str, text: str, *, title: str = "", dense: float = 0.7) -> ContextChunk:
    metadata: dict[str, Any] = {"query": question, "scores": {"dense": dense}}
    return ContextChunk(
        chunk_id=chunk_id,
        source_type="rag",
        content=text,
        semantic_relevance=0.8,
        title=title,
        metadata=metadata,
        tool_name="rag_search",
    )


def test_names_found_reads_title_text_and_compound_parts() -> None:
    question = "Does anti-IL-2 therapy help? What did QuickCheck do?"
    names = question_names(question)
    assert names == ["anti-il-2", "quickcheck"]
    assert names_found(names, _chunk("a", question, "Treatment with anti IL 2 antibodies.", title="QuickCheck")) == 1.0
    assert names_found(names, _chunk("b", question, "QuickCheck, released in 1999.")) == 0.5


class _NoModel:
    """The knowledge-base hits below carry their search cosine, so support must not embed anything."""

    def embed_query(self, text: str) -> Any:
        raise AssertionError("not expected")

    embed_documents = embed_query


async def test_a_passage_lacking_the_questions_name_supports_it_less() -> None:
    question = "How many GraphQL API testing tools were compared in the empirical study?"
    neighbour = _chunk(
        "rest:0", question, "We compared 10 state-of-the-art REST API testing tools in an empirical study."
    )
    named = _chunk(
        "gql:0", question, "We compared 10 state-of-the-art GraphQL API testing tools in an empirical study."
    )

    support = await EmbeddingSupport(_NoModel(), ConfidenceSettings())(question, [neighbour, named])  # type: ignore[arg-type]
    unpenalised = await EmbeddingSupport(_NoModel(), ConfidenceSettings(name_penalty=1.0))(  # type: ignore[arg-type]
        question, [neighbour, named]
    )

    assert support["gql:0"].score == unpenalised["gql:0"].score  # holds every name: untouched
    assert support["rest:0"].score < unpenalised["rest:0"].score
    assert support["rest:0"].score == pytest.approx(unpenalised["rest:0"].score * (0.6 + 0.4 * 0.5), abs=1e-3)
    assert support["gql:0"].score > support["rest:0"].score  # before, the two were equal


async def test_without_a_model_the_same_rule_applies() -> None:
    question = "Who wrote libFuzzer?"
    chunk = _chunk("afl:0", question, "American fuzzy lop was written by Michal Zalewski.")
    scored = await relevance_support(question, [chunk])
    assert scored["afl:0"].score == pytest.approx(0.8 * 0.6)
