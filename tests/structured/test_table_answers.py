"""A table answer's text and confidence (issue 22): composed from the table itself — what was asked, how many rows
match, the filters, the units converted, what the table lists — with a confidence from the structured evidence
(values found exactly as written in the passages the rows cite), never a passage quoted beside the table; rows past
the first page keep their document and location; the route prompt's tokens count in ``token_usage``. The issue's
example: a 3-row CSV of solar panels (SP-100 1.15 m, SP-200 1.32 m, SP-300 110 cm) among other documents."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from researchcrew.contracts.request import ResearchRequest
from researchcrew.contracts.tables import AnswerTable, StructuredRequest, TableRow
from researchcrew.knowledge.annotations import AnnotationIndex, SearchResult, doubts, index_for
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.knowledge.ingest import ingest_paths
from researchcrew.pipeline._structured import AnnotationStage
from researchcrew.pipeline._tables import table_assessment
from researchcrew.pipeline.flow import run_question
from researchcrew.pipeline.synthesize._citations import validate_citations
from researchcrew.pipeline.synthesize.extractive import ExtractiveSynthesizer
from researchcrew.settings import ConfidenceSettings
from researchcrew.testing.llm import FakeLLM
from researchcrew.testing.stages import PassThroughEvaluator, ScriptedRetriever, relevant_chunk, scripted_stages

QUESTION = "Which solar panels have a width of at most 1.2 m?"
UNRELATED = "Photovoltaic modules convert sunlight into electricity; efficiency depends on temperature."


class Saved:
    def __init__(self) -> None:
        self.rows: list[TableRow] = []

    async def __call__(self, *, table: AnswerTable, rows: Sequence[TableRow], **_: Any) -> None:
        self.rows = list(rows)


@pytest.fixture(scope="module")
def panels(module_kb: KnowledgeBase, tmp_path_factory: pytest.TempPathFactory) -> AnnotationIndex:
    folder = tmp_path_factory.mktemp("panels")
    (folder / "solar_panels.csv").write_text("Model,Width\nSP-100,1.15 m\nSP-200,1.32 m\nSP-300,110 cm\n")
    rows = "\n".join(f"| LP-{i} | {1000 + i} mm |" for i in range(1, 31))
    (folder / "lab_panels.md").write_text(f"# Lab solar panels\n\n| Model | Width |\n|---|---|\n{rows}\n")
    (folder / "notes.md").write_text(f"# Notes on photovoltaics\n\n{UNRELATED}\n")
    report = ingest_paths(module_kb, folder, progress=False)
    assert report.aborted is None and not report.errors
    index = index_for(module_kb)
    assert index is not None
    return index


def _stages(stage: Any, saved: Saved | None = None) -> Any:
    return scripted_stages(
        ScriptedRetriever([relevant_chunk("text", 0.95, UNRELATED)]),
        evaluator=PassThroughEvaluator(),
        synthesizer=ExtractiveSynthesizer(),
        fallback_synthesizer=ExtractiveSynthesizer(),
        validate_citations=validate_citations,
        structured=stage,
        save_table=saved,
    )


async def test_the_text_is_composed_from_the_table(panels: AnnotationIndex) -> None:
    saved = Saved()
    request = ResearchRequest(question=QUESTION, user_id="ada", session_id="s1")
    response = await run_question(_stages(AnnotationStage(panels), saved), request)
    assert response.route is not None and response.route.route == "structured"
    table = response.table
    assert table is not None and table.total_rows == 32  # SP-100, SP-300 and LP-1..LP-30 (1.001–1.030 m)
    lead = response.answer.split("\n\n")[0]
    assert lead.startswith(f"32 rows match “{QUESTION.rstrip('?')}”, from 2 documents.")
    assert "Filters applied: Width at most 1.2 m." in lead
    assert "31 values written in another unit converted: 1001 mm → 1.001 m (LP-1);" in lead  # not SP-100's 1.15 m
    listed = lead.split("The table lists ")[1]
    assert listed.startswith("Width (m) and Model for each row, with the document it comes from.")
    assert "22 more rows — say 'show the rest' or 'export that table'." in response.answer
    assert UNRELATED not in response.answer and "Model,Width" not in response.answer  # no passage quoted
    # Confidence from the structured evidence: every value is in its cited passage as written.
    assert (response.confidence, response.confidence_level) == (1.0, "high")
    assert response.final_reason is not None and "32 of 32 rows have every value exactly as written" in (
        response.final_reason
    )
    # Rows past the first page keep where they come from in the persisted result set.
    assert len(saved.rows) == 32
    for row in saved.rows[10:]:
        assert row.document and row.location and row.chunk_id
    assert (saved.rows[-1].values[2], saved.rows[-1].location) == ("SP-300", "solar panels, row 3")


async def test_doubts_lower_the_confidence(panels: AnnotationIndex) -> None:
    outcome = await AnnotationStage(panels).run(StructuredRequest(question=QUESTION))
    assert outcome.table is not None and outcome.doubts == [] and outcome.verified_rows == 32
    assert table_assessment(outcome, ConfidenceSettings()).confidence == 1.0
    both = doubts(SearchResult(matched_by="embedding", relaxed=True))
    assert both == ["the fields were matched by meaning, not by name", "a condition of the question was relaxed"]
    doubted = table_assessment(outcome.model_copy(update={"doubts": both[:1]}), ConfidenceSettings())
    assert (doubted.confidence, doubted.level) == (pytest.approx(0.8), "high")
    assert "matched by meaning" in doubted.reason
    assert table_assessment(outcome.model_copy(update={"doubts": both}), ConfidenceSettings()).level == "low"
    unverified = outcome.model_copy(update={"verified_rows": 10})
    assert table_assessment(unverified, ConfidenceSettings()).level == "insufficient"  # most rows unverified


async def test_the_route_prompt_counts_in_token_usage(panels: AnnotationIndex) -> None:
    reply = json.dumps({"route": "structured", "fallbacks": ["hybrid"], "reason": "widths are annotated"})
    llm = FakeLLM([reply])
    request = ResearchRequest(question=QUESTION, user_id="ada", session_id="s2")
    response = await run_question(_stages(AnnotationStage(panels, llm=llm)), request)
    assert response.route is not None and response.route.decided_by == "llm"
    usage = response.token_usage
    assert usage.routing.calls == 1 and usage.routing.prompt_tokens > 0
    assert usage.total.total_tokens == usage.routing.total_tokens  # the only LLM call of this answer
