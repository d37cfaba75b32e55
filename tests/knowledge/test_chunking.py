"""Chunking: sections, overlap, and the hard limit — no chunk is longer than the embedder reads."""

from __future__ import annotations

import itertools
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from researchcrew.knowledge._chunking import Chunker, indexed_text, keyword_text
from researchcrew.knowledge._tokens import TokenCounter
from researchcrew.knowledge.documents import Document


def _fits(chunker: Chunker, counter: TokenCounter, chunk_title: str | None, heading: str | None, body: str) -> bool:
    return counter.count(indexed_text(chunk_title, heading, body)) + counter.special_tokens <= chunker.max_tokens


def test_sections_headings_and_positions(token_counter: TokenCounter) -> None:
    chunker = Chunker(token_counter, max_tokens=64, overlap_tokens=8)
    text = (
        "Preamble line.\n\n# Methods\n\nWe measured things. "
        + "Then we measured more things. " * 12
        + ("\n\n## Results\n\nIt worked.")
    )
    chunks = chunker.chunk(Document(source_key="k", text=text, title="A study"))
    assert [chunk.position for chunk in chunks] == list(range(len(chunks)))
    assert chunks[0].heading is None and chunks[0].text == "Preamble line."
    assert chunks[-1].heading == "Results" and chunks[-1].text == "It worked."
    methods = [chunk for chunk in chunks if chunk.heading == "Methods"]
    assert len(methods) >= 2  # the long section is split...
    assert all("It worked" not in chunk.text for chunk in methods)  # ...and never runs into the next one
    for chunk in chunks:
        assert chunk.chunk_id == f"{chunk.doc_id}:{chunk.position}"
        assert chunk.title == "A study"
        assert _fits(chunker, token_counter, chunk.title, chunk.heading, chunk.text)


def test_consecutive_windows_overlap_by_a_sentence(token_counter: TokenCounter) -> None:
    chunker = Chunker(token_counter, max_tokens=64, overlap_tokens=16)
    sentences = [f"Sentence number {i} talks about topic {i}." for i in range(30)]
    chunks = chunker.chunk(Document(source_key="k", text=" ".join(sentences)))
    assert len(chunks) >= 3
    for before, after in itertools.pairwise(chunks):
        last_sentence = re.split(r"(?<=\.) ", before.text)[-1]
        assert after.text.startswith(last_sentence)
    # Nothing is lost: every sentence is in some chunk.
    assert all(any(sentence in chunk.text for chunk in chunks) for sentence in sentences)


def test_keyword_text_is_the_chunk_between_its_neighbours_under_its_own_header() -> None:
    bodies = ["Alpha one.", "Beta two.", "Gamma three.", "Delta four."]
    assert keyword_text("Paper", "Methods", bodies, 0) == "Paper\nMethods\nAlpha one.\nBeta two."
    assert keyword_text("Paper", "Methods", bodies, 2) == "Paper\nMethods\nBeta two.\nGamma three.\nDelta four."
    assert keyword_text(None, None, bodies, 3) == "Gamma three.\nDelta four."
    assert keyword_text("Paper", None, ["Only."], 0) == indexed_text("Paper", None, "Only.")


def test_balanced_windows(token_counter: TokenCounter) -> None:
    chunker = Chunker(token_counter, max_tokens=128, overlap_tokens=0)
    text = " ".join(f"Statement {i} is about a measured effect." for i in range(25))  # ~1.4 windows of text
    sizes = [token_counter.count(chunk.text) for chunk in chunker.chunk(Document(source_key="k", text=text))]
    assert len(sizes) == 2
    assert abs(sizes[0] - sizes[1]) < 40  # halves, not a full window and a stub


def test_run_on_text_without_sentence_ends_is_windowed(token_counter: TokenCounter) -> None:
    chunker = Chunker(token_counter, max_tokens=48, overlap_tokens=0)
    text = " ".join(f"value{i}" for i in range(400))
    chunks = chunker.chunk(Document(source_key="k", text=text))
    assert len(chunks) > 5
    assert all(_fits(chunker, token_counter, None, None, chunk.text) for chunk in chunks)
    assert " ".join(chunk.text for chunk in chunks).split() == text.split()


def test_blank_and_heading_only_documents(token_counter: TokenCounter) -> None:
    chunker = Chunker(token_counter)
    assert chunker.chunk(Document(source_key="k", text="   \n\n  ")) == []
    chunks = chunker.chunk(Document(source_key="k", text="# Only a heading\n\n## And another"))
    assert len(chunks) == 1 and "Only a heading" in chunks[0].text


def test_overlong_title_is_clipped_so_the_body_has_room(token_counter: TokenCounter) -> None:
    chunker = Chunker(token_counter, max_tokens=64, overlap_tokens=0)
    title = " ".join(["verylongtitleword"] * 80)
    chunks = chunker.chunk(Document(source_key="k", text="Short body sentence.", title=title))
    assert len(chunks) == 1
    assert _fits(chunker, token_counter, chunks[0].title and title, None, chunks[0].text) is False  # full title
    # what is indexed uses the clipped title, and that fits
    assert chunker.fits(indexed_text(chunker._clip(title), None, chunks[0].text))


_word = st.one_of(
    st.from_regex(r"[a-z]{1,12}", fullmatch=True),
    st.from_regex(r"[A-Z][a-z]{0,8}[.!?]", fullmatch=True),
    st.from_regex(r"[0-9]{1,6}(\.[0-9]{1,3})?%?", fullmatch=True),
    st.text(
        alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zs", "Zl", "Zp")),
        min_size=1,
        max_size=30,
    ),
)
_line = st.one_of(
    st.lists(_word, min_size=1, max_size=60).map(" ".join),
    st.lists(_word, min_size=1, max_size=6).map(lambda words: "## " + " ".join(words)),
    st.just(""),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(_line, min_size=1, max_size=40),
    title=st.one_of(st.none(), st.lists(_word, min_size=1, max_size=40).map(" ".join)),
    max_tokens=st.sampled_from([48, 96, 256]),
    overlap=st.integers(min_value=0, max_value=48),
)
def test_no_chunk_exceeds_the_token_limit(
    token_counter: TokenCounter, lines: list[str], title: str | None, max_tokens: int, overlap: int
) -> None:
    text = "\n".join(lines)
    if not text.strip():
        text = "x"
    chunker = Chunker(token_counter, max_tokens=max_tokens, overlap_tokens=overlap)
    chunks = chunker.chunk(Document(source_key="k", text=text, title=title))
    clipped_title = chunker._clip(title) if title and title.strip() else None
    for chunk in chunks:
        assert chunk.text.strip()
        indexed = indexed_text(clipped_title, chunk.heading, chunk.text)
        assert token_counter.count(indexed) + 2 <= max_tokens, (indexed, token_counter.count(indexed))
