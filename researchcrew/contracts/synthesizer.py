"""The Synthesizer's input and output, and the answer the user receives (seed 003, "Synthesizer Agent")."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from researchcrew.contracts._base import Contract, NonNegativeMs, SourceType, UnitFloat
from researchcrew.contracts.chunks import SourceReport
from researchcrew.contracts.clarification import ClarificationRequest
from researchcrew.contracts.cost import AnswerCost
from researchcrew.contracts.evaluator import ContradictionRecord, FilteredContext, QualityStatistics, RemovalReason
from researchcrew.contracts.follow_up import QuestionRewrite, TokenUsage
from researchcrew.contracts.query import Query, ResponseFormat, UserPreferences
from researchcrew.contracts.retriever import RetrievalStatus
from researchcrew.contracts.tables import AnswerTable, RouteDecision

ConfidenceLevel = Literal["high", "medium", "low", "insufficient"]
MemoryWriteStatus = Literal["scheduled", "not_remembered", "unavailable"]  # FinalResponse.memory_status (issue 13)
GenerationMethod = Literal["standard", "multi_perspective"]
AnswerKind = Literal["generated", "extractive", "uncertainty", "refusal", "clarification"]
# Answers that claim nothing: they say why there is no answer, or ask. Never evidence for a later question.
NO_ANSWER_KINDS: frozenset[str] = frozenset({"uncertainty", "refusal", "clarification"})


class SynthesizerInput(Contract):
    filtered_context: FilteredContext = Field(description="The evidence to answer from, and only from.")
    original_query: Query = Field(description="The question.")
    user_preferences: UserPreferences = Field(default_factory=UserPreferences, description="The user's preferences.")
    contradictions: list[ContradictionRecord] = Field(
        default_factory=list, description="Contradictions the Evaluator found; present them as perspectives."
    )
    max_response_length: int = Field(default=2000, ge=50, le=20_000, description="Upper bound on answer words.")
    min_response_length: int = Field(default=100, ge=0, le=20_000, description="Lower bound on answer words.")
    include_sections: bool = Field(default=True, description="Structure the answer into titled sections.")
    response_format: ResponseFormat = Field(default="detailed", description="concise, detailed or technical.")
    table: AnswerTable | None = Field(
        default=None,
        description="On the hybrid route, the rows the annotations found (the answer states them before the text): "
        "given to the writer as evidence, each row tied to the passage it was extracted from.",
    )

    @model_validator(mode="after")
    def _bounds_ordered(self) -> SynthesizerInput:
        if self.min_response_length > self.max_response_length:
            raise ValueError("min_response_length must not exceed max_response_length")
        return self


class CitedPassage(Contract):
    """One passage of a cited source: the answer may cite several passages of one document under one number."""

    chunk_id: str = Field(description="The evidence chunk cited.")
    location: str | None = Field(
        default=None, max_length=600, description='Where the passage sits in its source ("§ Methods, passage 2 of 5").'
    )
    snippet: str = Field(default="", max_length=1_000, description="The start of the passage.")


class Citation(Contract):
    """A numbered source the answer cites; `number` is what appears as [n] in the text.

    One source is one citation (issue 20): passages of the same document share its number and are listed in
    ``passages``; ``chunk_id``, ``snippet`` and ``location`` describe them for readers that know one passage only
    (``chunk_id`` and ``snippet`` are the first passage's, ``location`` names them all).
    """

    number: int = Field(ge=1, description="The citation marker used in the text.")
    chunk_id: str = Field(description="The evidence chunk cited.")
    source_type: SourceType = Field(description="Where that chunk came from.")
    title: str | None = Field(default=None, description="Title of the source.")
    url: str | None = Field(default=None, description="Link to the source.")
    source_id: str | None = Field(default=None, description="The source's own id (arXiv id, document id, ...).")
    source_date: datetime | None = Field(default=None, description="Date of the source.")
    authors: list[str] = Field(default_factory=list, description="Authors of the source.")
    snippet: str = Field(default="", max_length=1_000, description="The start of the cited passage.")
    location: str | None = Field(
        default=None,
        max_length=600,
        description="Where the cited passages sit in their source, where known: page, section heading and passage "
        'n of m (e.g. "§ Methods, passage 2 of 5"; for several passages of one document "§ Methods, passages 2 and '
        '4 of 5"); for a recalled exchange, which conversation it comes from (e.g. "earlier in this conversation").',
    )
    passages: list[CitedPassage] = Field(
        default_factory=list,
        description="Every passage of this source the answer cites, in document order (the first is `chunk_id`). "
        "Answers stored before issue 20 have none; read them as the one passage `chunk_id`.",
    )
    file_name: str | None = Field(
        default=None,
        max_length=1_000,
        description="For a document of the knowledge base that came from a file: the file's name (e.g. "
        "`mutation.md`), what the user knows it by.",
    )
    label: str | None = Field(
        default=None,
        max_length=4_000,
        description="What a reader follows to the source: a knowledge-base file by its name (with its record for "
        "a JSONL record without a URL), a web page or paper by its URL, else the source's own id.",
    )

    @property
    def chunk_ids(self) -> list[str]:
        """Every cited chunk of this source: the passages', or ``chunk_id`` alone for an older answer."""
        return [passage.chunk_id for passage in self.passages] or [self.chunk_id]


class Claim(Contract):
    """One statement of the answer and the sources it rests on."""

    text: str = Field(min_length=1, description="The statement, without citation markers.")
    citations: list[int] = Field(default_factory=list, description="Citation numbers supporting it.")
    confidence: UnitFloat | None = Field(default=None, description="How well supported the claim is.")
    flagged: bool = Field(
        default=False,
        description="Kept although no valid citation supports it (citation validation in `flag` mode); it is "
        "shown marked as unsupported. In the default `remove` mode such claims are dropped instead.",
    )


class AnswerSection(Contract):
    heading: str = Field(default="", description="Section title (empty when sections are off).")
    claims: list[Claim] = Field(default_factory=list, description="The section's statements, in order.")
    perspective: str | None = Field(default=None, description="For multi-perspective answers: whose view this is.")


# The draft models below are the JSON schema the Synthesizer's LLM must fill (sent to providers with native
# structured output, so their docstrings and descriptions are written for the model). They are lenient on purpose
# (unknown keys ignored, missing keys filled, citation numbers coerced): they parse model output, and citation
# validation then checks every number against the evidence actually given.


class DraftClaim(BaseModel):
    """One statement of the answer and the numbers of the evidence blocks that support it."""

    model_config = ConfigDict(extra="ignore")

    text: str = Field(description="One factual statement, written from the evidence.")
    citations: list[int] = Field(description="Numbers of the evidence blocks that support the statement.")

    @model_validator(mode="before")
    @classmethod
    def _fill_missing(cls, data: Any) -> Any:
        # Filled here rather than with field defaults so that the JSON schema sent to providers stays strict.
        if isinstance(data, str):
            return {"text": data, "citations": []}
        if isinstance(data, dict):
            data = dict(data)
            for alias in ("claim", "statement", "sentence"):
                if "text" not in data and alias in data:
                    data["text"] = data[alias]
            data.setdefault("citations", data.get("sources", []))
        return data

    @field_validator("citations", mode="before")
    @classmethod
    def _lenient_numbers(cls, value: Any) -> Any:
        """Models write ``"[2]"``, ``"2"`` or ``2``; keep the integers, drop what is not a number (validation
        later removes numbers that point to no evidence)."""
        if isinstance(value, int | str):
            value = [value]
        if not isinstance(value, list):
            return value
        numbers: list[int] = []
        for item in value:
            if isinstance(item, bool):
                continue
            if isinstance(item, int):
                numbers.append(item)
            elif isinstance(item, str):
                numbers.extend(int(digits) for digits in re.findall(r"\d{1,6}", item))
        return numbers


class DraftSection(BaseModel):
    """A titled group of statements."""

    model_config = ConfigDict(extra="ignore")

    heading: str = Field(description="Section title; empty when the answer has no sections.")
    perspective: str | None = Field(
        description="When sources disagree: whose view this section presents (e.g. the source's name); else null."
    )
    claims: list[DraftClaim] = Field(description="The section's statements, in reading order.")

    @model_validator(mode="before")
    @classmethod
    def _fill_missing(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            if "heading" not in data and "title" in data:
                data["heading"] = data["title"]
            data.setdefault("heading", "")
            data.setdefault("perspective", None)
            data.setdefault("claims", [])
            if data["heading"] is None:
                data["heading"] = ""
        return data


class AnswerDraft(BaseModel):
    """An answer written only from the numbered evidence blocks, as sections of cited statements."""

    model_config = ConfigDict(extra="ignore")

    sections: list[DraftSection] = Field(description="The answer, as sections of cited statements.")


class CitationStats(Contract):
    """How the answer's citations fared in validation; fabricated citations are measurable here."""

    valid: int = Field(default=0, ge=0, description="Citations pointing to evidence that was given.")
    removed: int = Field(default=0, ge=0, description="Citations removed because they pointed to nothing given.")
    claims_removed: int = Field(default=0, ge=0, description="Claims dropped because no valid citation remained.")
    claims_flagged: int = Field(default=0, ge=0, description="Claims kept but flagged as unsupported.")


class FinalResponse(Contract):
    """The answer the user receives."""

    response_id: str = Field(default_factory=lambda: uuid.uuid4().hex, description="Unique id of this answer.")
    query: Query = Field(description="The question answered.")
    answer: str = Field(description="The answer text (Markdown) with [n] citation markers.")
    sections: list[AnswerSection] = Field(default_factory=list, description="The answer, structured.")
    citations: list[Citation] = Field(default_factory=list, description="Numbered sources cited in the answer.")
    confidence: UnitFloat = Field(default=0.0, description="Overall confidence from credibility and agreement.")
    confidence_level: ConfidenceLevel = Field(default="insufficient", description="Confidence band.")
    generation_method: GenerationMethod = Field(default="standard", description="standard or multi_perspective.")
    answer_kind: AnswerKind = Field(
        default="generated",
        description="generated by an LLM; extractive (sentences quoted from sources, no LLM); uncertainty "
        "(not enough evidence: what was searched and the best matches); refusal (input rejected); clarification "
        "(questions to narrow the question instead of an answer: see `clarification`).",
    )
    contradictions: list[ContradictionRecord] = Field(default_factory=list, description="Disagreements presented.")
    source_reports: list[SourceReport] = Field(
        default_factory=list, description="Which sources were used and which failed, and why."
    )
    citation_stats: CitationStats = Field(default_factory=CitationStats, description="Citation validation counts.")
    caveats: list[str] = Field(default_factory=list, description="What the reader should know (gaps, failures).")
    partial: bool = Field(default=False, description="True when the run deadline cut work short.")
    reformulations: list[str] = Field(default_factory=list, description="Reformulated queries that were tried.")
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC), description="When answered (UTC).")
    execution_time_ms: NonNegativeMs = Field(default=0.0, description="Wall time of the whole run.")
    clarification: ClarificationRequest | None = Field(
        default=None,
        description="Set when answer_kind is clarification: what was searched and found, and the questions asked. "
        "The user's next message in the session is taken as the reply.",
    )

    # ---- Issue 13, "Trust under pressure": why this confidence, and what the pipeline measured on the way ------
    # (kept together in this block; the fields are filled by the Flow, see pipeline/flow.py ``_finalize``)
    final_reason: str = Field(
        default="",
        max_length=500,
        description="One line saying why the answer has its confidence level, starting with the seed-001 band code "
        "(confidence_high, confidence_medium_caveated, confidence_low_partial, confidence_too_low_clarify) or "
        "`refused`, e.g. 'confidence_high: 4 cited passages from rag, arxiv address the question (support 0.86)'.",
    )
    coverage: CoverageMetrics | None = Field(
        default=None,
        description="How well the evidence covers the question (seed 003 CoverageMetrics): topics addressed by the "
        "cited evidence, source diversity, completeness. None when nothing was researched (a refusal).",
    )
    quality: QualityStatistics | None = Field(
        default=None,
        description="The Evaluator's counts and score distribution over the evidence found (seed 003 "
        "QualityStatistics). None when nothing was evaluated.",
    )
    removals: list[RemovalReason] = Field(
        default_factory=list,
        description="Why each piece of evidence that was found but not used was removed (below the quality "
        "threshold, a duplicate, empty, invalid), with its score.",
    )
    retrieval_status: RetrievalStatus | None = Field(
        default=None,
        description="success: every selected source answered; partial: some failed (see source_reports); failed: "
        "none answered. None when nothing was searched (a refusal).",
    )
    memory_status: MemoryWriteStatus = Field(
        default="not_remembered",
        description="scheduled: this exchange is being stored in memory in the background; not_remembered: nothing "
        "is stored by design (memory off, or a refused question); unavailable: the memory store could not be "
        "reached, so this exchange was not remembered (a caveat says why).",
    )

    # ---- Follow-up questions and token usage (issue 11) ----------------------------------------------------------
    # ``query.text`` stays the question as asked; ``rewrite`` says what was researched instead, when it differs.
    rewrite: QuestionRewrite | None = Field(
        default=None,
        description="Set when the question was a follow-up, rewritten from the session's recent exchanges into a "
        "stand-alone question before retrieval (``rewrite.standalone`` is what was researched); None when the "
        "question was researched as asked.",
    )
    token_usage: TokenUsage = Field(
        default_factory=TokenUsage,
        description="Tokens the LLM stages spent on this answer, per stage (prompt/completion/total); zero without "
        "an LLM. Background entity extraction is not included.",
    )
    # ---- end of issue 11 -----------------------------------------------------------------------------------------
    cost: AnswerCost = Field(
        default_factory=AnswerCost,
        description="What the tokens in token_usage cost in US dollars, per stage and in total; `usd` is None (never "
        "0) when the model's price is unknown. Exactly 0 without an LLM.",
    )
    # ---- issue 22 (seed 004): structured evidence -------------------------------------------------------------------
    route: RouteDecision | None = Field(
        default=None,
        description="The retrieval route chosen for the question (structured, hybrid or long_text), why, and the "
        "fallbacks tried; None when no route selection ran.",
    )
    table: AnswerTable | None = Field(
        default=None,
        description="For a structured answer: the rows found (each cited), the first page of them, and how many "
        "exist in all; page with 'show the rest', export with 'export that table'.",
    )


class CoverageMetrics(Contract):
    query_addressed: UnitFloat = Field(description="How well the query was answered, 0–1.")
    coverage_of_topics: dict[str, UnitFloat] = Field(default_factory=dict, description="Query topic → coverage.")
    source_diversity: UnitFloat = Field(description="Share of distinct source types among the cited evidence.")
    information_completeness: UnitFloat = Field(description="0–1, how complete the evidence is for the query.")


class SynthesizerOutput(Contract):
    final_response: FinalResponse = Field(description="The answer.")
    generation_method: GenerationMethod = Field(description="standard or multi_perspective.")
    coverage_metrics: CoverageMetrics = Field(description="How well the evidence covered the query.")
    execution_time_ms: NonNegativeMs = Field(description="Wall time in milliseconds.")
