"""The ``research`` tool's conversation with the user: deep research with its pauses answered through elicitation.

A deep run pauses twice at most: for clarifying questions (when the evidence calls for them) and for the plan's
approval. A client that can elicit gets both as ``elicitation/create`` requests, and the run continues with the
answer (accept), or is cancelled (decline, cancel). A client that cannot elicit is not asked: the run asks no
clarifying questions and approves its own plan (``DeepOptions.auto_approve``), as a batch job does, and the result
says so (``plan_approved_by == "auto"``). Progress notifications follow every phase and sub-question.

Each segment of work (up to the first pause, then each resumption) runs inside ``segment()``: in the service, one of
the user's places for working questions, as the deep-run routes take one per segment. It is not held while the run
waits for the user's answer.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Literal

from mcp.server.fastmcp import Context
from mcp.server.fastmcp.exceptions import ToolError

from researchcrew.contracts.deep import DeepOptions, DeepRun, PlanDecision
from researchcrew.contracts.request import ResearchRequest
from researchcrew.mcp_server._progress import (
    ClarificationReply,
    PlanApproval,
    ProgressRelay,
    can_elicit,
    clarification_message,
    plan_message,
)
from researchcrew.mcp_server._results import ResearchResult, research_result

if TYPE_CHECKING:
    from researchcrew.deep.runner import DeepResearch

logger = logging.getLogger(__name__)

MAX_PAUSES = 4  # a run pauses for clarification and for its plan; more would be a loop


async def run_research(
    ctx: Context[Any, Any, Any],
    deep: DeepResearch,
    request: ResearchRequest,
    *,
    max_subquestions: int | None,
    segment: Callable[[], AbstractAsyncContextManager[object]] = contextlib.nullcontext,
) -> ResearchResult:
    """Start a deep run and carry it to its end, asking the user at each pause where the client can."""
    asks_user = can_elicit(ctx)
    options = DeepOptions(auto_approve=not asks_user, clarify=asks_user, max_subquestions=max_subquestions)
    user_id = request.user_id
    approved_by: Literal["user", "auto", "none"] = "none" if asks_user else "auto"
    async with ProgressRelay(ctx) as progress:
        async with segment():
            run = await deep.research(request, options, on_event=progress.deep)
        for _ in range(MAX_PAUSES):
            if run.status != "awaiting_human_feedback":
                break
            if run.awaiting == "clarification":
                reply = await ctx.elicit(clarification_message(run), ClarificationReply)
                if reply.action != "accept":
                    return research_result(await deep.cancel_research(run.run_id, user_id=user_id), approved_by)
                await deep.answer_clarification(run.run_id, user_id=user_id, answer=reply.data.answer)
            else:
                decision = await _plan_decision(ctx, run)
                if decision is None:
                    return research_result(await deep.cancel_research(run.run_id, user_id=user_id), approved_by)
                await deep.decide_plan(run.run_id, user_id=user_id, decision=decision)
                approved_by = "user"
            progress.step("resuming after your answer")
            async with segment():
                run = await deep.resume_research(run.run_id, user_id=user_id, on_event=progress.deep)
    return research_result(run, approved_by)


async def _plan_decision(ctx: Context[Any, Any, Any], run: DeepRun) -> PlanDecision | None:
    """The user's decision on the run's plan (None: cancel the run)."""
    answer = await ctx.elicit(plan_message(run), PlanApproval)
    if answer.action != "accept" or not answer.data.approve:
        return None
    try:
        left_out = answer.data.items_left_out()
    except ValueError as error:
        raise ToolError(str(error)) from error
    if not left_out or run.plan is None:
        return PlanDecision()
    return PlanDecision.edits(run.plan, cut=left_out)
