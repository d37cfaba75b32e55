"""The quick pipeline with a structured stage (issue 22 item 4): the route is in the answer and the events, a table
answers with every shown row cited and says how many more rows exist, too little falls back to retrieval, an
ambiguous label is asked about, and a failing stage is data. Extractive path (no LLM), the real citation check."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from researchcrew.contracts import FilteredContext, ProgressEvent, ScoredChunk
from researchcrew.contracts.request import ResearchRequest
from researchcrew.contracts.tables import AnswerTable, StructuredOutcome, StructuredRequest, TableRow
from researchcrew.pipeline._hybrid import focused
from researchcrew.pipeline.flow import run_question
from researchcrew.pipeline.synthesize._citations import validate_citations
from researchcrew.pipeline.synthesize.extractive import ExtractiveSynthesizer
from researchcrew.testing.stages import PassThroughEvaluator, ScriptedRetriever, relevant_chunk, scripted_stages
from tests.tables.support import (
    AMBIGUOUS_QUESTION,
    PANELS_QUESTION,
    TOO_LITTLE_QUESTION,
    FixedStage,
    panels_outcome,
    sheet_chunk,
)

TEXT = "Solar panels convert sunlight into electricity; their width varies by model and maker."


class Saved:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[dict[str, Any]] = []

    async def __call__(
        self,
        *,
        user_id: str,
        session_id: str,
        response_id: str,
        question: str,
        table: AnswerTable,
        rows: Sequence[TableRow],
    ) -> None:
        if self.fail:
            raise OSError("disk full")
        self.calls.append({"user_id": user_id, "session_id": session_id, "table": table, "rows": list(rows)})


def stages(stage: Any, retriever: ScriptedRetriever, **overrides: Any) -> Any:
    return scripted_stages(
        retriever,
        evaluator=PassThroughEvaluator(),
        synthesizer=ExtractiveSynthesizer(),
        fallback_synthesizer=ExtractiveSynthesizer(),
        validate_citations=validate_citations,
        structured=stage,
        **overrides,
    )


def ask(question: str) -> ResearchRequest:
    return ResearchRequest(question=question, user_id="ada", session_id="s1")


async def test_a_structured_table_answers_with_cited_rows_and_says_how_many_more() -> None:
    retriever = ScriptedRetriever([relevant_chunk("text", 0.9, TEXT)])
    saved = Saved()
    events: list[ProgressEvent] = []
    response = await run_question(
        stages(FixedStage(), retriever, save_table=saved), ask(PANELS_QUESTION), on_event=events.append
    )
    assert retriever.requests == []  # answered from annotations: no source searched
    assert response.route is not None and response.route.route == "structured"
    assert response.route.tried == ["structured"]
    table = response.table
    assert table is not None and table.total_rows == 23 and len(table.rows) == 10 and table.more_rows == 13
    cited = {citation.number: citation for citation in response.citations}
    for row in table.rows:  # every row shown is cited, by the passage it came from
        assert row.citation is not None and cited[row.citation].chunk_id == row.chunk_id
    assert "| Panel | Width (m) | Source |" in response.answer
    assert f"| SP-01 | 1.01 | [{table.rows[0].citation}] |" in response.answer
    assert "13 more rows — say 'show the rest' or 'export that table'." in response.answer
    assert "converted to m" in response.answer
    assert response.answer.startswith(
        "23 rows match “Solar panels with a width of at most 1.2 m”, from 23 documents. "
        "Filters applied: Width at most 1.2 m."
    )
    assert TEXT not in response.answer  # the retrieved passage is not quoted beside the table
    assert response.confidence_level == "high" and "23 of 23 rows" in (response.final_reason or "")
    stored = saved.calls[0]
    assert (stored["user_id"], stored["session_id"], stored["table"].table_id) == ("ada", "s1", table.table_id)
    assert len(stored["rows"]) == 23
    # Only the shown rows' passages are evaluated and cited; the other 13 stay with the persisted result set.
    [retrieved] = [event for event in events if event.stage == "retrieve" and event.status == "finished"]
    assert retrieved.detail["structured"] is True and retrieved.detail["chunks"] == 10
    route_events = [event for event in events if event.stage == "route"]
    assert [event.status for event in route_events] == ["started", "finished"]
    assert route_events[1].detail["route"] == "structured" and route_events[1].detail["rows"] == 23


async def test_too_little_on_the_structured_route_falls_back_to_retrieval() -> None:
    retriever = ScriptedRetriever([relevant_chunk("text", 0.9, TEXT)])
    response = await run_question(stages(FixedStage(), retriever), ask(TOO_LITTLE_QUESTION))
    assert len(retriever.requests) == 1
    assert response.table is None and response.answer_kind == "extractive"
    assert response.route is not None and response.route.tried == ["structured", "hybrid"]


async def test_an_ambiguous_label_asks_which_field_was_meant() -> None:
    retriever = ScriptedRetriever([relevant_chunk("text", 0.9, TEXT)])
    response = await run_question(stages(FixedStage(), retriever), ask(AMBIGUOUS_QUESTION))
    assert retriever.requests == []
    assert response.answer_kind == "clarification" and response.clarification is not None
    assert response.clarification.questions[0].options == ["Width (m)", "Height (m)", "Weight (kg)"]
    assert "- Height (m)" in response.answer


async def test_a_conceptual_question_takes_the_long_text_route() -> None:
    retriever = ScriptedRetriever([relevant_chunk("text", 0.9, TEXT)])
    stage = FixedStage()
    response = await run_question(stages(stage, retriever), ask("How do solar panels work?"))
    assert stage.requests[0].user_id == "ada" and stage.requests[0].page_size == 10
    assert len(retriever.requests) == 1 and response.table is None
    assert response.route is not None and (response.route.route, response.route.tried) == ("long_text", ["long_text"])


class Failing:
    def __init__(self, hang: bool) -> None:
        self.hang = hang

    async def run(self, request: StructuredRequest, /) -> StructuredOutcome:
        if self.hang:
            await asyncio.Event().wait()
        raise RuntimeError("annotations index is corrupt")


async def test_a_failing_or_hanging_stage_is_data_and_retrieval_answers() -> None:
    for hang in (False, True):
        retriever = ScriptedRetriever([relevant_chunk("text", 0.9, TEXT)])
        response = await run_question(stages(Failing(hang), retriever, structured_deadline_s=0.2), ask(PANELS_QUESTION))
        assert len(retriever.requests) == 1 and response.answer_kind == "extractive"
        assert response.route is not None and response.route.route == "long_text"
        assert ("did not finish" if hang else "failed (RuntimeError)") in response.route.reason


async def test_a_table_that_cannot_be_kept_says_so() -> None:
    retriever = ScriptedRetriever([])
    response = await run_question(stages(FixedStage(), retriever, save_table=Saved(fail=True)), ask(PANELS_QUESTION))
    assert response.table is not None
    assert any("other 13 rows" in caveat and "could not be kept" in caveat for caveat in response.caveats)


async def test_without_a_structured_stage_nothing_changes() -> None:
    retriever = ScriptedRetriever([relevant_chunk("text", 0.9, TEXT)])
    events: list[ProgressEvent] = []
    response = await run_question(stages(None, retriever), ask(PANELS_QUESTION), on_event=events.append)
    assert response.route is None and response.table is None
    assert not [event for event in events if event.stage == "route"]


async def test_the_hybrid_route_searches_the_text_too_and_states_the_table_before_it() -> None:
    outcome = panels_outcome(12)
    hybrid = outcome.model_copy(
        update={"route": outcome.route.model_copy(update={"route": "hybrid", "tried": ["hybrid"]})}
    )
    retriever = ScriptedRetriever([relevant_chunk("text", 0.9, TEXT)])
    saved = Saved()
    response = await run_question(
        stages(FixedStage({PANELS_QUESTION: hybrid}), retriever, save_table=saved), ask(PANELS_QUESTION)
    )
    assert len(retriever.requests) == 1  # the text was searched as well
    assert response.route is not None and response.route.tried == ["hybrid"]
    table = response.table
    assert table is not None and len(table.rows) == 10 and table.more_rows == 2
    assert len(saved.calls[0]["rows"]) == 12  # the whole result set is kept for paging and export
    # The table's answer first, its rows cited in reading order, then the passages' synthesis.
    assert [row.citation for row in table.rows] == list(range(1, 11))
    answer = response.answer
    assert answer.startswith("12 rows match “Solar panels with a width of at most 1.2 m”, from 12 documents.")
    more = answer.index("2 more rows — say 'show the rest' or 'export that table'.")
    assert answer.index("| SP-01 | 1.01 | [1] |") < answer.index("| SP-10 | 1.1 | [10] |") < more
    # The text is written from the passages of the rows' documents: the other document searched is not quoted.
    assert answer.index("- Panel SP-01 spec sheet. Width: 1.01 m. Power: 301 W [1].") > more
    assert TEXT not in answer
    cited = {citation.number: citation.chunk_id for citation in response.citations}
    assert all(cited[row.citation] == row.chunk_id for row in table.rows if row.citation) and len(cited) == 10
    # Every statement is cited: one per row shown, then the synthesis's.
    claims = [claim for section in response.sections for claim in section.claims]
    assert [claim.citations for claim in claims[:10]] == [[number] for number in range(1, 11)]
    assert claims[0].text == "Panel: SP-01; Width (m): 1.01" and claims[10].citations == [1]


def test_the_hybrid_text_falls_back_to_all_the_evidence_when_no_row_document_is_in_it() -> None:
    outcome = panels_outcome(3)
    other = ScoredChunk(
        chunk=relevant_chunk("text", 0.9, TEXT), quality_score=0.8, source_reputation=0.7, recency=0.5, relevance=0.9
    )
    row = other.model_copy(update={"chunk": sheet_chunk(2)})
    both = FilteredContext(query_text=PANELS_QUESTION, chunks=[other, row])
    assert [scored.chunk.chunk_id for scored in focused(both, outcome).chunks] == ["sheet-2"]
    alone = FilteredContext(query_text=PANELS_QUESTION, chunks=[other])
    assert focused(alone, outcome) == alone
