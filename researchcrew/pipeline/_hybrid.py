"""The hybrid route's answer (issue 22): the table's answer first, then the passages' synthesis.

A hybrid question ("Which studies report a sample size above 1,000 and what did they find?") is half a table and
half text. The answer says what the table says — in the structured route's words (``compose_table_text``: how many
rows match, from how many documents, the filters), then the first rows with their values, each cited by the passage
it was extracted from, and how many more exist with how to page ("say 'show the rest' or 'export that table'") —
and then what the passages say, as the synthesizer wrote it (extractive or generated). The text part of a hybrid
question is about the rows ("... and what did *they* find?"), so the passages it is written from are those of the
documents the rows come from whenever the evidence holds any (``focused``); all the evidence otherwise.

Every statement stays cited and checked: the rows become statements (``row_section``) ahead of the synthesis's, and
the whole answer goes through citation validation once more, against the evidence that was read (the evaluated
passages and the rows' own passages). That also numbers the citations in reading order, the rows' first, with one
number per source document whether a row or a sentence cites it. The table, its id and its whole result set for
paging and export are attached as on the structured route (``attach_table``).
"""

from __future__ import annotations

from collections.abc import Sequence

from researchcrew.contracts import ContextChunk, FilteredContext, FinalResponse
from researchcrew.contracts.synthesizer import NO_ANSWER_KINDS
from researchcrew.contracts.tables import StructuredOutcome, TableRow
from researchcrew.pipeline._sources import document_key
from researchcrew.pipeline._tables import attach_table, cite_rows, compose_table_text, row_section
from researchcrew.pipeline.stages import CitationValidator
from researchcrew.pipeline.synthesize._rendering import render_answer


def focused(context: FilteredContext, outcome: StructuredOutcome) -> FilteredContext:
    """The evidence the hybrid answer's text is written from: the passages of the documents any row of the result
    set comes from (a study not in the table must not answer "what did they find"), or all of it when it holds none
    of them."""
    documents = {document_key(chunk) for chunk in outcome.evidence}
    kept = [scored for scored in context.chunks if document_key(scored.chunk) in documents]
    return context.model_copy(update={"chunks": kept}) if kept else context


def hybrid_answer(
    response: FinalResponse,
    outcome: StructuredOutcome,
    validate: CitationValidator,
    given: Sequence[ContextChunk],
) -> tuple[FinalResponse, list[TableRow]]:
    """``response`` (the passages' synthesis, validated) with the table's answer ahead of it; returns the whole
    result set too, cited, for the session to persist. Falls back to ``attach_table`` (the synthesis, then the
    table) when there is no synthesis to follow the table or no row can be cited."""
    table = outcome.table
    if table is None or response.answer_kind in NO_ANSWER_KINDS:
        return attach_table(response, outcome)
    passages = {chunk.chunk_id: chunk for chunk in outcome.evidence}
    citations = list(response.citations)
    shown = cite_rows(table.rows, citations, passages)
    rows = row_section(table.model_copy(update={"rows": shown}))
    if rows is None:
        return attach_table(response, outcome)
    read = {chunk.chunk_id: chunk for chunk in given}
    for row in shown:
        if row.chunk_id is not None and row.chunk_id in passages:
            read.setdefault(row.chunk_id, passages[row.chunk_id])
    draft = response.model_copy(update={"sections": [rows, *response.sections], "citations": citations})
    checked = validate(draft, list(read.values()))
    if not checked.sections or len(checked.sections[0].claims) != len(rows.claims):
        return attach_table(response, outcome)  # a row statement did not survive the check: keep them apart
    lead = compose_table_text(table, outcome.all_rows or table.rows)
    tabled, all_rows = attach_table(checked.model_copy(update={"answer": lead}), outcome)
    text = checked.sections[1:]
    synthesis = render_answer(text, answer_kind=checked.answer_kind) if text else ""
    answer = f"{tabled.answer}\n\n{synthesis}" if synthesis else tabled.answer
    return tabled.model_copy(update={"answer": answer}), all_rows


__all__ = ["focused", "hybrid_answer"]
