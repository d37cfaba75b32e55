"""Following references: arXiv ids in one request, named documents through a scoped knowledge-base search, list
entries, sections; kept only when relevant to the sub-question; stopped by depth, visits, convergence, limits and
time — and every reference gets a record saying what happened."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from researchcrew.contracts import ContextChunk, RetrieverInput, RetrieverOutput
from researchcrew.deep._follow import FollowingRetriever, ReferenceFollower, relevance_to, title_matches
from researchcrew.settings import DeepResearchSettings
from researchcrew.testing import FakeTool, fake_chunk
from researchcrew.testing.stages import ScriptedRetriever
from researchcrew.text.terms import term_set
from researchcrew.tools.base import Tool

BLS = fake_chunk(
    "arxiv",
    1,
    chunk_id="arxiv:2104.12255v1",
    source_id="2104.12255v1",
    title="0",
    content="This article discusses crypto bugs in four BLS signatures' libraries that revolve around 0.",
)
HOT_JUPITERS = fake_chunk(
    "arxiv", 2, chunk_id="arxiv:astro-ph/0601001v1", source_id="astro-ph/0601001v1", content="Hot Jupiters are rare."
)
QUESTION = "Which bugs were found in BLS signature libraries?"


class KnowledgeFake(Tool):
    """A knowledge base of documents (title, passages with headings) that honours doc_ids and metadata filters."""

    name: ClassVar[str] = "rag_search"
    description: ClassVar[str] = "fake knowledge base"
    source_type: ClassVar[str] = "rag"

    def __init__(self, documents: dict[str, dict[str, Any]]) -> None:
        self.documents = documents
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def _search(
        self,
        query: str,
        *,
        num_results: int = 5,
        min_relevance: float | None = None,
        filters: dict[str, Any] | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
    ) -> Sequence[ContextChunk]:
        self.calls.append((query, {"filters": filters, "num_results": num_results}))
        wanted = term_set(query)
        hits: list[ContextChunk] = []
        for doc_id, document in self.documents.items():
            if filters and "doc_ids" in filters and doc_id not in filters["doc_ids"]:
                continue
            if filters and "metadata" in filters and document.get("metadata") != filters["metadata"]:
                continue
            for position, (heading, text) in enumerate(document["passages"]):
                overlap = len(wanted & term_set(f"{document['title']} {text}")) / max(1, len(wanted))
                hits.append(
                    fake_chunk(
                        "rag",
                        position,
                        chunk_id=f"{doc_id}:{position}",
                        source_id=doc_id,
                        title=document["title"],
                        content=text,
                        semantic_relevance=round(min(1.0, overlap), 3),
                        metadata={"heading": heading},
                    )
                )
        hits.sort(key=lambda chunk: chunk.semantic_relevance, reverse=True)
        return hits[:num_results]


METAL = {
    "metal": {
        "title": "METAL: Metamorphic Testing Framework for Analyzing Large-Language Model Qualities",
        "passages": [
            ("1 Introduction", "Metamorphic relations evaluate large language model qualities such as robustness."),
            ("3.2 Relations", "Each metamorphic relation perturbs the input text and compares the model outputs."),
            ("References", "References\n[1] Chen. Metamorphic testing: a review. arXiv:2104.12255."),
        ],
    }
}


def follower(arxiv: Tool | None = None, knowledge: Tool | None = None, **settings: Any) -> ReferenceFollower:
    return ReferenceFollower(arxiv=arxiv, knowledge=knowledge, settings=DeepResearchSettings(**settings))


def citing(text: str, number: int = 1, source_type: str = "web", **fields: Any) -> ContextChunk:
    return fake_chunk(source_type, number, content=text, **fields)


def test_relevance_and_title_matching() -> None:
    assert relevance_to(QUESTION, BLS, scoped=False) >= 0.75
    assert relevance_to(QUESTION, HOT_JUPITERS, scoped=False) == 0.0
    assert title_matches("Metamorphic Testing for Pose Estimation", "“Metamorphic testing for pose estimation”")
    assert title_matches(
        METAL["metal"]["title"],
        "[2] Hyland. METAL: Metamorphic Testing Framework for Analyzing Large-Language Model Qualities. 2023.",
    )
    assert not title_matches("Testing", "A completely different paper title")


async def test_arxiv_ids_are_looked_up_in_one_request_and_kept_when_relevant() -> None:
    arxiv = FakeTool("arxiv", chunks=[BLS, HOT_JUPITERS])
    follow = follower(arxiv)
    evidence = [
        citing("Bugs in BLS libraries: arXiv:2104.12255. Unrelated: arXiv:astro-ph/0601001 and arXiv:1111.11111.")
    ]
    kept = await follow.follow(1, QUESTION, evidence, time_limit_s=5)

    assert len(arxiv.calls) == 1
    assert sorted(arxiv.calls[0][0].split()) == ["1111.11111", "2104.12255", "astro-ph/0601001"]
    assert [chunk.chunk_id for chunk in kept] == ["arxiv:2104.12255v1"]
    assert kept[0].semantic_relevance >= 0.75
    assert kept[0].metadata["followed_reference"] == {
        "kind": "arxiv",
        "target": "2104.12255",
        "found_in": "web-1",
        "depth": 1,
    }
    outcomes = {record.target: (record.outcome, record.reason) for record in follow.records}
    assert outcomes["2104.12255"][0] == "kept" and "≥ 0.50" in outcomes["2104.12255"][1]
    assert (
        outcomes["astro-ph/0601001"][0] == "rejected" and "below the threshold 0.50" in outcomes["astro-ph/0601001"][1]
    )
    assert outcomes["1111.11111"] == ("unresolved", "arXiv has no paper 1111.11111")


async def test_a_failing_or_missing_source_leaves_the_reference_unresolved_with_the_reason() -> None:
    down = follower(FakeTool("arxiv", fail_with=("http_error", "arXiv answered HTTP 503")))
    await down.follow(1, QUESTION, [citing("See arXiv:2104.12255.")], time_limit_s=5)
    assert down.records[0].outcome == "unresolved" and "http_error — arXiv answered HTTP 503" in down.records[0].reason
    none = follower()
    await none.follow(
        1,
        QUESTION,
        [citing('See arXiv:2104.12255 and the paper "Metamorphic Testing in Practice Today".')],
        time_limit_s=5,
    )
    assert [(r.kind, r.outcome, r.reason) for r in none.records] == [
        ("arxiv", "unresolved", "no arXiv source to look the id up in"),
        ("named_document", "unresolved", "no knowledge base to look it up in"),
    ]


async def test_a_named_document_is_found_by_title_then_read_by_a_scoped_search() -> None:
    knowledge = KnowledgeFake(METAL)
    follow = follower(knowledge=knowledge)
    text = f'Quality of LLMs is assessed in the paper "{METAL["metal"]["title"]}".'
    kept = await follow.follow(
        2, "How do metamorphic relations evaluate large language model qualities?", [citing(text)], time_limit_s=5
    )
    assert knowledge.calls[0][1]["filters"] is None  # the registry look-up: the title, unscoped
    assert knowledge.calls[1][1]["filters"] == {"doc_ids": ["metal"]}  # then the document, for the sub-question
    assert kept and kept[0].chunk_id == "metal:0" and kept[0].source_id == "metal"
    assert follow.records[0].outcome == "kept" and "knowledge-base document “METAL" in follow.records[0].reason


async def test_numbered_citations_use_the_list_in_the_passage_or_in_the_document() -> None:
    knowledge = KnowledgeFake(METAL)
    arxiv = FakeTool("arxiv", chunks=[BLS])
    follow = follower(arxiv, knowledge)
    in_the_passage = citing(
        "Relations evaluate LLMs [2].\nReferences\n[2] Hyland et al. METAL: Metamorphic Testing Framework for "
        "Analyzing Large-Language Model Qualities. 2023."
    )
    question = "How do metamorphic relations evaluate large language model qualities?"
    kept = await follow.follow(1, question, [in_the_passage], time_limit_s=5)
    assert kept and {chunk.source_id for chunk in kept} == {"metal"}
    # A knowledge-base passage citing [1] without its list: the list is found in its own document.
    own = fake_chunk("rag", 5, content="This builds on earlier work [1].", source_id="metal", chunk_id="metal:9")
    kept = await follow.follow(3, QUESTION, [own], time_limit_s=5)
    assert ({"doc_ids": ["metal"]}, "references bibliography") in [(o["filters"], q) for q, o in knowledge.calls]
    assert [chunk.chunk_id for chunk in kept] == ["arxiv:2104.12255v1"]


async def test_a_section_is_read_from_the_citing_document() -> None:
    knowledge = KnowledgeFake(METAL)
    follow = follower(knowledge=knowledge)
    own = fake_chunk(
        "rag", 5, content="The relations are listed in Section 3.2.", source_id="metal", chunk_id="metal:7"
    )
    kept = await follow.follow(1, "Which metamorphic relations perturb the input text?", [own], time_limit_s=5)
    assert [chunk.chunk_id for chunk in kept] == ["metal:1"]  # the passage under "3.2 Relations"


async def test_references_of_references_are_followed_to_the_depth_limit() -> None:
    second_hand = fake_chunk(
        "arxiv",
        3,
        chunk_id="arxiv:1707.08567v1",
        source_id="1707.08567v1",
        content="BLS signature libraries had bugs; see also arXiv:2104.12255 for the zero bugs.",
    )
    arxiv = FakeTool("arxiv", chunks=[BLS, second_hand])
    deep = follower(arxiv)
    kept = await deep.follow(1, QUESTION, [citing("Survey: arXiv:1707.08567.")], time_limit_s=5)
    assert [chunk.chunk_id for chunk in kept] == ["arxiv:1707.08567v1", "arxiv:2104.12255v1"]
    assert [(r.target, r.depth, r.outcome) for r in deep.records] == [
        ("1707.08567", 1, "kept"),
        ("2104.12255", 2, "kept"),
    ]

    shallow = follower(FakeTool("arxiv", chunks=[BLS, second_hand]), follow_depth=1)
    await shallow.follow(1, QUESTION, [citing("Survey: arXiv:1707.08567.")], time_limit_s=5)
    assert [(r.depth, r.outcome, r.reason) for r in shallow.records][1] == (2, "skipped", "depth limit (1) reached")


async def test_a_reference_is_looked_up_once_per_sub_question_and_resolved_once_per_run() -> None:
    arxiv = FakeTool("arxiv", chunks=[BLS])
    follow = follower(arxiv)
    evidence = [citing("arXiv:2104.12255", 1), citing("again arXiv:2104.12255", 2)]
    await follow.follow(1, QUESTION, evidence, time_limit_s=5)
    await follow.follow(2, QUESTION, evidence, time_limit_s=5)
    assert len(arxiv.calls) == 1  # resolved once for the run
    assert [(r.sub_question, r.outcome) for r in follow.records] == [
        (1, "kept"),
        (2, "kept"),
    ]  # judged per sub-question


async def test_the_same_document_coming_back_stops_following_convergence() -> None:
    knowledge = KnowledgeFake(METAL)
    follow = follower(knowledge=knowledge, convergence_repeats=2)
    own = fake_chunk(
        "rag", 5, content="See Section 1, Section 3.2 and Appendix A.", source_id="metal", chunk_id="metal:8"
    )
    await follow.follow(1, "metamorphic relations of large language models", [own], time_limit_s=5)
    outcomes = [(r.target, r.outcome) for r in follow.records]
    assert outcomes[:2] == [("1", "kept"), ("3.2", "kept")]  # the second makes the document come back twice
    assert outcomes[2] == ("A", "skipped") and follow.records[2].reason.startswith("convergence: “METAL")


async def test_look_up_limit_and_token_budget() -> None:
    limited = follower(FakeTool("arxiv", chunks=[BLS]), max_references=1)
    await limited.follow(1, QUESTION, [citing("arXiv:2104.12255 and doi:10.1000/abc.")], time_limit_s=5)
    doi = next(record for record in limited.records if record.kind == "doi")
    assert doi.outcome == "skipped" and "look-up limit (1" in doi.reason
    frugal = follower(FakeTool("arxiv", chunks=[BLS]), reference_token_budget=5)
    await frugal.follow(1, QUESTION, [citing("arXiv:2104.12255")], time_limit_s=5)
    await frugal.follow(1, QUESTION, [citing("doi:10.1000/abc", 2)], time_limit_s=5)
    assert frugal.records[-1].outcome == "skipped" and "token budget" in frugal.records[-1].reason


async def test_a_hanging_source_is_cut_off_at_the_time_limit() -> None:
    follow = follower(FakeTool("arxiv", hang=True))
    started = time.monotonic()
    kept = await follow.follow(1, QUESTION, [citing("arXiv:2104.12255")], time_limit_s=0.3)
    assert kept == [] and time.monotonic() - started < 2.0
    assert follow.records[0].outcome == "unresolved" and follow.records[0].reason == "no answer within the time left"


async def test_the_following_retriever_adds_the_kept_passages_to_the_evidence() -> None:
    arxiv = FakeTool("arxiv", chunks=[BLS])
    inner = ScriptedRetriever([citing("Bugs in BLS libraries: arXiv:2104.12255.")])
    retriever = FollowingRetriever(inner, follower(arxiv), 1, QUESTION)
    output = await retriever.run(RetrieverInput(query_text=QUESTION, user_id="u", session_id="s", timeout_per_source=3))
    assert [chunk.chunk_id for chunk in output.aggregated_context.chunks] == ["web-1", "arxiv:2104.12255v1"]


class _SlowRetriever(ScriptedRetriever):
    def __init__(self, delay_s: float, *answers: list[ContextChunk]) -> None:
        super().__init__(*answers)
        self.delay_s = delay_s

    async def run(self, request: RetrieverInput) -> RetrieverOutput:
        await asyncio.sleep(self.delay_s)
        return await super().run(request)


async def test_following_gets_what_retrieval_left_of_the_stage_limit() -> None:
    # Retrieval used at least 0.4 s of a 0.5 s limit; following may have what is left (≤ 0.1 s), not a new 0.5 s.
    # Asserted on the limit the follower was given (the sleep guarantees the 0.4 s), so a busy machine cannot move it.
    inner = _SlowRetriever(0.4, [citing("Bugs in BLS libraries: arXiv:2104.12255.")])
    follow = follower(FakeTool("arxiv", hang=True))
    given: list[float] = []
    real_follow = follow.follow

    async def spy(index: int, sub_question: str, chunks: Sequence[ContextChunk], *, time_limit_s: float) -> Any:
        given.append(time_limit_s)
        return await real_follow(index, sub_question, chunks, time_limit_s=time_limit_s)

    follow.follow = spy  # type: ignore[method-assign]
    await FollowingRetriever(inner, follow, 1, QUESTION).run(
        RetrieverInput(query_text=QUESTION, user_id="u", session_id="s", time_limit_s=0.5)
    )
    assert len(given) == 1 and given[0] <= 0.1 + 1e-6
    assert follow.records and follow.records[0].outcome in ("unresolved", "skipped")

    spent = _SlowRetriever(0.3, [citing("Bugs in BLS libraries: arXiv:2104.12255.")])
    late = follower(FakeTool("arxiv", chunks=[BLS]))
    await FollowingRetriever(spent, late, 1, QUESTION).run(
        RetrieverInput(query_text=QUESTION, user_id="u", session_id="s", time_limit_s=0.2)
    )
    assert late.records[0].outcome == "skipped" and late.records[0].reason == "no time left for following references"


async def test_a_round_that_adds_no_new_source_stops_following_convergence() -> None:
    documents = {
        "metal": {
            "title": METAL["metal"]["title"],
            "passages": [
                ("1 Introduction", "Metamorphic relations evaluate large language model qualities such as robustness."),
                ("3.2 Relations", "Metamorphic relations of large language models perturb input, as arXiv:2104.12255."),
            ],
        },
        "notes": {
            "title": "Notes on metamorphic relations",
            "passages": [
                (
                    "1",
                    "Metamorphic relations for large language models: see the paper “" + METAL["metal"]["title"] + "”.",
                )
            ],
        },
    }
    metal_intro = fake_chunk(
        "rag",
        1,
        chunk_id="metal:intro",
        source_id="metal",
        title=documents["metal"]["title"],
        content="Large language models: the notes “Notes on metamorphic relations” (Hyland, 2024) list relations.",
    )
    question = "metamorphic relations of large language models"
    # Round 1 reads another document (new); round 2 only more passages of the first document (nothing new), so the
    # arXiv id one of them cites is not looked up although the depth limit would allow it.
    follow = follower(knowledge=KnowledgeFake(documents), arxiv=FakeTool("arxiv", chunks=[BLS]), follow_depth=3)
    kept = await follow.follow(1, question, [metal_intro], time_limit_s=5)
    assert [(r.kind, r.depth, r.outcome) for r in follow.records] == [
        ("named_document", 1, "kept"),
        ("named_document", 2, "kept"),
        ("arxiv", 3, "skipped"),
    ]
    assert follow.records[-1].reason == "convergence: depth 2 added no new source, only documents already read"
    assert {chunk.source_id for chunk in kept} == {"notes", "metal"}

    # With the limit at depth 2 the same reference is skipped for the limit: convergence names only what stopped
    # following before the limit would have (on a CPU whose scores made a run go deeper, references beyond the
    # limit were reported as convergence).
    limited = follower(knowledge=KnowledgeFake(documents), arxiv=FakeTool("arxiv", chunks=[BLS]), follow_depth=2)
    await limited.follow(1, question, [metal_intro], time_limit_s=5)
    assert [(r.depth, r.outcome, r.reason) for r in limited.records][-1] == (3, "skipped", "depth limit (2) reached")


async def test_a_document_read_in_several_passages_comes_back_once() -> None:
    # One scoped search returning three passages of a document counted as three returns, so with the default of
    # three the first title resolved stopped all following for the sub-question (seen on the reference corpus).
    documents = {
        "metal": {
            "title": METAL["metal"]["title"],
            "passages": [(str(n), f"Metamorphic relations of large language models, part {n}.") for n in range(3)],
        }
    }
    follow = follower(knowledge=KnowledgeFake(documents), arxiv=FakeTool("arxiv", chunks=[BLS]))
    evidence = [citing("See the paper “" + METAL["metal"]["title"] + "”; bugs: arXiv:2104.12255.")]
    await follow.follow(1, "BLS bugs and metamorphic relations", evidence, time_limit_s=5)
    assert [(r.kind, r.outcome) for r in follow.records] == [("named_document", "kept"), ("arxiv", "kept")]
    assert len(follow.records[0].resolved) == 3


async def test_a_document_cited_for_two_sub_questions_is_read_for_each() -> None:
    # The passages a scoped search chose for the first sub-question were reused for every later one.
    knowledge = KnowledgeFake(METAL)
    follow = follower(knowledge=knowledge)
    evidence = [citing(f'See the paper "{METAL["metal"]["title"]}".')]
    first = await follow.follow(1, "metamorphic relations large language model robustness", evidence, time_limit_s=5)
    second = await follow.follow(2, "metamorphic relation perturbs input text outputs", evidence, time_limit_s=5)
    assert first[0].chunk_id == "metal:0" and second[0].chunk_id == "metal:1"
    registry = [query for query, options in knowledge.calls if options["filters"] is None]
    assert len(registry) == 1  # which document the title names is still looked up once per run
