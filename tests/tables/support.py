"""A small real ``StructuredStage`` for the tests of issue 22's doors: it answers the questions it was given with
fixed outcomes (rows extracted from spec-sheet passages), and any other question with the long-text route."""

from __future__ import annotations

from researchcrew.contracts import ContextChunk
from researchcrew.contracts.tables import (
    AnswerTable,
    RouteDecision,
    StructuredOutcome,
    StructuredRequest,
    TableColumn,
    TableRow,
)

PANELS_QUESTION = "Which solar panels have a width of at most 1.2 m?"
AMBIGUOUS_QUESTION = "List the size of every solar panel"
TOO_LITTLE_QUESTION = "Which solar panels weigh less than 5 kg?"


def sheet_chunk(number: int) -> ContextChunk:
    """The spec sheet passage of panel ``number`` (one row each)."""
    return ContextChunk(
        chunk_id=f"sheet-{number}",
        source_type="rag",
        content=f"Panel SP-{number:02d} spec sheet. Width: {1.0 + number / 100:.2f} m. Power: {300 + number} W.",
        semantic_relevance=0.9,
        title=f"SP-{number:02d} spec sheet",
        tool_name="rag_search",
        metadata={"page": 1},
    )


def panels_outcome(rows: int, page_size: int = 10) -> StructuredOutcome:
    columns = [TableColumn(name="Panel"), TableColumn(name="Width", kind="number", unit="m")]
    every = [
        TableRow(
            values=[f"SP-{number:02d}", round(1.0 + number / 100, 2)],
            chunk_id=f"sheet-{number}",
            document=f"SP-{number:02d} spec sheet",
            location="p. 1",
        )
        for number in range(1, rows + 1)
    ]
    table = AnswerTable(
        title="Solar panels with a width of at most 1.2 m",
        columns=columns,
        rows=every[:page_size],
        total_rows=rows,
        notes=["Widths given in mm were converted to m."],
        filters=["Width at most 1.2 m"],
    )
    route = RouteDecision(
        route="structured",
        intent="enumeration",
        fallbacks=["hybrid", "long_text"],
        reason="an enumeration with a numeric filter on a field the annotations cover",
        tried=["structured"],
    )
    return StructuredOutcome(
        route=route,
        table=table,
        all_rows=every,
        evidence=[sheet_chunk(number) for number in range(1, rows + 1)],
        verified_rows=rows,  # each row's values are in its spec sheet passage as written
    )


def ambiguous_outcome() -> StructuredOutcome:
    route = RouteDecision(route="structured", intent="enumeration", reason="'size' names several fields")
    return StructuredOutcome(route=route, clarification=["Width (m)", "Height (m)", "Weight (kg)"])


def too_little_outcome() -> StructuredOutcome:
    route = RouteDecision(
        route="structured",
        intent="enumeration",
        fallbacks=["hybrid", "long_text"],
        reason="no annotation has a weight",
        tried=["structured"],
    )
    return StructuredOutcome(route=route)


class FixedStage:
    """A ``StructuredStage`` with a fixed outcome per question; records the requests."""

    def __init__(self, outcomes: dict[str, StructuredOutcome] | None = None) -> None:
        self.outcomes = outcomes if outcomes is not None else default_outcomes()
        self.requests: list[StructuredRequest] = []

    async def run(self, request: StructuredRequest, /) -> StructuredOutcome:
        self.requests.append(request)
        found = self.outcomes.get(request.question)
        if found is not None:
            return found
        return StructuredOutcome(
            route=RouteDecision(route="long_text", intent="conceptual", reason="a conceptual question")
        )


def default_outcomes() -> dict[str, StructuredOutcome]:
    return {
        PANELS_QUESTION: panels_outcome(23),
        AMBIGUOUS_QUESTION: ambiguous_outcome(),
        TOO_LITTLE_QUESTION: too_little_outcome(),
    }
