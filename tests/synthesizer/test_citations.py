"""Citation markers, draft validation and the Flow's re-validation of finished answers."""

from __future__ import annotations

import pytest

from researchcrew.contracts import Query
from researchcrew.contracts.synthesizer import (
    AnswerDraft,
    AnswerSection,
    Citation,
    CitationStats,
    Claim,
    DraftClaim,
    DraftSection,
    FinalResponse,
)
from researchcrew.pipeline.synthesize._citations import (
    clean_text,
    find_markers,
    memory_location,
    passage_location,
    strip_markers,
    validate_citations,
    validate_draft,
)
from researchcrew.pipeline.synthesize._rendering import EXTRACTIVE_NOTICE, render_answer
from tests.synthesizer.builders import evidence


def draft(*claims: tuple[str, list[int]], perspective: str | None = None) -> AnswerDraft:
    section = DraftSection(
        heading="Answer",
        perspective=perspective,
        claims=[DraftClaim(text=text, citations=numbers) for text, numbers in claims],
    )
    return AnswerDraft(sections=[section])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("boils at 100 °C [1].", [(1,)]),
        ("two sources [1, 2] and [3;4]", [(1, 2), (3, 4)]),
        ("a range [2-4] and an en dash [5–6]", [(2, 3, 4), (5, 6)]),
        ("adjacent [1][2]", [(1,), (2,)]),
        ("OpenAI style 【3】 and 【4†source】", [(3,), (4,)]),
        ("footnote style [^7] and labelled [source 8], [Evidence 9]", [(7,), (8,), (9,)]),
        ("full-width ［2］", [(2,)]),
        ("a huge range [1-100000] keeps only its ends", [(1, 100000)]),
        ("no markers: [sic], [a], (1), array[i]", []),
    ],
)
def test_find_markers_reads_common_styles(text: str, expected: list[tuple[int, ...]]) -> None:
    assert [marker.numbers for marker in find_markers(text)] == expected


def test_strip_markers_repeats_until_no_marker_is_left() -> None:
    text, numbers = strip_markers("nested [[1]2] text")
    assert find_markers(text) == []
    assert numbers == [1, 2]


def test_clean_text_neutralises_brackets_and_closes_gaps() -> None:
    assert clean_text("Water boils [1] . See [sic] and x【 ") == ("Water boils. See (sic) and x(", [1])


def test_citation_to_a_missing_chunk_is_removed_and_counted_and_its_claim_dropped() -> None:
    given = evidence(3)
    result = validate_draft(draft(("Supported.", [2]), ("Fabricated.", [9]), ("Half right.", [9, 3])), given)

    claims = [claim for section in result.sections for claim in section.claims]
    assert [claim.text for claim in claims] == ["Supported.", "Half right."]
    assert result.stats == CitationStats(valid=2, removed=2, claims_removed=1, claims_flagged=0)
    # renumbered densely in order of first use: chunk 2 → [1], chunk 3 → [2]
    assert [claim.citations for claim in claims] == [[1], [2]]
    assert [(c.number, c.chunk_id) for c in result.citations] == [(1, "chunk-2"), (2, "chunk-3")]


def test_inline_markers_count_like_listed_citations() -> None:
    result = validate_draft(draft(("Water boils at 100 °C [3] at sea level [1-2].", [])), evidence(3))
    claim = result.sections[0].claims[0]
    assert claim.text == "Water boils at 100 °C at sea level."
    assert claim.citations == [1, 2, 3]
    assert [c.chunk_id for c in result.citations] == ["chunk-3", "chunk-1", "chunk-2"]


def test_flag_mode_keeps_unsupported_claims_marked_never_as_supported() -> None:
    result = validate_draft(draft(("Supported.", [1]), ("Invented.", [7])), evidence(2), mode="flag")
    flagged = result.sections[0].claims[1]
    assert flagged.flagged and flagged.citations == []
    assert result.stats.claims_flagged == 1 and result.stats.claims_removed == 0 and result.stats.removed == 1
    assert "Invented. (unsupported: no cited evidence)" in render_answer(result.sections, answer_kind="generated")


def test_citations_are_built_from_the_chunks() -> None:
    given = evidence(1)
    result = validate_draft(draft(("Claim.", [1])), given)
    citation = result.citations[0]
    chunk = given[0].chunk
    assert (citation.title, citation.url, citation.source_id, citation.source_date, citation.authors) == (
        chunk.title,
        chunk.url,
        chunk.source_id,
        chunk.source_date,
        chunk.authors,
    )
    assert citation.source_type == chunk.source_type
    assert chunk.content.startswith(citation.snippet[:50])


@pytest.mark.parametrize(
    ("metadata", "location"),
    [
        ({"heading": "Methods", "position": 1, "chunk_count": 5}, "§ Methods, passage 2 of 5"),
        ({"heading": None, "position": 0, "chunk_count": 2}, "passage 1 of 2"),
        ({"heading": "  Results\n and discussion ", "position": 0, "chunk_count": 1}, "§ Results and discussion"),
        ({"heading": None, "position": 0, "chunk_count": 1}, None),  # a one-passage abstract: nothing to add
        ({"position": 3, "chunk_count": 2}, None),  # inconsistent metadata is not shown
        ({"position": True, "chunk_count": 2}, None),
        ({"status_code": 200}, None),  # another tool's metadata
    ],
)
def test_passage_location_says_where_a_knowledge_base_passage_sits(
    metadata: dict[str, object], location: str | None
) -> None:
    assert passage_location(metadata) == location


@pytest.mark.parametrize(
    ("metadata", "location"),
    [
        ({"same_session": True, "session_id": "s1", "origin": "local"}, "earlier in this conversation"),
        ({"same_session": False, "session_id": "s0", "origin": "zep"}, "an earlier conversation (session s0)"),
        ({"same_session": False, "session_id": "  "}, "an earlier conversation"),
        ({"entities": ["SciFact"], "origin": "entity_graph"}, "entities from your earlier conversations"),
        ({"heading": "Methods", "position": 1, "chunk_count": 5}, None),  # not a memory chunk's metadata
    ],
)
def test_memory_location_names_the_conversation_a_recalled_exchange_comes_from(
    metadata: dict[str, object], location: str | None
) -> None:
    assert memory_location(metadata) == location


def test_a_memory_citation_says_which_conversation_instead_of_a_knowledge_base_location() -> None:
    [item] = evidence(1)
    item.chunk.source_type, item.chunk.source_id = "memory", "effad49f0c1e4b7a"
    item.chunk.metadata.update({"same_session": True, "session_id": "s1", "position": 0, "chunk_count": 2})
    [citation] = validate_draft(draft(("Claim.", [1])), [item]).citations
    assert (citation.location, citation.source_id) == ("earlier in this conversation", "effad49f0c1e4b7a")


def test_two_passages_of_one_document_are_one_citation_that_names_both() -> None:
    first, second = evidence(2)
    for item, position in ((first, 0), (second, 1)):
        item.chunk.title, item.chunk.url = "One paper", "http://arxiv.org/abs/2101.00001"
        item.chunk.metadata.update({"heading": None, "position": position, "chunk_count": 2})
    result = validate_draft(draft(("First claim.", [1]), ("Second claim.", [2])), [first, second])
    [citation] = result.citations  # one source, one citation (issue 20)
    assert citation.location == "passages 1 and 2 of 2"
    assert [p.location for p in citation.passages] == ["passage 1 of 2", "passage 2 of 2"]
    assert [claim.citations for claim in result.sections[0].claims] == [[1], [1]]


def test_trimming_cuts_at_claim_boundaries_and_keeps_perspectives_longest() -> None:
    sections = AnswerDraft(
        sections=[
            DraftSection(
                heading="Main",
                perspective=None,
                claims=[
                    DraftClaim(text="one two three four five", citations=[1]),
                    DraftClaim(text="six seven eight nine ten", citations=[2]),
                ],
            ),
            DraftSection(
                heading="View",
                perspective="Source A",
                claims=[
                    DraftClaim(text="alpha beta gamma delta", citations=[3]),
                ],
            ),
        ]
    )
    result = validate_draft(sections, evidence(3), max_words=10)
    kept = [(s.heading, [c.text for c in s.claims]) for s in result.sections]
    assert kept == [("Main", ["one two three four five"]), ("View", ["alpha beta gamma delta"])]
    assert result.trimmed_claims == 1
    # the dropped claim's chunk is no longer cited, so numbering stays dense
    assert [c.chunk_id for c in result.citations] == ["chunk-1", "chunk-3"]


def _response(sections: list[AnswerSection], citations: list[Citation], **kwargs: object) -> FinalResponse:
    query = Query(text="q", user_id="u", session_id="s")
    return FinalResponse(query=query, answer="(stale text)", sections=sections, citations=citations, **kwargs)


def test_revalidation_removes_citations_of_chunks_that_were_not_given() -> None:
    given = evidence(3)
    first = validate_draft(draft(("From chunk one.", [1]), ("From chunk three.", [3])), given)
    response = _response(first.sections, first.citations, citation_stats=first.stats)

    checked = validate_citations(response, given[:1])  # chunk 3 was not given to this stage

    assert [c.chunk_id for c in checked.citations] == ["chunk-1"]
    assert checked.citation_stats == CitationStats(valid=1, removed=1, claims_removed=1)
    assert checked.answer == "## Answer\n\nFrom chunk one [1]."


def test_revalidation_is_idempotent_and_rebuilds_the_text() -> None:
    given = evidence(3)
    first = validate_draft(draft(("A [2].", [1]), ("B.", [8])), given)
    response = _response(first.sections, first.citations, citation_stats=first.stats, answer_kind="extractive")
    once = validate_citations(response, given)
    twice = validate_citations(once, given)
    assert once.answer.startswith(EXTRACTIVE_NOTICE)
    assert once.model_dump(exclude={"answer"}) == response.model_dump(exclude={"answer"})
    assert twice == once


def test_revalidation_leaves_uncertainty_answers_alone() -> None:
    response = _response([], [], answer_kind="uncertainty")
    assert validate_citations(response, []) is response


def test_claims_with_a_number_outside_the_citation_list_are_dropped_on_revalidation() -> None:
    given = evidence(2)
    citation = Citation(number=1, chunk_id="chunk-1", source_type="web")
    sections = [AnswerSection(heading="", claims=[Claim(text="ok", citations=[1]), Claim(text="bad", citations=[4])])]
    checked = validate_citations(_response(sections, [citation]), given)
    assert [claim.text for claim in checked.sections[0].claims] == ["ok"]
    assert checked.citation_stats.removed == 1 and checked.citation_stats.claims_removed == 1
