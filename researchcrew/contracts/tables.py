"""Structured answers (seed 004, issue 22): the route a question took and the table of rows it answered with.

A structured question ("which studies report a sample size above 1,000?") is answered from annotations — facts and
table rows extracted at ingest, each with its provenance — rather than from quoted sentences. The answer carries the
rows it found as an :class:`AnswerTable`; the text shows the first rows and says how many more exist. The whole
result set is persisted with the session, so "show the rest" pages through it and "export that table" gives CSV.
"""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import Field, model_validator

from researchcrew.contracts._base import Contract
from researchcrew.contracts.chunks import ContextChunk

# "retrieval" appears only in ``RouteDecision.tried``: the long-text route found no matching summary and plain
# passage retrieval answered alone.
RouteName = Literal["structured", "hybrid", "long_text", "retrieval"]
Intent = Literal["enumeration", "numeric_lookup", "aggregate", "conceptual"]
CellValue = str | float | int | None
AggregateOperation = Literal["count", "sum", "mean", "min", "max"]


class RouteDecision(Contract):
    """Which retrieval route a question took, why, and what would have come next."""

    route: RouteName = Field(description="structured (annotations), hybrid (annotations + text), long_text.")
    intent: Intent = Field(description="What the question asks for, as classified.")
    fallbacks: list[RouteName] = Field(default_factory=list, description="Routes to try next, in order.")
    reason: str = Field(default="", max_length=1_000, description="Why this route, in one sentence.")
    decided_by: Literal["rules", "llm"] = Field(default="rules", description="Who chose: the rules or the LLM.")
    tried: list[RouteName] = Field(
        default_factory=list,
        description="Routes actually run, in order; more than one when a route found too little and fell back "
        "(`retrieval`: no summary matched on the long-text route, plain retrieval answered).",
    )


class TableColumn(Contract):
    """One column of an answer table."""

    name: str = Field(min_length=1, max_length=200, description="The column's label.")
    kind: Literal["text", "number", "date"] = Field(default="text", description="The type of the column's values.")
    unit: str | None = Field(default=None, max_length=40, description="The unit numbers are given in, if any.")


class TableRow(Contract):
    """One row of an answer table; every row is cited."""

    values: list[CellValue] = Field(description="One value per column, in the columns' order.")
    citation: int | None = Field(
        default=None, ge=1, description="The answer's citation number of the passage this row comes from."
    )
    chunk_id: str | None = Field(default=None, description="The passage (chunk) the row was extracted from.")
    document: str | None = Field(default=None, description="The document's title or file name.")
    location: str | None = Field(default=None, description="Page or section within the document.")


class AggregateResult(Contract):
    """An aggregate computed over the matching rows (count, sum, mean, min, max), possibly per group."""

    operation: AggregateOperation = Field(description="count, sum, mean, min or max.")
    field: str | None = Field(default=None, description="The property aggregated (None for count).")
    value: float | None = Field(default=None, description="The result; None when no row had a usable value.")
    unit: str | None = Field(default=None, description="The unit of the result.")
    group: str | None = Field(default=None, description="The group's key, when grouped.")
    rows_used: int = Field(default=0, ge=0, description="How many rows went into the value.")
    rows_skipped: int = Field(default=0, ge=0, description="Rows left out (no value, or a unit not convertible).")


class AnswerTable(Contract):
    """Rows found for a structured question. ``rows`` is the slice shown in this answer; ``total_rows`` is the
    size of the persisted result set that "show the rest" and CSV export read."""

    table_id: str = Field(default_factory=lambda: uuid.uuid4().hex, description="Id for paging and export.")
    title: str = Field(default="", max_length=500, description="What the table lists.")
    columns: list[TableColumn] = Field(default_factory=list, description="The columns, in display order.")
    rows: list[TableRow] = Field(default_factory=list, description="The rows shown (the first page).")
    offset: int = Field(default=0, ge=0, description="Index of the first row shown within the whole result set.")
    total_rows: int = Field(default=0, ge=0, description="Rows in the whole result set.")
    aggregates: list[AggregateResult] = Field(
        default_factory=list, description="Aggregates the question asked for, over the whole result set."
    )
    notes: list[str] = Field(
        default_factory=list,
        description="What the reader should know about the table: caps applied, units that could not be converted.",
    )

    @model_validator(mode="after")
    def _rows_fit_columns(self) -> AnswerTable:
        width = len(self.columns)
        for index, row in enumerate(self.rows):
            if len(row.values) != width:
                raise ValueError(f"rows.{index}: {len(row.values)} values for {width} columns")
        if self.total_rows < self.offset + len(self.rows):
            raise ValueError("total_rows is smaller than the rows shown")
        return self

    @property
    def more_rows(self) -> int:
        """How many rows exist after the ones shown."""
        return max(0, self.total_rows - self.offset - len(self.rows))


class StructuredRequest(Contract):
    """What the structured stage is asked: the question as researched, and who asks (for collection access)."""

    question: str = Field(min_length=1, max_length=20_000, description="The question as researched (stand-alone).")
    user_id: str | None = Field(default=None, description="The asking user; annotations follow collection access.")
    collections: list[str] | None = Field(
        default=None, description="Collections the question is limited to (None: all the user may read)."
    )
    page_size: int = Field(default=10, ge=1, le=1_000, description="Rows shown in the answer; the rest persisted.")
    deadline_s: float = Field(default=10.0, gt=0, description="Time the stage may take.")


class StructuredOutcome(Contract):
    """What the structured stage found. ``route`` always says what was decided; ``table`` is None when the route
    is not structured/hybrid or found nothing. ``evidence`` holds the passages the rows were extracted from (each
    row's ``chunk_id`` is one of them) so the answer cites them like any other evidence; ``all_rows`` is the whole
    result set (``table.rows`` its first page) for the session to persist for paging and export."""

    route: RouteDecision = Field(description="The route decided for the question.")
    table: AnswerTable | None = Field(default=None, description="The first page of the rows found, if any.")
    all_rows: list[TableRow] = Field(default_factory=list, description="Every row found, for paging and export.")
    evidence: list[ContextChunk] = Field(
        default_factory=list,
        description="The passages the rows come from, cited like any other evidence; on the long-text route, the "
        "passages of the sections whose summaries matched the question.",
    )
    clarification: list[str] = Field(
        default_factory=list,
        description="Candidate fields when a label was ambiguous: the answer asks which one was meant.",
    )
