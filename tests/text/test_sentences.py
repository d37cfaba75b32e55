"""The one sentence splitter: where it cuts, and that it keeps every character of the text."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from researchcrew.text.sentences import INNER_LIMIT, sentence_spans, split_sentences


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # quotes stay with their sentence: straight, curly, single
        ('They call it "attention." It works.', ['They call it "attention."', "It works."]),
        ("They call it “attention.” It works.", ["They call it “attention.”", "It works."]),
        ("They call it 'attention.' It works.", ["They call it 'attention.'", "It works."]),
        (
            'He asked "Why? Because." and left. Then he came back.',
            ['He asked "Why? Because." and left.', "Then he came back."],
        ),
        ("“Is it?” she asked. Yes.", ["“Is it?” she asked.", "Yes."]),
        # brackets
        ("(This is inside. It continues.) Outside now.", ["(This is inside. It continues.)", "Outside now."]),
        ("See the note (ref. 5). It helps.", ["See the note (ref. 5).", "It helps."]),
        (
            "It was measured [see Table 2. Two rows]. Then it changed.",
            ["It was measured [see Table 2. Two rows].", "Then it changed."],
        ),
        # abbreviations
        (
            "Smith et al. found a drop, e.g. in Denver. Fig. 2 shows it.",
            ["Smith et al. found a drop, e.g. in Denver.", "Fig. 2 shows it."],
        ),
        ("It holds, i.e. Always. It ends.", ["It holds, i.e. Always.", "It ends."]),
        (
            "The U.S. Congress met. It was in the U.S. The study ended.",
            ["The U.S. Congress met.", "It was in the U.S.", "The study ended."],
        ),
        (
            "Lewis et al. (2020) proposed RAG. Hinton et al. The end.",
            ["Lewis et al. (2020) proposed RAG.", "Hinton et al.", "The end."],
        ),
        (
            "See No. 5 for details. The answer is no. Nobody asked.",
            ["See No. 5 for details.", "The answer is no.", "Nobody asked."],
        ),
        (
            "Dr. Smith and Prof. Jones met vs. Mr. Brown. They talked.",
            ["Dr. Smith and Prof. Jones met vs. Mr. Brown.", "They talked."],
        ),
        ("Written by J. Smith in 2000. It sold.", ["Written by J. Smith in 2000.", "It sold."]),
        ("It binds cyclin B. Overexpression blocks it.", ["It binds cyclin B.", "Overexpression blocks it."]),
        ("Apples, pears, etc. The shop closed.", ["Apples, pears, etc.", "The shop closed."]),
        # numbers, citations, ellipses, other ends
        ("Accuracy rose to 3.5 points. 42 runs agree.", ["Accuracy rose to 3.5 points.", "42 runs agree."]),
        (
            "Prior work showed this [12]. Later work disagreed.[3] Then nothing.",
            ["Prior work showed this [12].", "Later work disagreed.[3]", "Then nothing."],
        ),
        ("It was shown [3, 4]. Next [5-7]. Last.", ["It was shown [3, 4].", "Next [5-7].", "Last."]),
        ("He paused... Then he left. Wait… what now?", ["He paused...", "Then he left.", "Wait… what now?"]),
        ("Really?! Yes. No!", ["Really?!", "Yes.", "No!"]),
        ("the lower-case start. is not a new sentence.", ["the lower-case start. is not a new sentence."]),
        # lines
        ("First paragraph\n\nSecond one", ["First paragraph", "Second one"]),
        ("A list:\n- one item\n- two. Three\n1. numbered", ["A list:", "- one item", "- two.", "Three", "1. numbered"]),
        ("a line\ncontinues here. Done.", ["a line\ncontinues here.", "Done."]),
        ("", []),
        ("  \n\n ", []),
    ],
)
def test_where_sentences_end(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_an_unclosed_bracket_does_not_swallow_the_text() -> None:
    text = "A stray ( opens here. " + "Then a sentence follows. " * 30
    assert len(split_sentences(text)) == 31
    far = "It starts (and goes on. " + "Word " * INNER_LIMIT + "closes) late. Next."
    assert split_sentences(far)[0] == "It starts (and goes on."


def _assert_keeps_every_character(text: str) -> None:
    spans = sentence_spans(text)
    pieces = split_sentences(text)
    assert pieces == [text[start:end] for start, end in spans]
    previous = 0
    for start, end in spans:
        assert previous <= start < end, "spans are in order, never empty, never overlapping"
        assert not text[previous:start].strip(), "only whitespace lies between two sentences"
        assert text[start:end] == text[start:end].strip(), "a sentence has no surrounding whitespace"
        previous = end
    assert not text[previous:].strip()
    assert re.sub(r"\s+", "", "".join(pieces)) == re.sub(r"\s+", "", text)


_TOKENS = [
    "The", "It", "results", "accuracy", "e.g.", "i.e.", "U.S.", "et al.", "Fig.", "No.", "5", "3.5", "[12].",
    "[3]", '"', "“", "”", "'", "(", ")", "[", "]", ".", "!", "?", "...", "…", "Dr.", "J.", "etc.", "\n", "\n\n",
    "- ", "1. ", "# ", "“Quoted.”", '"Said."', "(Aside.)", "vs.", "x",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    st.text(max_size=300)
    | st.text(alphabet=st.sampled_from(list("Aa1 .!?…\"'“”‘’()[]\n\t-#")), max_size=200)
    | st.lists(st.sampled_from(_TOKENS), max_size=60).map(" ".join)
    | st.lists(st.sampled_from(_TOKENS), max_size=60).map("".join)
)
def test_every_character_is_kept(text: str) -> None:
    _assert_keeps_every_character(text)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=40).map(" ".join))
def test_a_sentence_split_again_stays_whole_or_splits_the_same_way(text: str) -> None:
    """Splitting is stable: the sentences of a sentence are that sentence, unless it held a hard line break."""
    for sentence in split_sentences(text):
        if "\n" not in sentence:
            assert split_sentences(sentence) == [sentence]
