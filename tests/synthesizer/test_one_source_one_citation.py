"""One source, one citation (issue 20 item 3): passages of one document are one citation with several locations and
count once for agreement; near-duplicates across documents count once; a knowledge-base file is cited by its file
name (and page or section), a web page by its URL."""

from __future__ import annotations

from datetime import UTC, datetime

from researchcrew.cli._ask import render_answer
from researchcrew.contracts import ContextChunk, FinalResponse, Query, ScoredChunk
from researchcrew.contracts.synthesizer import AnswerDraft, Citation, DraftClaim, DraftSection
from researchcrew.knowledge.search import SearchHit
from researchcrew.pipeline._assessment import assess_answer
from researchcrew.pipeline._sources import combined_location, document_key, independent_sources
from researchcrew.pipeline._support import Support
from researchcrew.pipeline.evaluate._evaluator import Evaluator
from researchcrew.pipeline.synthesize._citations import validate_citations, validate_draft
from researchcrew.pipeline.synthesize._confidence import answer_confidence, claim_confidence, coverage_metrics
from researchcrew.pipeline.synthesize.extractive import ExtractiveSynthesizer
from researchcrew.settings import ConfidenceSettings
from researchcrew.tools.rag import to_context_chunk
from tests.synthesizer.builders import request

HASH = "58025e37759e27b172b1e87993cef1f9"  # what the index keys the document by: a content hash
LIMITATIONS = [
    "Mutation testing is expensive because every mutant must be compiled and run against the whole test suite.",
    "Equivalent mutants behave exactly like the original program, so no test can kill them and they distort the "
    "mutation score.",
    "Higher-order mutants combine several faults and are rarely needed in practice.",
    "Selective mutation keeps a few operators and cuts the cost of mutation testing by an order of magnitude.",
]


def file_passage(position: int, *, heading: str = "Limitations", quality: float = 0.8) -> ScoredChunk:
    """A passage of the user's file ``mutation.md`` as the knowledge base returns it (through the RAG tool's own
    conversion, so the metadata is what a real search carries)."""
    hit = SearchHit.model_validate(
        {
            "chunk_id": f"{HASH}:{position}",
            "doc_id": HASH,
            "source_key": "/home/ada/notes/mutation.md",
            "source": "/home/ada/notes/mutation.md",
            "text": LIMITATIONS[position],
            "title": "Mutation testing",
            "url": None,
            "heading": heading,
            "position": position,
            "chunk_count": 4,
            "source_date": None,
            "relevance": 0.8,
            "metadata": {"format": "markdown", "path": "/home/ada/notes/mutation.md", "authors": []},
        }
    )
    chunk = to_context_chunk(hit, query="What are the limitations of mutation testing?")
    return ScoredChunk(chunk=chunk, quality_score=quality, source_reputation=0.8, recency=0.5, relevance=0.8)


def web_page(number: int, text: str, *, quality: float = 0.7, similar_to: str | None = None) -> ScoredChunk:
    chunk = ContextChunk(
        chunk_id=f"web-{number}",
        source_type="web",
        content=text,
        semantic_relevance=0.7,
        title=f"Page {number}",
        url=f"https://example.org/mutation-{number}",
        source_date=datetime(2024, 1, number, tzinfo=UTC),
    )
    return ScoredChunk(
        chunk=chunk, quality_score=quality, source_reputation=0.6, recency=0.7, relevance=0.7, similar_to=similar_to
    )


def draft(*claims: tuple[str, list[int]]) -> AnswerDraft:
    return AnswerDraft(sections=[DraftSection(heading="", claims=[DraftClaim(text=t, citations=c) for t, c in claims])])


def test_two_passages_of_one_file_are_one_citation_with_both_locations_and_its_file_name() -> None:
    second, fourth, page = file_passage(1), file_passage(3), web_page(1, "Mutation testing seeds small faults.")
    checked = validate_draft(
        draft(("Equivalent mutants distort the score.", [1]), ("Selective mutation cuts cost.", [2]), ("Seeds.", [3])),
        [second, fourth, page],
    )
    assert [claim.citations for claim in checked.sections[0].claims] == [[1], [1], [2]]
    mine, web = checked.citations
    assert mine.location == "§ Limitations, passages 2 and 4 of 4"
    assert [(p.chunk_id, p.location) for p in mine.passages] == [
        (f"{HASH}:1", "§ Limitations, passage 2 of 4"),
        (f"{HASH}:3", "§ Limitations, passage 4 of 4"),
    ]
    assert (mine.file_name, mine.label) == ("mutation.md", "mutation.md")  # not the content hash
    assert mine.chunk_ids == [f"{HASH}:1", f"{HASH}:3"]
    assert (web.label, web.file_name) == ("https://example.org/mutation-1", None)  # a web page by its URL


def test_passages_are_listed_in_document_order_and_places_are_named_apart() -> None:
    later, earlier, methods = file_passage(3), file_passage(1), file_passage(0, heading="Methods")
    checked = validate_draft(draft(("a b.", [1, 2, 3])), [later, earlier, methods])
    [citation] = checked.citations
    assert citation.location == "§ Methods, passage 1 of 4; § Limitations, passages 2 and 4 of 4"
    assert [p.chunk_id for p in citation.passages] == [f"{HASH}:0", f"{HASH}:1", f"{HASH}:3"]


def test_the_pages_of_one_pdf_are_one_source_cited_by_file_name_and_page() -> None:
    pages = [
        ContextChunk(
            chunk_id=f"p{page}",
            source_type="rag",
            content=f"Page {page} says something about mutants.",
            semantic_relevance=0.7,
            title="Survey",
            source_id=f"hash{page}",  # every page is its own document in the index, with its own hash
            metadata={"source_key": f"/data/survey.pdf#page={page}", "path": "/data/survey.pdf", "page": page},
        )
        for page in (5, 2)
    ]
    assert document_key(pages[0]) == document_key(pages[1])
    scored = [ScoredChunk(chunk=c, quality_score=0.8, source_reputation=0.8, recency=0.5, relevance=0.8) for c in pages]
    [citation] = validate_draft(draft(("Mutants.", [1, 2])), scored).citations
    assert (citation.label, citation.location) == ("survey.pdf", "p. 2; p. 5")


def test_records_of_one_jsonl_file_stay_separate_sources() -> None:
    records = [
        ContextChunk(
            chunk_id=f"r{n}",
            source_type="rag",
            content=f"Abstract {n} about mutants.",
            semantic_relevance=0.7,
            url="https://arxiv.org/abs/2101.0000" + str(n) if n == 1 else None,
            metadata={
                "source_key": f"/data/corpus.jsonl#{n}",
                "path": "/data/corpus.jsonl",
                "format": "jsonl",
                "record_id": str(n),
            },
        )
        for n in (1, 2)
    ]
    scored = [
        ScoredChunk(chunk=c, quality_score=0.8, source_reputation=0.8, recency=0.5, relevance=0.8) for c in records
    ]
    with_url, without = validate_draft(draft(("Mutants.", [1, 2])), scored).citations
    assert with_url.label == "https://arxiv.org/abs/2101.00001"
    assert without.label == "corpus.jsonl, record 2"


def test_passages_of_one_document_count_once_for_corroboration_and_confidence() -> None:
    one_doc = [file_passage(1, quality=0.9), file_passage(3, quality=0.5)]
    two_docs = [web_page(1, "one text", quality=0.9), web_page(2, "another text", quality=0.5)]
    # Another passage of the same document corroborates nothing; another document does.
    assert claim_confidence(one_doc, set()) == 0.9
    assert claim_confidence(two_docs, set()) == 0.95
    # Credibility is per source: the file's best passage stands for it once, not its weaker passage as a second vote.
    assert answer_confidence(one_doc, []) == 0.9
    assert answer_confidence(two_docs, []) == 0.7
    # A topic is fully covered by two independent sources, not by two passages of one.
    assert coverage_metrics("mutation", one_doc, one_doc).coverage_of_topics == {"mutation": 0.5}
    assert coverage_metrics("mutation", [one_doc[0], web_page(3, "Mutation helps.")], one_doc).coverage_of_topics == {
        "mutation": 1.0
    }


def test_near_duplicates_across_documents_count_once() -> None:
    original = web_page(1, "Equivalent mutants cannot be killed by any test.", quality=0.8)
    copy = web_page(2, "Equivalent mutants cannot be killed by any test at all.", quality=0.4, similar_to="web-1")
    assert len(independent_sources([original, copy])) == 1
    assert claim_confidence([original, copy], set()) == 0.8


def test_the_answer_assessment_counts_the_file_once() -> None:
    evidence = [file_passage(1, quality=0.9), file_passage(3, quality=0.5)]
    checked = validate_draft(draft(("Equivalent mutants distort the score.", [1, 2])), evidence)
    response = FinalResponse(
        query=Query(text="What limits mutation testing?", user_id="u", session_id="s"),
        answer="x",
        sections=checked.sections,
        citations=checked.citations,
    )
    supports = {s.chunk.chunk_id: Support(0.9, 0.9, 1.0, "embedding") for s in evidence}
    assessed = assess_answer(response, evidence, supports, [], ConfidenceSettings())
    assert "2 cited passage(s) of 1 source(s) from rag" in assessed.reason
    assert "evidence quality 0.90" in assessed.reason


async def test_passages_of_one_document_never_disagree_with_each_other() -> None:
    from researchcrew.contracts import AggregatedContext, EvaluatorInput

    def page(number: int, text: str) -> ContextChunk:  # each PDF page is its own document (own hash) in the index
        metadata = {"source_key": f"/data/survey.pdf#page={number}", "path": "/data/survey.pdf", "page": number}
        return ContextChunk(
            chunk_id=f"p{number}",
            source_type="rag",
            content=text,
            semantic_relevance=0.9,
            source_id=f"h{number}",
            title="Survey",
            metadata=metadata,
        )

    first = page(1, "Sparse attention is an active research area. The method reaches an accuracy of 92% on ImageNet.")
    second = page(4, "We revisit the method under a fixed budget. On ImageNet, its accuracy is only 75%.")
    other = web_page(1, "Independent replication. On ImageNet, the method's accuracy is only 75%.").chunk
    other = other.model_copy(update={"semantic_relevance": 0.9})
    output = await Evaluator().run(
        EvaluatorInput(aggregated_context=AggregatedContext(query_text="accuracy", chunks=[first, second, other]))
    )
    pairs = [{c.chunk_id_a, c.chunk_id_b} for c in output.contradictions_found]
    assert {"p1", "p4"} not in pairs  # the survey does not disagree with itself ...
    assert {"p1", "web-1"} in pairs  # ... but another source still disagrees with it


def test_revalidation_keeps_one_citation_per_source_and_is_idempotent() -> None:
    evidence = [file_passage(1), file_passage(3), web_page(1, "Mutation testing seeds small faults.")]
    checked = validate_draft(draft(("One.", [1]), ("Two.", [2]), ("Three.", [3])), evidence)
    response = FinalResponse(
        query=Query(text="q", user_id="u", session_id="s"),
        answer="x",
        sections=checked.sections,
        citations=checked.citations,
        answer_kind="extractive",
    )
    once = validate_citations(response, evidence)
    twice = validate_citations(once, evidence)
    assert [c.model_dump() for c in once.citations] == [c.model_dump() for c in checked.citations]
    assert [c.model_dump() for c in twice.citations] == [c.model_dump() for c in once.citations]
    assert once.citation_stats.removed == 0


def test_an_answer_stored_before_grouping_still_reads() -> None:
    old = {"number": 1, "chunk_id": "c1", "source_type": "rag", "title": "T", "snippet": "s", "location": None}
    citation = Citation.model_validate(old)
    assert (citation.chunk_ids, citation.passages, citation.label) == (["c1"], [], None)


def test_the_extractive_answer_cites_the_file_once_and_the_cli_names_it() -> None:
    evidence = [file_passage(1), file_passage(3)]
    output = ExtractiveSynthesizer().answer(request(evidence, question="What are the limitations of mutation testing?"))
    response = output.final_response
    assert len(response.citations) == 1
    assert {n for s in response.sections for c in s.claims for n in c.citations} == {1}
    listing = render_answer(response).partition("\nSources:\n")[2].splitlines()[0].strip()
    assert listing == "[1] Mutation testing — mutation.md, § Limitations, passages 2 and 4 of 4 (rag)"
    assert HASH not in render_answer(response)


def test_combined_location_of_passages_without_places_is_none() -> None:
    assert combined_location([{}, {"status_code": 200}]) is None
