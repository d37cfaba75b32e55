"""The LLM's streamed JSON turned into readable text: however the reply is cut into chunks, the pieces sent add up
to the draft's text, and nothing that is not the draft's text is ever sent."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from researchcrew.pipeline.synthesize._streaming import DraftTextStream, draft_prose


class Collector:
    def __init__(self) -> None:
        self.pieces: list[str] = []

    def text(self, piece: str, *, writer: str, mode: str) -> None:
        assert (writer, mode) == ("llm", "token")
        self.pieces.append(piece)


texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=40).filter(str.strip)
drafts = st.lists(
    st.fixed_dictionaries(
        {
            "heading": st.one_of(st.just(""), texts),
            "perspective": st.none(),
            "claims": st.lists(
                st.fixed_dictionaries({"text": texts, "citations": st.lists(st.integers(1, 9), max_size=2)}),
                min_size=1,
                max_size=3,
            ),
        }
    ),
    min_size=1,
    max_size=3,
).map(lambda sections: {"sections": sections})


def _stream(reply: str, cuts: list[int]) -> list[str]:
    collector = Collector()
    stream = DraftTextStream(collector)  # type: ignore[arg-type]
    bounds = sorted({0, len(reply), *(c % (len(reply) + 1) for c in cuts)})
    for start, end in itertools.pairwise(bounds):
        stream.feed(reply[start:end])
    return collector.pieces


@settings(max_examples=200, deadline=None)
@given(draft=drafts, cuts=st.lists(st.integers(0, 10_000), max_size=30), ascii_only=st.booleans())
def test_streamed_pieces_add_up_to_the_drafts_text(draft: dict[str, Any], cuts: list[int], ascii_only: bool) -> None:
    reply = json.dumps(draft, ensure_ascii=ascii_only)
    pieces = _stream(reply, cuts)
    assert "".join(pieces) == draft_prose(reply)
    assert all(pieces)


def test_prose_and_text_around_the_json_are_ignored() -> None:
    reply = (
        'Here is the answer:\n```json\n{"sections": [{"heading": "A", "claims": [{"text": "B.", "citations": [1]}]}]}'
    )
    assert draft_prose(reply) == "## A\n\nB."
    assert draft_prose("I cannot answer that.") == ""
    assert draft_prose('{"sections": "nope"}') == ""
