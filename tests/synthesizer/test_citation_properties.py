"""Property tests: whatever text and citation numbers a model produces, validation never crashes, never lets a
number outside 1..len(citations) through, and never keeps an unsupported claim as if it were supported."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from researchcrew.contracts import Query
from researchcrew.contracts.synthesizer import AnswerDraft, DraftClaim, DraftSection, FinalResponse
from researchcrew.pipeline.synthesize._citations import find_markers, strip_markers, validate_citations, validate_draft
from researchcrew.pipeline.synthesize._rendering import render_answer
from tests.synthesizer.builders import evidence

CHUNK_POOL = evidence(6)

numbers = st.integers(min_value=-3, max_value=12)
marker = st.one_of(
    numbers.map(lambda n: f"[{n}]"),
    st.lists(numbers, min_size=1, max_size=3).map(lambda ns: "[" + ", ".join(map(str, ns)) + "]"),
    st.tuples(numbers, numbers).map(lambda p: f"[{p[0]}-{p[1]}]"),
    numbers.map(lambda n: f"【{n}†source】"),
    numbers.map(lambda n: f"[^{n}]"),
    numbers.map(lambda n: f"[source {n}]"),
    st.tuples(numbers, numbers).map(lambda p: f"[[{p[0]}]{p[1]}]"),  # removing the inner one forms a new marker
)
noise = st.text(alphabet="ab [],-–^【】†0123456789.\n", max_size=12)
words = st.sampled_from(["Water boils", " at ", "100 °C", "."])
claim_text = st.lists(st.one_of(marker, noise, words), max_size=8).map("".join)
draft_claim = st.builds(DraftClaim, text=claim_text, citations=st.lists(numbers, max_size=4))
draft_section = st.builds(
    DraftSection,
    heading=claim_text,
    perspective=st.one_of(st.none(), claim_text),
    claims=st.lists(draft_claim, max_size=4),
)
drafts = st.builds(AnswerDraft, sections=st.lists(draft_section, max_size=4))
chunk_counts = st.integers(min_value=0, max_value=len(CHUNK_POOL))
common = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@common
@given(st.one_of(st.text(), claim_text))
def test_marker_parser_never_crashes_and_stripping_leaves_no_marker(text: str) -> None:
    for found in find_markers(text):
        assert 0 <= found.start < found.end <= len(text)
    stripped, _ = strip_markers(text)
    assert find_markers(stripped) == []


@common
@given(drafts, chunk_counts, st.sampled_from(["generated", "extractive"]), st.integers(min_value=1, max_value=60))
def test_validated_drafts_cite_only_given_evidence(draft: AnswerDraft, count: int, kind: str, budget: int) -> None:
    given_chunks = CHUNK_POOL[:count]
    result = validate_draft(draft, given_chunks, max_words=budget)

    total = len(result.citations)
    assert [c.number for c in result.citations] == list(range(1, total + 1))
    assert {c.chunk_id for c in result.citations} <= {s.chunk.chunk_id for s in given_chunks}
    kept = [claim for section in result.sections for claim in section.claims]
    for claim in kept:
        assert claim.citations, "a kept claim has at least one valid citation"
        assert all(1 <= n <= total for n in claim.citations)
    assert result.stats.valid == sum(len(claim.citations) for claim in kept)
    assert result.stats.claims_flagged == 0

    answer = render_answer(result.sections, answer_kind=kind)  # type: ignore[arg-type]
    for found in find_markers(answer):
        assert all(1 <= n <= total for n in found.numbers), (answer, found)


@common
@given(drafts, chunk_counts)
def test_flag_mode_never_presents_an_unsupported_claim_as_supported(draft: AnswerDraft, count: int) -> None:
    result = validate_draft(draft, CHUNK_POOL[:count], mode="flag")
    for claim in (claim for section in result.sections for claim in section.claims):
        assert claim.flagged == (claim.citations == [])
    assert result.stats.claims_removed == 0


@common
@given(drafts, chunk_counts, chunk_counts)
def test_revalidation_is_safe_and_idempotent(draft: AnswerDraft, count: int, later_count: int) -> None:
    first = validate_draft(draft, CHUNK_POOL[:count])
    response = FinalResponse(
        query=Query(text="q", user_id="u", session_id="s"),
        answer="",
        sections=first.sections,
        citations=first.citations,
        citation_stats=first.stats,
    )
    once = validate_citations(response, CHUNK_POOL[:later_count])
    total = len(once.citations)
    for found in find_markers(once.answer):
        assert all(1 <= n <= total for n in found.numbers)
    assert all(claim.citations for section in once.sections for claim in section.claims)
    assert once.citation_stats.removed >= first.stats.removed
    assert validate_citations(once, CHUNK_POOL[:later_count]) == once
