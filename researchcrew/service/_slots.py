"""One question slot per working question: take one of the user's places (``service.max_concurrent_questions``,
429 with ``Retry-After`` when none is free), touch the session the message belongs to (404 when it is not the
user's), and give the place back if anything fails before the work starts.

    async with question_slot(service, user_id, lease_s=deadline, session_id=session_id, question=text) as slot:
        if streaming:
            return StreamingResponse(event_stream(service, research, slot.hand_over()), ...)
        answer = await answer_unless_disconnected(service, research, request)

The slot is released when the block ends, unless the block handed it over (``slot.hand_over()``) to a stream or a
task that releases it when the work ends. Quick answers, deep runs and the OpenAI-compatible route share it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from researchcrew.memory.usage_ledger import over_budget
from researchcrew.service._problems import ApiProblem
from researchcrew.service._state import ServiceState
from researchcrew.service._throttle import QuestionSlot

LEASE_MARGIN_S = 60.0  # a slot outlives the work's deadline by this much (then it expires by itself)


async def check_budget(service: ServiceState, user_id: str) -> None:
    """402 when ``user_id``'s priced answers this calendar month have cost the monthly budget or more."""
    ledger = await service.runtime.usage_ledger()
    if ledger is None:
        return
    refusal = await over_budget(ledger, user_id, service.settings.service.monthly_budget_usd)
    if refusal is not None:
        raise ApiProblem(402, refusal, kind="budget-exhausted")


@asynccontextmanager
async def question_slot(
    service: ServiceState,
    user_id: str,
    *,
    lease_s: float,
    session_id: str | None = None,
    question: str | None = None,
) -> AsyncIterator[QuestionSlot]:
    """A place for one more working question or deep-run segment of ``user_id``, held for ``lease_s`` (the work's
    deadline) at most; with ``session_id``, the session is touched (its ``question`` shown as its latest)."""
    await check_budget(service, user_id)
    slot = await service.throttle.question_slot(user_id, lease_s=lease_s + LEASE_MARGIN_S)
    if slot is None:
        limit = service.settings.service.max_concurrent_questions
        raise ApiProblem(
            429,
            f"You have {limit} question(s) or deep runs working, the most allowed at once; retry when one has "
            "finished.",
            headers={"Retry-After": "1"},
            kind="too-many-questions",
        )
    try:
        if session_id is not None and not await service.sessions.touch(user_id, session_id, question=question):
            raise ApiProblem(404, f"No session {session_id!r}.", kind="session-not-found")
        yield slot
    except BaseException:
        await slot.release()
        raise
    if not slot.handed_over:
        await slot.release()
