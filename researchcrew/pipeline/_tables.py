"""Structured answers in the quick pipeline (issue 22, seed 004 §6–9): running the structured stage under its
deadline, turning its outcome into the answer's table, and asking back when a label was ambiguous.

* ``run_structured`` runs the ``StructuredStage`` with what is left of the run (at most its own deadline); a stage
  that fails or runs out of time is data: the question goes on by normal retrieval, and the route says why.
* ``attach_table`` maps each row's passage to the answer's citation number (adding a citation for a row whose
  passage the synthesis did not cite, so every row is cited), then appends the first rows as a Markdown table and
  how many more exist ("say 'show the rest' or 'export that table'").
* ``label_clarification`` is the clarifying question for an ambiguous label, listing the candidate fields.
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
from researchcrew.pipeline.stages import StructuredStage
from researchcrew.text.answer_tables import cell_text, header_label, table_markdown

logger = logging.getLogger(__name__)

MAX_CANDIDATES = 8  # fields listed in a clarifying question (ClarifyingQuestion.options' cap)


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
    """The answer's opening when the structured route answered: what was found (the table follows it, cited row by
    row, in ``attach_table``); the route's reason when it gives one."""
    table = run.table
    total = table.total_rows if table is not None else 0
    what = f": {table.title}" if table is not None and table.title else ""
    rows = "row" if total == 1 else "rows"
    return FinalResponse(
        query=query,
        answer=f"Found {total} {rows} in the extracted facts and tables{what}.",
        answer_kind="extractive",
        confidence=0.0,
        confidence_level="insufficient",
    )


def row_claims(response: FinalResponse) -> FinalResponse:
    """The table answer's statements: one per shown row ("Panel: SP-01; Width (m): 1.01"), cited by the row's
    passage, so the answer's confidence is measured over the passages its rows come from."""
    table = response.table
    if table is None:
        return response
    labels = [header_label(column) for column in table.columns]
    claims = [
        Claim(text="; ".join(f"{label}: {cell_text(value)}" for label, value in pairs), citations=[row.citation])
        for row in table.rows
        if row.citation is not None and (pairs := list(zip(labels, row.values, strict=True)))
    ]
    return response.model_copy(update={"sections": [AnswerSection(heading="", claims=claims)] if claims else []})


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
    "label_clarification",
    "long_text_evidence",
    "route_after",
    "row_claims",
    "run_structured",
    "shown_evidence",
    "table_lead",
]
