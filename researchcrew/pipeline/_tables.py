"""Structured answers in the quick pipeline (issue 22, seed 004 §6–9): running the structured stage under its
deadline, turning its outcome into the answer's table, and asking back when a label was ambiguous.

* ``run_structured`` runs the ``StructuredStage`` with what is left of the run (at most its own deadline); a stage
  that fails or runs out of time is data: the question goes on by normal retrieval, and the route says why.
* ``table_lead`` composes a table answer's text from the table (what was asked, how many rows match, filters,
  units converted, what it lists); ``table_assessment`` gives its confidence from the structured evidence (values
  found exactly as written in the passages the rows cite), not from passage similarity.
* ``attach_table`` maps each row's passage to the answer's citation number (adding a citation for a row whose
  passage the synthesis did not cite, so every row is cited), then appends the first rows as a Markdown table and
  how many more exist ("say 'show the rest' or 'export that table'").
* ``label_clarification`` is the clarifying question for an ambiguous label, listing the candidate fields.

On the hybrid route the same pieces compose the table's part of the answer, ahead of the passages' synthesis
(``pipeline/_hybrid.py``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from researchcrew.contracts import ContextChunk, FinalResponse, Query, SourceReport
from researchcrew.contracts.clarification import ClarificationRequest, ClarifyingQuestion
from researchcrew.contracts.synthesizer import AnswerSection, Citation, Claim
from researchcrew.contracts.tables import (
    AnswerTable,
    RouteDecision,
    RouteName,
    StructuredOutcome,
    StructuredRequest,
    TableRow,
)
from researchcrew.pipeline._assessment import AnswerAssessment
from researchcrew.pipeline.stages import StructuredStage
from researchcrew.settings import ConfidenceSettings
from researchcrew.text.answer_tables import cell_text, header_label, table_markdown

logger = logging.getLogger(__name__)

MAX_CANDIDATES = 8  # fields listed in a clarifying question (ClarifyingQuestion.options' cap)
DOUBT_FACTOR = 0.8  # a table answer's confidence per doubt (fields matched by meaning, a condition relaxed)


@dataclass(frozen=True)
class StructuredRun:
    """What the structured stage gave: its outcome, or why there is none (``failure``)."""

    outcome: StructuredOutcome | None
    failure: str | None = None

    @property
    def table(self) -> AnswerTable | None:
        return self.outcome.table if self.outcome is not None else None


async def run_structured(stage: StructuredStage, request: StructuredRequest) -> StructuredRun:
    """The stage's outcome within ``request.deadline_s``; never raises for what the stage did."""
    try:
        async with asyncio.timeout(request.deadline_s):
            return StructuredRun(await stage.run(request))
    except TimeoutError:
        logger.warning("the structured stage hit its %.2f s deadline; normal retrieval answers", request.deadline_s)
        return StructuredRun(None, f"the structured search did not finish within {request.deadline_s:.1f} s")
    except Exception as error:  # the outermost guard around a pluggable stage: a bug must not sink the question
        logger.exception("the structured stage raised; answering by normal retrieval")
        return StructuredRun(None, f"the structured search failed ({type(error).__name__})")


def shown_evidence(outcome: StructuredOutcome) -> list[ContextChunk]:
    """The passages of the rows the answer shows: what joins the evidence to evaluate and cite. The other rows'
    passages stay with the persisted result set (a thousand rows must not make a thousand passages to check)."""
    table = outcome.table
    if table is None:
        return []
    wanted = {row.chunk_id for row in table.rows if row.chunk_id is not None}
    return [chunk for chunk in outcome.evidence if chunk.chunk_id in wanted]


def long_text_evidence(run: StructuredRun) -> list[ContextChunk]:
    """The passages the long-text route found in the sections whose summaries matched (none on another route, or
    when no summary matched): they join the retrieval's evidence (``_long_text.with_long_text``)."""
    outcome = run.outcome
    if outcome is None or outcome.table is not None or outcome.route.route != "long_text":
        return []
    return list(outcome.evidence)


def route_after(run: StructuredRun, *, retrieval: bool) -> RouteDecision | None:
    """The route as it was followed: the stage's decision, with ``tried`` completed by the normal retrieval that
    ran after it (a fallback when the structured route found too little)."""
    if run.outcome is None:
        if run.failure is None:
            return None
        return RouteDecision(
            route="long_text", intent="conceptual", reason=run.failure[:1_000], tried=["long_text"] if retrieval else []
        )
    route = run.outcome.route
    tried: list[RouteName] = list(route.tried) or [route.route]
    if retrieval and route.route == "structured" and run.table is None:
        fallback: RouteName = next((name for name in route.fallbacks if name != "structured"), "hybrid")
        if fallback not in tried:
            tried.append(fallback)
    elif retrieval and route.route != "structured" and route.route not in tried:
        tried.append(route.route)
    return route.model_copy(update={"tried": tried})


def label_clarification(
    query: Query, question: str, candidates: Sequence[str], reports: Sequence[SourceReport]
) -> FinalResponse:
    """The answer that asks which field an ambiguous label meant, listing the candidate fields."""
    from researchcrew.pipeline.clarify import clarification_response

    options = [candidate[:200] for candidate in dict.fromkeys(candidates) if candidate.strip()][:MAX_CANDIDATES]
    listed = "\n".join(f"- {option}" for option in options)
    message = f"Your question could mean more than one field. Which one did you mean?\n\n{listed}"
    request = ClarificationRequest(
        reason="too_vague",
        question=question[:4_000],
        questions=[ClarifyingQuestion(facet="terms", question="Which field did you mean?", options=options)],
        message=message[:8_000],
    )
    return clarification_response(query, request, reports)


def table_lead(query: Query, run: StructuredRun) -> FinalResponse:
    """The answer's text when the structured route answered, composed from the table itself (the rows follow it,
    cited row by row, in ``attach_table``): what was asked, how many rows match and from how many documents, the
    filters applied, the values converted to another unit, what the table lists, and the aggregate asked for."""
    table = run.table
    outcome = run.outcome
    if table is None or outcome is None:
        return FinalResponse(
            query=query, answer="", answer_kind="extractive", confidence=0.0, confidence_level="insufficient"
        )
    return FinalResponse(
        query=query,
        answer=compose_table_text(table, outcome.all_rows or table.rows),
        answer_kind="extractive",
        confidence=0.0,
        confidence_level="insufficient",
    )


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


def compose_table_text(table: AnswerTable, rows: Sequence[TableRow]) -> str:
    """A table answer's text (see ``table_lead``); the "N more rows" line comes with the rendered table."""
    documents = len({row.document for row in rows if row.document})
    asked = table.title.strip().rstrip("?.") if table.title else "the question"
    matched = _count(table.total_rows, "row matches", "rows match")
    sources = f", from {_count(documents, 'document', 'documents')}" if documents else ""
    sentences = [f"{matched} “{asked}”{sources}."]
    if table.filters:
        sentences.append(f"Filters applied: {'; '.join(table.filters)}.")
    if table.converted:
        more = ", …" if table.converted > len(table.conversions) else ""
        examples = f": {'; '.join(table.conversions)}{more}" if table.conversions else ""
        sentences.append(f"{_count(table.converted, 'value', 'values')} written in another unit converted{examples}.")
    listed = [header_label(column) for column in table.columns if column.name != "document"]
    if listed:
        head = listed[:6] if len(listed) <= 6 else [*listed[:6], f"{len(listed) - 6} more fields"]
        shown = head[0] if len(head) == 1 else f"{', '.join(head[:-1])} and {head[-1]}"
        sentences.append(f"The table lists {shown} for each row, with the document it comes from.")
    names = {"count": "Count", "sum": "Total", "mean": "Mean", "min": "Minimum", "max": "Maximum"}
    for aggregate in table.aggregates:
        if aggregate.value is None:
            continue
        unit = f" {aggregate.unit}" if aggregate.unit else ""
        of = f" of {aggregate.field}" if aggregate.field else ""
        if not of and aggregate.operation == "count":
            of = " of documents"
        group = f" for {aggregate.group}" if aggregate.group else ""
        over = _count(aggregate.rows_used, "row", "rows")
        sentences.append(f"{names[aggregate.operation]}{of}{group}: {cell_text(aggregate.value)}{unit} (over {over}).")
    return " ".join(sentences)


def table_assessment(outcome: StructuredOutcome, settings: ConfidenceSettings) -> AnswerAssessment:
    """A table answer's confidence from its structured evidence, not passage similarity: the share of rows whose
    every value is in its cited passage exactly as written, lowered when fields were matched by meaning or a
    condition was relaxed (``outcome.doubts``)."""
    from researchcrew.pipeline._assessment import BAND_CAVEATS, BAND_CODES, band

    total = len(outcome.all_rows) or (outcome.table.total_rows if outcome.table else 0)
    if not total:
        return AnswerAssessment(0.0, "insufficient", f"{BAND_CODES['insufficient']}: no row matched", None)
    exact = min(outcome.verified_rows, total) / total
    factor = DOUBT_FACTOR ** len(outcome.doubts)
    confidence = round(max(0.0, min(1.0, exact * factor)), 4)
    level = band(confidence, settings)
    passages = len({row.chunk_id for row in outcome.all_rows if row.chunk_id})
    reason = (
        f"{BAND_CODES[level]}: structured evidence — {outcome.verified_rows} of {total} rows have every value exactly "
        f"as written in the passage they cite ({_count(passages, 'passage', 'passages')}, each with its document "
        "and location)"
    )
    if outcome.doubts:
        reason += f"; lowered because {' and '.join(outcome.doubts)} (×{factor:.2f})"
    return AnswerAssessment(confidence, level, reason[:500], BAND_CAVEATS.get(level))


def row_section(table: AnswerTable) -> AnswerSection | None:
    """One statement per shown row ("Panel: SP-01; Width (m): 1.01"), cited by the row's citation number; None
    when no row is cited."""
    labels = [header_label(column) for column in table.columns]
    claims = [
        Claim(text="; ".join(f"{label}: {cell_text(value)}" for label, value in pairs), citations=[row.citation])
        for row in table.rows
        if row.citation is not None and (pairs := list(zip(labels, row.values, strict=True)))
    ]
    return AnswerSection(heading="", claims=claims) if claims else None


def row_claims(response: FinalResponse) -> FinalResponse:
    """The table answer's statements: one per shown row, cited by the row's passage (``row_section``), so the
    answer's confidence is measured over the passages its rows come from."""
    table = response.table
    if table is None:
        return response
    section = row_section(table)
    return response.model_copy(update={"sections": [section] if section else []})


def citation_number(citations: Sequence[Citation], chunk_id: str | None) -> int | None:
    """The number of the citation that cites ``chunk_id`` (itself or as one of its passages)."""
    if chunk_id is None:
        return None
    for citation in citations:
        if citation.chunk_id == chunk_id or any(passage.chunk_id == chunk_id for passage in citation.passages):
            return citation.number
    return None


def cite_rows(rows: Sequence[TableRow], citations: list[Citation], evidence: dict[str, ContextChunk]) -> list[TableRow]:
    """Each row with its citation number; a row whose passage is not cited yet gets a new citation (appended to
    ``citations``). A row whose passage is unknown stays uncited."""
    from researchcrew.pipeline.synthesize._citations import citation_for

    cited: list[TableRow] = []
    for row in rows:
        number = citation_number(citations, row.chunk_id)
        if number is None and row.chunk_id is not None and row.chunk_id in evidence:
            number = max((citation.number for citation in citations), default=0) + 1
            citations.append(citation_for(number, evidence[row.chunk_id]))
        cited.append(row.model_copy(update={"citation": number}))
    return cited


def attach_table(response: FinalResponse, outcome: StructuredOutcome) -> tuple[FinalResponse, list[TableRow]]:
    """The answer with the structured table: rows cited, the first page shown in the text. Returns the whole
    result set too (cited as far as the answer's citations reach), for the session to persist."""
    table = outcome.table
    if table is None:
        return response, []
    evidence = {chunk.chunk_id: chunk for chunk in outcome.evidence}
    citations = list(response.citations)
    shown = cite_rows(table.rows, citations, evidence)
    everything = [*outcome.all_rows] or [*table.rows]
    all_rows = [row.model_copy(update={"citation": citation_number(citations, row.chunk_id)}) for row in everything]
    total = max(table.total_rows, table.offset + len(shown), len(all_rows))
    # Each answer's table gets its own id: a stage may give the same outcome (and id) to the same question twice.
    cited_table = table.model_copy(update={"rows": shown, "total_rows": total, "table_id": uuid.uuid4().hex})
    text = response.answer.rstrip()
    rendered = table_markdown(cited_table)
    answer = f"{text}\n\n{rendered}" if text else rendered
    updated = response.model_copy(update={"answer": answer, "citations": citations, "table": cited_table})
    return updated, all_rows


__all__ = [
    "StructuredRun",
    "attach_table",
    "citation_number",
    "cite_rows",
    "compose_table_text",
    "label_clarification",
    "long_text_evidence",
    "route_after",
    "row_claims",
    "row_section",
    "run_structured",
    "shown_evidence",
    "table_assessment",
    "table_lead",
]
