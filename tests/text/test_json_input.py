"""The one bounded JSON reader: what it reads, what it refuses and how it says so."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from researchcrew.text.json_input import (
    MAX_JSON_DEPTH,
    JsonInputError,
    nesting_depth,
    read_json,
    read_json_lines,
)

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=st.sampled_from('ab"\\[]{}\n ,:')),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3),
    max_leaves=30,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


@settings(max_examples=300, derandomize=True)
@given(JSON_VALUES)
def test_the_depth_is_the_nesting_of_arrays_and_objects_whatever_the_strings_hold(value: Any) -> None:
    text = json.dumps(value)
    assert nesting_depth(text) == _depth(value)
    assert read_json(text) == value


@settings(max_examples=300, derandomize=True)
@given(st.text(alphabet=st.sampled_from('[]{}"\\:,1a \n')))
def test_any_text_is_read_or_refused_with_a_json_input_error(text: str) -> None:
    try:
        read_json(text, line=7)
    except JsonInputError as error:
        assert str(error).startswith("line 7: ")


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH + 1, 900, 100_000])
def test_deep_nesting_is_refused_before_parsing(levels: int) -> None:
    with pytest.raises(JsonInputError, match="nested too deeply"):
        read_json("[" * levels + "]" * levels)
    assert read_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"a": "[" * 10_000, "b": ['\\"[[[', "{{{"]})
    assert nesting_depth(text) == 2
    assert read_json(text)["a"] == "[" * 10_000


def test_size_limit() -> None:
    with pytest.raises(JsonInputError, match="longer than 10 characters"):
        read_json('"' + "x" * 20 + '"', max_chars=10)


def test_jsonl_lines_are_numbered_and_a_bad_one_does_not_stop_the_rest() -> None:
    text = '{"a": 1}\n\nnot json\n' + "[" * 5_000 + "]" * 5_000 + '\n{"b": 2}\n'
    lines = list(read_json_lines(text))
    assert [number for number, _ in lines] == [1, 3, 4, 5]
    assert lines[0][1] == {"a": 1} and lines[3][1] == {"b": 2}
    assert isinstance(lines[1][1], JsonInputError) and str(lines[1][1]).startswith("line 3: not valid JSON")
    assert isinstance(lines[2][1], JsonInputError) and "line 4: nested too deeply" in str(lines[2][1])
