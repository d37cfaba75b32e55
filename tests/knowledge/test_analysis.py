"""The client-side BM25 analysis: what a query and a chunk are reduced to before Milvus scores them."""

from __future__ import annotations

import re
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from researchcrew.knowledge._analysis import ENGLISH_STOP_WORDS, Analyzer, default_analyzer
from researchcrew.knowledge._chunking import keyword_text, keyword_texts


def test_stems_lowercases_and_drops_stop_words() -> None:
    assert Analyzer().tokens("The Vaccines were reducing infections") == ["vaccin", "were", "reduc", "infect"]


def test_hyphenated_compounds_also_become_one_joined_token() -> None:
    tokens = default_analyzer().tokens("IL-6 levels in T-cells after COVID-19 and state-of-the-art β-catenin")
    # the parts stay (single characters never were tokens), and each compound adds its joined, stemmed form
    assert {"il", "cell", "covid", "19", "catenin"} <= set(tokens)
    assert {"il6", "tcell", "covid19", "stateoftheart", "βcatenin"} <= set(tokens)


def test_joined_compounds_let_spellings_with_and_without_hyphen_meet() -> None:
    analyzer = default_analyzer()
    assert set(analyzer.tokens("IL6")) <= set(analyzer.tokens("serum IL-6 rose"))
    assert set(analyzer.tokens("COVID19")) <= set(analyzer.tokens("COVID-19 patients"))
    # ...while "IL-6" no longer rests on the shared part alone: an IL-2 passage lacks the joined form
    assert "il6" not in analyzer.tokens("IL-2 signalling")


def test_dashes_that_join_nothing_add_nothing() -> None:
    assert Analyzer().tokens("cells - and - - tissue -") == ["cell", "tissu"]


@given(st.text(alphabet=st.sampled_from("abinotheXYZ019 -.,;\n\tβé"), max_size=80))
def test_output_is_space_separated_lowercase_word_tokens_without_stop_words(text: str) -> None:
    analysed = default_analyzer().analyze(text)
    tokens = analysed.split(" ") if analysed else []
    assert all(re.fullmatch(r"\w+", token) for token in tokens)
    assert all(token == token.lower() and token not in ENGLISH_STOP_WORDS for token in tokens)
    # Milvus' standard tokenizer must see exactly these tokens: no token carries a separator it would split on
    assert analysed == " ".join(tokens)


_words = st.text(alphabet=st.sampled_from("abinotheXYZ019 -.,\n"), min_size=1, max_size=40)


@given(st.one_of(st.none(), _words), st.lists(st.tuples(st.one_of(st.none(), _words), _words), min_size=1, max_size=5))
def test_keyword_texts_analysed_piecewise_hold_the_terms_of_the_whole_analysed(
    title: str | None, sections: list[tuple[str | None, str]]
) -> None:
    analyzer = default_analyzer()
    chunks = [(title, heading, body) for heading, body in sections]
    bodies = [body for _, _, body in chunks]
    piecewise = keyword_texts(chunks, analyzer.analyze)
    for position, (chunk_title, heading, _) in enumerate(chunks):
        # A heading that repeats the title is left out; analysed, "Method" and "Methods" repeat each other too.
        same_raw = bool(chunk_title and heading and chunk_title.strip().lower() == heading.strip().lower())
        same_analysed = bool(chunk_title and heading and analyzer.analyze(chunk_title) == analyzer.analyze(heading))
        if same_raw == same_analysed:
            whole = analyzer.tokens(keyword_text(chunk_title, heading, bodies, position))
            assert Counter(piecewise[position].split()) == Counter(whole)
    assert keyword_texts(chunks) == [keyword_text(t, h, bodies, i) for i, (t, h, _) in enumerate(chunks)]
