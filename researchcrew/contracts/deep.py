"""Deep research (issue 14, seed 002): the options of a run, the plan the user approves, the decision they send,
the references followed, the quality scores, the final report, and the run as a caller sees it.

A run goes clarify (optional) → plan (paused for approval unless approved automatically) → research each
sub-question → follow references → one report → quality check (one remediation retry). ``DeepRun`` is what every
door gets back: the run's status (``awaiting_human_feedback`` while paused), what it waits for, and the report
when it is done. ``DeepProgressEvent`` is what it streams.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import AliasChoices, Field, StrictBool, field_validator, model_validator

from researchcrew.contracts._base import Contract, NonNegativeMs, RequestContract, UnitFloat
from researchcrew.contracts.clarification import ClarificationRequest
from researchcrew.contracts.cost import AnswerCost
from researchcrew.contracts.progress import ProgressEvent
from researchcrew.contracts.synthesizer import AnswerKind, FinalResponse

MAX_PLAN_ITEMS = 20  # the most sub-questions any plan may hold (settings and options pick at most this)
MAX_SUBQUESTION_CHARS = 500

ReportLength = Literal["brief", "standard", "detailed"]
ReportType = Literal["report", "literature_review", "comparison"]
ExportFormat = Literal["md", "html", "pdf", "docx"]


class DeepOptions(RequestContract):
    """How one deep run is carried out. Unset fields take the ``deep`` settings."""

    max_subquestions: int | None = Field(
        default=None, ge=1, le=MAX_PLAN_ITEMS, description="Most sub-questions the plan may hold (default 8)."
    )
    deadline_s: float | None = Field(
        default=None,
        gt=0,
        le=7_200,
        description="Seconds of research for the whole run, shared by every sub-question (time spent paused for "
        "the user does not count).",
    )
    token_budget: int | None = Field(
        default=None, ge=1_000, le=50_000_000, description="LLM tokens the whole run may use (with an LLM only)."
    )
    auto_approve: StrictBool = Field(
        default=False,
        description="Batch jobs and --yes: ask no clarifying questions and approve the proposed plan unchanged.",
    )
    clarify: StrictBool = Field(
        default=True, description="Ask clarifying questions first when the evidence calls for it."
    )
    follow_references: StrictBool = Field(default=True, description="Follow references found in the evidence.")
    length: ReportLength = Field(
        default="standard",
        description="brief (few sub-questions, two statements a section), standard, or detailed (more sub-questions, "
        "longer sections).",
    )
    report_type: ReportType = Field(
        default="report",
        validation_alias=AliasChoices("report_type", "type"),
        description="report (one section per sub-question); literature_review (themes, each with the sources that "
        "speak to it); comparison (one contrast section per aspect, and a comparison table). Also accepted as `type`.",
    )


class PlanItem(Contract):
    """One sub-question of the plan."""

    id: int = Field(ge=1, description="Stable number of the item in the proposed plan (new items get new ones).")
    question: str = Field(min_length=1, max_length=MAX_SUBQUESTION_CHARS, description="The sub-question to research.")
    rationale: str = Field(default="", max_length=1_000, description="Why it is part of the plan.")

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        text = " ".join(value.split())
        if not text:
            raise ValueError("a sub-question cannot be blank")
        return text


class ResearchPlan(Contract):
    """The to-do list of a deep run (seed 002): at most ``max_items`` sub-questions, researched in order."""

    question: str = Field(max_length=4_000, description="The question the plan answers (after any clarification).")
    items: list[PlanItem] = Field(min_length=1, max_length=MAX_PLAN_ITEMS, description="The sub-questions, in order.")
    max_items: int = Field(ge=1, le=MAX_PLAN_ITEMS, description="The most items this plan may hold.")
    written_by: Literal["rules", "llm"] = Field(default="rules", description="Who proposed it.")
    note: str = Field(
        default="",
        max_length=1_000,
        description="What to know about the plan as a whole, e.g. why it holds fewer items than allowed.",
    )

    @model_validator(mode="after")
    def _within_bounds(self) -> ResearchPlan:
        if len(self.items) > self.max_items:
            raise ValueError(f"the plan has {len(self.items)} items; at most {self.max_items} are allowed")
        ids = [item.id for item in self.items]
        if len(set(ids)) != len(ids):
            raise ValueError("plan item ids must be unique")
        return self


class PlanChoice(RequestContract):
    """One entry of the plan as the user wants it: keep (and maybe reword) a proposed item, or add a new one."""

    id: int | None = Field(
        default=None, ge=1, description="A proposed item to keep at this position; None adds a new sub-question."
    )
    question: str | None = Field(
        default=None,
        max_length=MAX_SUBQUESTION_CHARS,
        description="New wording for the kept item, or the new sub-question (required when id is None).",
    )


class PlanDecision(RequestContract):
    """The user's decision on a proposed plan.

    ``approve`` without ``items`` accepts the plan as proposed. With ``items`` the plan becomes exactly that list,
    in that order: an entry with an ``id`` keeps that proposed item (reworded when ``question`` is given), an entry
    without one adds a sub-question, and a proposed item left out is cut. ``cancel`` ends the run.
    """

    action: Literal["approve", "cancel"] = Field(default="approve", description="approve the plan, or cancel the run.")
    items: list[PlanChoice] | None = Field(
        default=None, max_length=2 * MAX_PLAN_ITEMS, description="The plan as approved, in order; None: as proposed."
    )

    @classmethod
    def edits(
        cls,
        plan: ResearchPlan,
        *,
        cut: list[int] | None = None,
        order: list[int] | None = None,
        reword: dict[int, str] | None = None,
        add: list[str] | None = None,
    ) -> PlanDecision:
        """A decision built from edits to ``plan``: ``order`` (item ids, the rest follow in their order), ``cut``
        (ids to drop), ``reword`` (id → new text), ``add`` (new sub-questions at the end). Unknown ids are kept as
        given so that applying the decision reports them."""
        proposed = [item.id for item in plan.items]
        ordered = list(dict.fromkeys([*(order or []), *proposed]))
        reword = reword or {}
        choices = [
            PlanChoice(id=item_id, question=reword.get(item_id)) for item_id in ordered if item_id not in (cut or [])
        ]
        choices += [PlanChoice(question=text) for text in add or []]
        for item_id in reword:  # rewording an id that is not in the plan must not vanish silently
            if item_id not in ordered:
                choices.append(PlanChoice(id=item_id, question=reword[item_id]))
        return cls(items=choices)

    @classmethod
    def from_feedback(cls, feedback: str) -> PlanDecision:
        """The decision a paused run was resumed with (stored as this model's JSON); empty means approve."""
        return cls.model_validate_json(feedback) if feedback.strip() else cls()


ReferenceKind = Literal["arxiv", "doi", "numbered", "named_document", "section"]
ReferenceOutcome = Literal["kept", "rejected", "unresolved", "skipped"]


class FollowedReference(Contract):
    """One reference found in the evidence and what following it gave."""

    sub_question: int = Field(ge=1, description="The plan item whose evidence held the reference.")
    kind: ReferenceKind = Field(
        description="arxiv (an arXiv id), doi, numbered (a [12]-style citation with a reference list), "
        "named_document (a quoted title), section (a section of the same document)."
    )
    target: str = Field(max_length=1_000, description="What was looked up: the id, DOI, list entry, title, section.")
    text: str = Field(max_length=1_000, description="The reference as it appears in the evidence.")
    found_in: str = Field(description="The chunk it was found in.")
    depth: int = Field(ge=1, le=5, description="1: found in retrieved evidence; 2: in a document reached by one.")
    outcome: ReferenceOutcome = Field(
        description="kept (relevant, added to the evidence), rejected (below the relevance threshold), unresolved "
        "(could not be found), skipped (visited, depth, budget or convergence limit)."
    )
    reason: str = Field(max_length=1_000, description="Why: the score and threshold, the failure, or the limit hit.")
    score: UnitFloat | None = Field(default=None, description="Relevance of the resolved text to the sub-question.")
    resolved: list[str] = Field(default_factory=list, description="Chunk ids the reference resolved to.")


FindingKind = Literal["off_topic", "garbled", "repeated", "uncited", "single_source", "unanswered", "memory_echo"]


class QualityFinding(Contract):
    """One thing the quality check found wrong with one section of the report (issue 21)."""

    section: int | None = Field(
        default=None, description="The plan position of the section; None for a section outside the plan."
    )
    heading: str = Field(default="", max_length=1_000, description="The section's heading.")
    kind: FindingKind = Field(
        description="off_topic: it does not speak to its sub-question; garbled: not readable sentences; repeated: "
        "text said twice; uncited: statements without a citation that supports them; single_source: it rests on "
        "one source; unanswered: a plan item without a section; memory_echo: it quotes the assistant's own "
        "earlier answers (conversation memory) as evidence."
    )
    detail: str = Field(default="", max_length=2_000, description="What exactly, for a reader.")


class Revision(Contract):
    """What the remediation did to one flawed section (issue 21): researched again or dropped, and why."""

    section: int | None = Field(default=None, description="The plan position (None: a section outside the plan).")
    heading: str = Field(default="", max_length=1_000, description="The section as it was headed.")
    kinds: list[FindingKind] = Field(default_factory=list, description="What the check found wrong with it.")
    action: Literal["researched_again", "dropped"] = Field(description="What was done.")
    question: str | None = Field(default=None, description="The reformulated sub-question researched again.")
    outcome: str = Field(default="", max_length=2_000, description="What changed, in a sentence.")


class QualityScores(Contract):
    """How the report scored (seed 002 phase 4), each dimension in [0, 1]."""

    attempt: int = Field(ge=1, le=2, description="1: the first report; 2: the remediation retry.")
    citation_correctness: UnitFloat = Field(
        description="Share of the citations written that pointed to evidence actually given (the code check)."
    )
    plan_coverage: UnitFloat = Field(description="Share of the approved sub-questions answered with cited statements.")
    query_relevance: UnitFloat = Field(
        description="How much of the question and of each sub-question the statements speak to (content terms)."
    )
    structure: UnitFloat = Field(description="One titled section per answered sub-question, in plan order, balanced.")
    soundness: UnitFloat = Field(
        default=1.0, description="1 when no section has findings; each finding lowers it by its kind's severity."
    )
    overall: UnitFloat = Field(description="The weighted mean of the four dimensions, times the soundness.")
    threshold: UnitFloat = Field(description="Below this the report is sent back once.")
    passed: bool = Field(description="overall >= threshold.")
    issues: list[str] = Field(default_factory=list, description="What pulled the score down, as instructions.")
    findings: list[QualityFinding] = Field(
        default_factory=list, description="What is wrong, per section, by kind (what remediation acts on)."
    )


SubQuestionStatus = Literal["answered", "weak", "not_researched"]


class ComparisonRow(Contract):
    """One aspect of a comparison: what the evidence says about each subject on it."""

    aspect: str = Field(max_length=MAX_SUBQUESTION_CHARS, description="The aspect (a sub-question of the plan).")
    cells: list[str] = Field(description="Per subject, in ``subjects`` order: the statement found, or empty.")
    citations: list[list[int]] = Field(description="Per subject: the citation numbers of its cell.")


class ComparisonTable(Contract):
    """The comparison table of a ``comparison`` report: subjects as columns, aspects as rows."""

    subjects: list[str] = Field(min_length=1, description="What is compared (from the question, or its sources).")
    rows: list[ComparisonRow] = Field(default_factory=list, description="One row per aspect, in plan order.")


class ReviewTheme(Contract):
    """One theme of a ``literature_review`` report and the sources that speak to it."""

    theme: str = Field(max_length=MAX_SUBQUESTION_CHARS, description="The theme (a sub-question of the plan).")
    sources: list[int] = Field(default_factory=list, description="Citation numbers of the sources on this theme.")


class SubQuestionReport(Contract):
    """What researching one sub-question gave."""

    item: PlanItem = Field(description="The sub-question.")
    status: SubQuestionStatus = Field(
        description="answered (cited statements), weak (no statement could be cited), not_researched (deadline, "
        "budget)."
    )
    answer_kind: AnswerKind | None = Field(default=None, description="How its section was written.")
    citations: int = Field(default=0, ge=0, description="Citations of its section in the report.")
    evidence: int = Field(default=0, ge=0, description="Evidence chunks it had (including followed references).")
    references_kept: int = Field(default=0, ge=0, description="Followed references kept as evidence.")
    elapsed_ms: NonNegativeMs = Field(default=0.0, description="Wall time spent on it.")
    tokens: int = Field(default=0, ge=0, description="LLM tokens spent on it.")
    cost_usd: float | None = Field(
        default=0.0, ge=0, description="What its answer's LLM calls cost in US dollars; None: price unknown."
    )
    note: str | None = Field(default=None, max_length=1_000, description="Anything the reader should know.")


class BudgetReport(Contract):
    """The run's shared deadline and token budget, and what was used."""

    deadline_s: float = Field(gt=0, description="Seconds of research allowed.")
    elapsed_s: float = Field(ge=0, description="Seconds of research used (time paused for the user excluded).")
    token_budget: int | None = Field(default=None, description="Tokens allowed (None without an LLM).")
    tokens_used: int = Field(default=0, ge=0, description="Tokens the LLM reported (or the fake LLM estimated).")
    prompt_tokens: int = Field(default=0, ge=0, description="Of those, tokens sent to the model.")
    completion_tokens: int = Field(default=0, ge=0, description="Of those, tokens the model wrote.")
    exhausted: Literal["deadline", "tokens"] | None = Field(default=None, description="Which limit stopped the run.")
    cost: AnswerCost = Field(
        default_factory=AnswerCost,
        description="What the run's LLM calls cost in US dollars (planning, sub-questions, report, quality check); "
        "`usd` None when the model's price is unknown.",
    )


class DeepReport(Contract):
    """The result of a deep run."""

    run_id: str = Field(description="The run.")
    question: str = Field(description="The question researched (after clarification).")
    original_question: str = Field(description="The question as first asked.")
    response: FinalResponse = Field(
        description="The report: one section per sub-question, every statement cited, disagreements across "
        "sub-questions shown side by side."
    )
    plan: ResearchPlan = Field(description="The approved plan.")
    sub_questions: list[SubQuestionReport] = Field(description="Per sub-question, in plan order.")
    references: list[FollowedReference] = Field(default_factory=list, description="References detected and followed.")
    quality: list[QualityScores] = Field(description="Scores of the first report and, if it was retried, the retry.")
    remediated: bool = Field(default=False, description="The retry scored better and replaced the first report.")
    revisions: list[Revision] = Field(
        default_factory=list, description="What the remediation did to each flawed section, and why."
    )
    clarification: ClarificationRequest | None = Field(default=None, description="The clarification asked, if any.")
    clarification_answer: str | None = Field(default=None, description="The user's reply to it.")
    partial: bool = Field(default=False, description="The deadline or budget cut the run short.")
    not_done: list[str] = Field(default_factory=list, description="What was not done, and why.")
    budget: BudgetReport = Field(description="Time and tokens allowed and used.")
    length: ReportLength = Field(default="standard", description="The length the report was written to.")
    report_type: ReportType = Field(default="report", description="The kind of report written.")
    comparison: ComparisonTable | None = Field(default=None, description="A comparison report's table.")
    themes: list[ReviewTheme] = Field(default_factory=list, description="A literature review's themes and sources.")


DeepRunStatus = Literal["running", "awaiting_human_feedback", "completed", "cancelled", "failed", "expired"]
FeedbackKind = Literal["clarification", "plan_approval"]


class DeepRun(Contract):
    """A deep run as a caller sees it: what it waits for, or its report."""

    run_id: str = Field(description="The run's id (use it to answer, decide, resume or look it up).")
    user_id: str = Field(description="Whose run it is; only this user may see or steer it.")
    session_id: str = Field(description="The conversation it belongs to.")
    question: str = Field(description="The question as asked.")
    status: DeepRunStatus = Field(
        description="running; awaiting_human_feedback (paused: see `awaiting`); completed (see `report`); "
        "cancelled; failed (see `error`); expired (paused longer than allowed)."
    )
    awaiting: FeedbackKind | None = Field(
        default=None, description="While paused: a clarification answer or a plan decision."
    )
    feedback_received: bool = Field(
        default=False, description="While paused: the answer or decision arrived and the run can be resumed."
    )
    clarification: ClarificationRequest | None = Field(default=None, description="The questions asked, if any.")
    plan: ResearchPlan | None = Field(default=None, description="The proposed plan (approved once research began).")
    options: DeepOptions | None = Field(
        default=None, description="The run's options as stored with it (length, type, limits), once it has paused."
    )
    report: DeepReport | None = Field(default=None, description="The report, once completed.")
    error: str | None = Field(default=None, description="Why it failed.")
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC), description="When it started (UTC).")
    updated_at: datetime = Field(default_factory=lambda: datetime.now(UTC), description="Last change (UTC).")
    expires_at: datetime | None = Field(default=None, description="While paused: when the pause expires (UTC).")


DeepPhase = Literal["clarify", "plan", "research", "references", "report", "quality", "respond"]


class DeepProgressEvent(Contract):
    """One phase of a deep run starting, finishing or pausing; research events carry the quick pipeline's own."""

    run_id: str = Field(description="The deep run.")
    phase: DeepPhase = Field(description="The phase.")
    status: Literal["started", "finished", "paused", "source", "text"] = Field(
        description="What happened: a phase started, finished or paused for the user; or, relayed from a "
        "sub-question's pipeline, a source answered (source) or answer text was written (text)."
    )
    at: datetime = Field(default_factory=lambda: datetime.now(UTC), description="When (UTC).")
    elapsed_ms: NonNegativeMs = Field(description="Research time of the run so far, in milliseconds.")
    sub_question: int | None = Field(default=None, ge=1, description="The plan item, for research and references.")
    detail: dict[str, Any] = Field(default_factory=dict, description="Counts, decisions and reasons.")
    stage_event: ProgressEvent | None = Field(
        default=None, description="The sub-question pipeline's own event (retrieve, evaluate, ...), when relayed."
    )
