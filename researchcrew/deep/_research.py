"""Researching one sub-question with the normal pipeline: the quick ``ResearchFlow`` (fan-out, evaluation,
reformulation, synthesis, citation check), with three changes — its Retriever also follows references, it never
asks clarifying questions, and it remembers nothing (the deep run remembers its report once, at the end)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from researchcrew.contracts import FinalResponse, ProgressEvent, Query, ScoredChunk, UserPreferences
from researchcrew.contracts.deep import FollowedReference, PlanItem, SubQuestionStatus
from researchcrew.contracts.request import MAX_DEADLINE_S, ResearchRequest
from researchcrew.deep._budget import Budget
from researchcrew.deep._follow import FollowingRetriever, ReferenceFollower
from researchcrew.pipeline.clarify import never_clarify

if TYPE_CHECKING:
    from researchcrew.pipeline.stages import ResearchStages

WEAK_EVIDENCE = 5  # best rejected chunks kept for a remediation that has nothing better


class SubQuestionResult(BaseModel):
    """What researching one plan item gave (kept in the deep Flow's state)."""

    model_config = ConfigDict(extra="forbid")

    item: PlanItem = Field(description="The sub-question.")
    status: SubQuestionStatus = Field(default="not_researched", description="answered, weak or not_researched.")
    response: FinalResponse | None = Field(default=None, description="The pipeline's cited answer to it.")
    evidence: list[ScoredChunk] = Field(default_factory=list, description="Evidence that passed evaluation.")
    weak_evidence: list[ScoredChunk] = Field(
        default_factory=list, description="The best evidence below the quality threshold (for remediation)."
    )
    references: list[FollowedReference] = Field(default_factory=list, description="References followed for it.")
    elapsed_ms: float = Field(default=0.0, ge=0, description="Wall time.")
    tokens: int = Field(default=0, ge=0, description="LLM tokens.")
    note: str | None = Field(default=None, description="Why it was not researched, or what to know.")


def _no_memory(_: object) -> bool:
    return False


def _answered(response: FinalResponse) -> bool:
    return response.answer_kind in ("generated", "extractive") and any(
        claim.citations for section in response.sections for claim in section.claims
    )


async def research_sub_question(
    stages: ResearchStages,
    item: PlanItem,
    *,
    index: int,
    request: ResearchRequest,
    preferences: UserPreferences,
    deadline_s: float,
    budget: Budget,
    follower: ReferenceFollower | None,
    on_stage_event: Callable[[ProgressEvent], None],
) -> SubQuestionResult:
    """Run the pipeline for ``item`` within ``deadline_s`` seconds; references are followed when ``follower`` is
    given."""
    from researchcrew.pipeline.flow import ResearchFlow, ResearchState

    started = time.monotonic()
    tokens_before = budget.tokens_used()
    retriever = (
        stages.retriever if follower is None else FollowingRetriever(stages.retriever, follower, index, item.question)
    )
    flow_stages = dataclasses.replace(
        stages, retriever=retriever, remember=_no_memory, clarify=never_clarify, on_event=on_stage_event
    )
    sub_request = request.model_copy(
        update={"question": item.question, "deadline_s": min(max(deadline_s, 0.5), MAX_DEADLINE_S)}
    )
    state = ResearchState(
        request=sub_request,
        query=Query(text=item.question, user_id=request.user_id, session_id=request.session_id),
        preferences=preferences,
        deadline_s=min(max(deadline_s, 0.5), MAX_DEADLINE_S),
        allow_clarification=False,
    )
    flow = ResearchFlow(flow_stages, state)
    response = await flow.kickoff()
    if not isinstance(response, FinalResponse):  # a routing bug, not a user error
        raise RuntimeError(f"the sub-question Flow ended without an answer (got {type(response).__name__})")
    evaluation = flow.research.evaluation
    evidence = list(evaluation.filtered_context.chunks) if evaluation else []
    weak = list(evaluation.rejected_chunks[:WEAK_EVIDENCE]) if evaluation else []
    return SubQuestionResult(
        item=item,
        status="answered" if _answered(response) else "weak",
        response=response,
        evidence=evidence,
        weak_evidence=weak,
        references=follower.records_of(index) if follower is not None else [],
        elapsed_ms=(time.monotonic() - started) * 1000,
        tokens=max(0, budget.tokens_used() - tokens_before),
        note="partial: the sub-question's time ran out" if response.partial else None,
    )
