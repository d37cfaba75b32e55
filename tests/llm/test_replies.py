"""The one reply parser: finds the JSON in a model reply, validates it, and fails only with its own error."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from researchcrew.llm.replies import MAX_STARTS, ReplyParseError, parse_reply


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="A name.")
    score: int = Field(ge=0, description="A score.")
    tags: list[str] = Field(default_factory=list, description="Tags.")


class Lenient(BaseModel):
    """Every field has a default: almost any object validates."""

    entities: list[str] = Field(default_factory=list, description="Entities.")


class Listing(BaseModel):
    items: list[Item] = Field(description="Items.")


OBJECT = {"name": "SciFact", "score": 3, "tags": ["dataset"]}
TEXT = json.dumps(OBJECT)


@pytest.mark.parametrize(
    "reply",
    [
        TEXT,
        f"```json\n{TEXT}\n```",
        f"```\n{TEXT}```",
        f"Sure! Here it is: {TEXT} Hope this helps.",
        f"Thought: done.\nFinal Answer: {TEXT}",
        f"Some {{braces}} and [1] first, then {TEXT}",
        f'{{"name": ""}} was wrong; the right one is {TEXT}',
        OBJECT,
        Item(**OBJECT),
    ],
)
def test_common_reply_shapes_are_read(reply: Any) -> None:
    assert parse_reply(reply, Item) == Item(**OBJECT)


def test_raw_newlines_inside_strings_are_accepted() -> None:
    assert parse_reply('{"name": "two\nlines", "score": 1}', Item).name == "two\nlines"


def test_a_bare_list_is_read_as_the_named_field() -> None:
    assert parse_reply(f"[{TEXT}]", Listing, list_field="items").items == [Item(**OBJECT)]
    with pytest.raises(ReplyParseError):
        parse_reply(f"[{TEXT}]", Listing)


def test_an_inner_object_is_not_taken_for_the_answer() -> None:
    """An object nested in the reply's JSON is part of it, not another answer (it would validate as Lenient)."""
    with pytest.raises(ReplyParseError, match="does not match"):
        parse_reply('Here: {"entities": 5, "inner": {"entities": []}}', Lenient)
    assert parse_reply('{"entities": 5} and then {"entities": ["BERT"]}', Lenient).entities == ["BERT"]


def test_check_rejects_a_valid_value_and_the_next_candidate_is_tried() -> None:
    def has_tags(item: Item) -> str | None:
        return None if item.tags else "the item has no tags"

    reply = f'{{"name": "a", "score": 1}} and then {TEXT}'
    assert parse_reply(reply, Item, check=has_tags).name == "SciFact"
    with pytest.raises(ReplyParseError, match="no tags"):
        parse_reply('{"name": "a", "score": 1}', Item, check=has_tags)
    with pytest.raises(ReplyParseError, match="no tags"):
        parse_reply(Item(name="a", score=1), Item, check=has_tags)


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("", "empty reply"),
        ("   ", "empty reply"),
        ("I could not find anything.", "no JSON"),
        (None, "type NoneType"),
        (42, "type int"),
        (b"{}", "type bytes"),
        ("{not json}", "not valid JSON"),
        ('{"name": "a", "score": 1,}', "not valid JSON"),  # trailing commas are not repaired
        ('{"name": "a", "score": -1}', "does not match"),
        ('{"name": "a", "score": 1, "extra": true}', "does not match"),
        ("[" * 100_000, "not valid JSON"),
        ('{"name": "a", "score": ' + "9" * 5000 + "}", "not valid JSON"),
        ({"name": 5}, "does not match"),
    ],
)
def test_failures_are_one_error_that_says_why(reply: Any, problem: str) -> None:
    with pytest.raises(ReplyParseError, match=problem):
        parse_reply(reply, Item)


def test_a_hostile_reply_is_bounded() -> None:
    """Thousands of JSON starts in prose: only the first MAX_STARTS are tried."""
    reply = "{" * (MAX_STARTS * 100) + TEXT
    with pytest.raises(ReplyParseError):
        parse_reply(reply, Item)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=300)
    | _JSON.map(json.dumps)
    | st.tuples(st.text(max_size=40), _JSON.map(json.dumps), st.text(max_size=40)).map("".join)
    | _JSON
    | st.binary(max_size=20)
)
def test_it_never_raises_anything_but_its_own_error(reply: Any) -> None:
    for model in (Item, Lenient, Listing):
        try:
            parsed = parse_reply(reply, model, list_field="items" if model is Listing else None)
        except ReplyParseError:
            continue
        assert isinstance(parsed, model)


_PROSE = st.text(alphabet=st.characters(codec="utf-8", exclude_characters='{}[]"\\`'), max_size=80)
_ITEMS = st.builds(
    Item,
    name=st.text(min_size=1, max_size=30),
    score=st.integers(min_value=0, max_value=10**6),
    tags=st.lists(st.text(max_size=10), max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(_PROSE, _ITEMS, _PROSE, st.sampled_from([None, 2]), st.booleans(), st.booleans())
def test_it_finds_an_embedded_object(
    before: str, item: Item, after: str, indent: int | None, ascii_only: bool, fenced: bool
) -> None:
    payload = json.dumps(item.model_dump(), indent=indent, ensure_ascii=ascii_only)
    if fenced:
        payload = f"```json\n{payload}\n```"
    assert parse_reply(f"{before}{payload}{after}", Item) == item
