"""The shapes crewAI tools answer in, read into passages: one parser per shape, chosen from the output."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from researchcrew.tools._crewai_results import (
    MAX_PASSAGES,
    PASSAGE_CHARS,
    Passage,
    UnreadableResult,
    parse_result,
)

# Recorded shapes (abridged) of crewai-tools' search tools.
TAVILY = json.dumps(
    {
        "query": "metamorphic testing",
        "results": [
            {
                "title": "Metamorphic testing",
                "url": "https://t.example/mt",
                "content": "Metamorphic relations check outputs of related inputs.",
                "score": 0.83,
                "published_date": "2021-05-03",
            }
        ],
    },
    indent=2,
)
BRAVE = json.dumps({"web": {"results": [{"title": "F", "url": "https://b.example", "description": "Flaky tests."}]}})
EXA = [{"title": "Mutation", "url": "https://e.example", "text": "Mutants.", "publishedDate": "2020-01-01T00:00:00Z"}]
PYTHON_REPR = str({"organic": [{"title": "Q", "link": "https://s.example", "snippet": "QuickCheck, 1999."}]})


def test_a_tavily_answer_keeps_title_url_date_and_its_own_score() -> None:
    [passage] = parse_result(TAVILY, "metamorphic testing")
    assert (passage.title, passage.url, passage.score) == ("Metamorphic testing", "https://t.example/mt", 0.83)
    assert passage.date is not None and passage.date.year == 2021


@pytest.mark.parametrize(
    ("output", "url"),
    [(BRAVE, "https://b.example"), (EXA, "https://e.example"), (PYTHON_REPR, "https://s.example")],
    ids=["nested-json", "list-of-records", "python-repr"],
)
def test_search_records_are_found_wherever_the_api_puts_them(output: Any, url: str) -> None:
    assert [passage.url for passage in parse_result(output, "q")] == [url]


def test_a_document_search_answer_is_one_passage_per_block() -> None:
    output = "Relevant Content:\nFirst passage about QuickCheck.\n\n\n\nSecond passage about mutants.\n"
    passages = parse_result(output, "q")
    assert [p.text for p in passages] == ["First passage about QuickCheck.", "Second passage about mutants."]


def test_page_text_is_cut_into_passages_and_the_ones_with_the_question_s_words_come_first() -> None:
    filler = "Unrelated words fill this paragraph about gardening and weather. " * 40
    page = f"{filler}\n\n{filler}\n\nEquivalent mutants are the main limitation of mutation testing.\n\n{filler}"
    passages = parse_result(page, "limitation of mutation testing")
    assert "Equivalent mutants" in passages[0].text
    assert all(len(p.text) <= PASSAGE_CHARS for p in passages)
    assert len(passages) > 1


def test_a_named_parser_is_used_and_an_unknown_name_is_refused() -> None:
    assert parse_result("Plain text.", "q", "page_text")[0].text == "Plain text."
    with pytest.raises(ValueError, match="unknown parser 'csv'"):
        parse_result("x", "q", "csv")


def test_a_parser_function_overrides_the_choice() -> None:
    def one(output: Any, query: str) -> list[Passage]:
        return [Passage(text=f"{query}: {output}")]

    assert parse_result({"anything": 1}, "q", one) == [Passage(text="q: {'anything': 1}")]


@pytest.mark.parametrize("output", [{"status": "ok"}, 42, None, "", [1, 2, 3], {"results": "text"}])
def test_output_without_results_or_text_is_unreadable(output: Any) -> None:
    with pytest.raises(UnreadableResult):
        parse_result(output, "q")


def test_what_one_call_contributes_is_bounded() -> None:
    records = [{"title": f"t{n}", "url": f"https://x.example/{n}", "snippet": "s"} for n in range(500)]
    assert len(parse_result({"results": records}, "q")) == MAX_PASSAGES


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)


@given(output=json_values | json_values.map(json.dumps))
def test_any_output_gives_passages_or_unreadable_never_another_error(output: Any) -> None:
    try:
        passages = parse_result(output, "query words")
    except UnreadableResult:
        return
    assert all(isinstance(p, Passage) and p.text.strip() for p in passages)
