"""What the MCP tools return: the structured content (each tool's ``outputSchema``) and the text a person reads.

A tool result carries both: ``structuredContent`` for programs (validated by the SDK against the schema), and one
text block for a model or a person (the answer with its numbered sources, the passages with theirs). The models are
the MCP door's own views of the contracts (``FinalResponse``, ``ToolResult``, ``DeepRun``), kept small: a client
reads them in its context window.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from researchcrew.contracts.chunks import ContextChunk, SourceReport
from researchcrew.contracts.deep import DeepRun
from researchcrew.contracts.synthesizer import Citation, FinalResponse


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CitedSource(_View):
    """One numbered source of an answer: what ``[n]`` in the text points to."""

    number: int = Field(description="The marker [n] used in the answer text.")
    title: str | None = Field(description="Title of the source.")
    url: str | None = Field(description="Link to the source, where it has one.")
    source_type: str = Field(description='Where it came from: "rag", "web", "arxiv", "memory", ...')
    location: str | None = Field(description="Where in the source the cited passages sit, where known.")
    snippet: str = Field(description="The start of the cited passage.")


class SourceOutcome(_View):
    """What one source did for the answer."""

    source_type: str = Field(description="The source type.")
    status: str = Field(description="used, empty, failed, skipped, ...")
    reason: str | None = Field(description="Why it failed, when it did.")


class AskResult(_View):
    """A cited answer (``ask``)."""

    answer: str = Field(description="The answer (Markdown) with [n] citation markers.")
    answer_kind: str = Field(description="generated, extractive, uncertainty, refusal or clarification.")
    confidence: float = Field(description="Overall confidence, 0-1.")
    citations: list[CitedSource] = Field(description="The numbered sources the answer cites.")
    sources: list[SourceOutcome] = Field(description="What each source did (used, or failed and why).")
    caveats: list[str] = Field(description="What the reader should know (gaps, failures).")
    session_id: str = Field(description="The session the answer belongs to: pass it again to continue it.")
    response_id: str = Field(description="The answer's id.")


class Passage(_View):
    """A passage of the knowledge base and its source."""

    text: str = Field(description="The passage.")
    relevance: float = Field(description="Relevance to the query, 0-1.")
    title: str | None = Field(description="Title of the document.")
    url: str | None = Field(description="Where the document can be opened, where known.")
    source_id: str | None = Field(description="The document's id.")
    source_date: datetime | None = Field(description="Date of the document.")
    heading: str | None = Field(description="The section the passage sits in, where known.")


class SearchResult(_View):
    """Passages found in the knowledge base (``search_knowledge_base``): no synthesis."""

    query: str = Field(description="What was searched.")
    passages: list[Passage] = Field(description="The passages, most relevant first.")


class PlanStep(_View):
    number: int = Field(description="The plan item's number.")
    question: str = Field(description="The sub-question.")


class ResearchResult(_View):
    """A deep research run (``research``)."""

    run_id: str = Field(description="The run's id; its report is the resource researchcrew://reports/{run_id}.")
    status: str = Field(description="completed, cancelled, failed, expired, or awaiting_human_feedback.")
    plan_approved_by: Literal["user", "auto", "none"] = Field(
        description="user: approved through elicitation; auto: the client cannot elicit; none: not approved."
    )
    plan: list[PlanStep] = Field(description="The plan that was researched (or proposed).")
    report: str | None = Field(description="The report (Markdown with [n] markers), once completed.")
    citations: list[CitedSource] = Field(description="The report's numbered sources.")
    note: str | None = Field(description="What else the caller should know (why it stopped, what was not done).")


class SessionSummary(_View):
    session_id: str = Field(description="The session's id (its history: researchcrew://sessions/{session_id}).")
    title: str = Field(description="Its title.")
    updated_at: datetime = Field(description="When it was last used (UTC).")
    exchanges: int = Field(description="How many answered questions it holds.")


class SessionsResult(_View):
    sessions: list[SessionSummary] = Field(description="Your sessions, most recently used first.")


def cited_sources(citations: list[Citation]) -> list[CitedSource]:
    return [
        CitedSource(
            number=c.number,
            title=c.title,
            url=c.url,
            source_type=c.source_type,
            location=c.location,
            snippet=c.snippet,
        )
        for c in citations
    ]


def ask_result(response: FinalResponse, session_id: str) -> AskResult:
    return AskResult(
        answer=response.answer,
        answer_kind=response.answer_kind,
        confidence=response.confidence,
        citations=cited_sources(response.citations),
        sources=[_outcome(report) for report in response.source_reports],
        caveats=list(response.caveats),
        session_id=session_id,
        response_id=response.response_id,
    )


def _outcome(report: SourceReport) -> SourceOutcome:
    reason = report.failure.message if report.failure is not None else None
    return SourceOutcome(source_type=report.source_type, status=str(report.status), reason=reason)


def passage(chunk: ContextChunk) -> Passage:
    heading = chunk.metadata.get("heading")
    return Passage(
        text=chunk.content,
        relevance=chunk.semantic_relevance,
        title=chunk.title,
        url=chunk.url,
        source_id=chunk.source_id,
        source_date=chunk.source_date,
        heading=heading if isinstance(heading, str) and heading else None,
    )


def research_result(run: DeepRun, approved_by: Literal["user", "auto", "none"]) -> ResearchResult:
    report = run.report
    plan = report.plan if report is not None else run.plan
    note = run.error
    if report is not None and report.not_done:
        note = "; ".join(report.not_done)
    elif run.status == "awaiting_human_feedback":
        note = f"the run waits for {run.awaiting}; steer it with `researchcrew research` or the HTTP API"
    return ResearchResult(
        run_id=run.run_id,
        status=run.status,
        plan_approved_by=approved_by,
        plan=[PlanStep(number=item.id, question=item.question) for item in (plan.items if plan else [])],
        report=report.response.answer if report is not None else None,
        citations=cited_sources(report.response.citations) if report is not None else [],
        note=note,
    )


def sources_text(citations: list[CitedSource]) -> str:
    """The numbered sources under an answer, one line each."""
    lines = []
    for source in citations:
        where = f" ({source.location})" if source.location else ""
        link = f" <{source.url}>" if source.url else ""
        lines.append(f"[{source.number}] {source.title or source.source_type}{where}{link}")
    return "\n\nSources:\n" + "\n".join(lines) if lines else ""


def passages_text(result: SearchResult) -> str:
    if not result.passages:
        return f"No passage of the knowledge base matches {result.query!r}."
    blocks = []
    for number, found in enumerate(result.passages, start=1):
        where = f", § {found.heading}" if found.heading else ""
        blocks.append(
            f"[{number}] {found.title or found.source_id or 'untitled'}{where} ({found.relevance:.2f})\n{found.text}"
        )
    return "\n\n".join(blocks)
