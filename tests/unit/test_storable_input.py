"""Request contracts refuse what no store can keep (NUL, lone surrogates) in any field, at any depth, naming it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field, TypeAdapter, ValidationError

from researchcrew.contracts._base import RequestContract, StorableText, unstorable_character
from researchcrew.contracts.request import ResearchRequest
from researchcrew.jobs.contracts import QuestionOptions

UNSTORABLE = st.sampled_from(["\x00", "\ud800", "\udfff", "\udc00"])


class Probe(RequestContract):
    text: str = "x"
    items: list[str] = Field(default_factory=list)
    nested: dict[str, Any] = Field(default_factory=dict)


@settings(max_examples=200, derandomize=True)
@given(st.text(), UNSTORABLE, st.text())
def test_an_unstorable_character_anywhere_is_refused_naming_the_field(before: str, bad: str, after: str) -> None:
    value = before + bad + after
    for field, data in (
        ("text", {"text": value}),
        ("items", {"items": ["fine", value]}),
        ("nested", {"nested": {"a": [{"b": value}]}}),
        ("nested", {"nested": {value: 1}}),
    ):
        with pytest.raises(ValidationError) as caught:
            Probe.model_validate(data)
        (error,) = caught.value.errors()
        assert error["loc"] == (field,) and "cannot be stored" in error["msg"], error


@settings(max_examples=200, derandomize=True)
@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00")))
def test_every_other_text_is_accepted(text: str) -> None:
    assert unstorable_character(text) is None
    assert Probe(text=text, items=[text], nested={text: [text]}).text == text


def test_a_nesting_deeper_than_the_interpreter_allows_is_walked_without_recursion() -> None:
    deep: Any = "x\x00"
    for _ in range(5_000):
        deep = [deep]
    with pytest.raises(ValidationError, match="NUL"):
        Probe.model_validate({"nested": {"a": deep}})


def test_the_doors_contracts_refuse_it() -> None:
    with pytest.raises(ValidationError, match="a NUL character \\(U\\+0000\\) at position 3"):
        ResearchRequest(question="why\x00")
    with pytest.raises(ValidationError, match="lone surrogate"):
        QuestionOptions(tool_options={"web": {"domains": ["a\ud800"]}})
    with pytest.raises(ValidationError, match="NUL"):
        TypeAdapter(StorableText).validate_python("a\x00")
