"""Is this message a reply, and to what? The one place every door asks: the SDK, the CLI, the HTTP session messages
and deep-run routes, the OpenAI-compatible route.

A session may have something waiting for the user's next message:

* a quick answer that asked clarifying questions (``answer_kind == "clarification"``, answered within
  ``CLARIFICATION_REPLY_WINDOW``): the message is the reply, and the question answered is the original one narrowed
  by it (``merge_reply``); "just answer", or the same question asked again, answers it as asked. That answer asks
  nothing more (``allow_clarification`` is False).
* a deep research run of the session paused for an answer to its clarifying questions (none received yet, the pause
  not expired): the message is that answer. Doors that carry a session's messages (``POST
  /v1/sessions/{id}/messages``, the SDK's ``ask_in_session``) hand it to the run; doors that give only quick answers
  ask with ``deep=False`` (a run's plan is decided with ``decide_plan``, never by a free-text message).

A message that reads as a new question of its own (``looks_like_new_question``: a question sharing no content word
with the waiting one) is a new question either way. When both wait, the deep run is asked first.

State: the quick clarification of each recent session is known in this process (``answered`` records it) and is
otherwise read from the conversation history in the memory store (another process may have asked); waiting deep runs
are read from the deep-run store each time.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal, Protocol

from researchcrew.contracts.clarification import is_just_answer
from researchcrew.contracts.request import ResearchRequest
from researchcrew.errors import MemoryStoreError
from researchcrew.pipeline.clarify import looks_like_new_question, merge_reply

if TYPE_CHECKING:
    from researchcrew.contracts.synthesizer import FinalResponse
    from researchcrew.memory.deep_runs import DeepRunRecord
    from researchcrew.memory.records import ExchangeRecord

logger = logging.getLogger(__name__)

CLARIFICATION_REPLY_WINDOW = timedelta(hours=24)  # a clarification older than this is not taken as still open
OPEN_CLARIFICATIONS = 10_000  # sessions a process remembers the clarification state of
RECENT_RUNS = 20  # a session's waiting deep run is looked for among the user's latest runs
_AWAITING = "awaiting_human_feedback"  # DeepRunRecord.status of a paused run


class History(Protocol):
    """The conversation history (the memory store)."""

    async def history(self, *, user_id: str, session_id: str | None, limit: int = 20) -> list[ExchangeRecord]: ...


class RunsOfUser(Protocol):
    """The deep-run store (``DeepRuns``)."""

    async def of_user(self, user_id: str, *, limit: int = 50) -> list[DeepRunRecord]: ...


@dataclass(frozen=True)
class NewQuestion:
    """The message is a question of its own; ``allow_clarification`` says whether its answer may ask back."""

    request: ResearchRequest
    allow_clarification: bool = True
    kind: Literal["new_question"] = field(default="new_question", init=False)


@dataclass(frozen=True)
class ClarificationReply:
    """The message replies to the session's quick clarification: ``request`` asks the original question (``asked``)
    narrowed by the reply, and its answer asks nothing more."""

    request: ResearchRequest
    asked: str
    allow_clarification: bool = field(default=False, init=False)
    kind: Literal["clarification_reply"] = field(default="clarification_reply", init=False)


@dataclass(frozen=True)
class ResearchReply:
    """The message answers the clarifying questions of the session's paused deep run ``run_id``."""

    run_id: str
    question: str  # the run's question
    answer: str  # the message
    kind: Literal["research_reply"] = field(default="research_reply", init=False)


QuickTurn = NewQuestion | ClarificationReply
Turn = NewQuestion | ClarificationReply | ResearchReply


class Conversation:
    """Decides what each message of a session is (``turn``), and remembers the quick answers given (``answered``).
    Built by the runtime with its stores: ``history`` gives the memory store (None: none is open), ``research_runs``
    the deep-run store (None, or returning None: no deep runs to look at)."""

    def __init__(
        self,
        *,
        history: Callable[[], History | None],
        research_runs: Callable[[], Awaitable[RunsOfUser | None]] | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._history = history
        self._research_runs = research_runs
        self._now = now
        # (user, session) → the question answered with clarifying questions, or None once it was answered here.
        self._clarifications: OrderedDict[tuple[str, str], str | None] = OrderedDict()

    async def turn(self, request: ResearchRequest, *, clarify: bool = True, deep: bool = True) -> Turn:
        """What ``request``'s question is in its session: the answer to a waiting deep run's clarifying questions
        (only with ``deep``), the reply to a quick clarification, or a new question. ``clarify=False``: a new
        question's answer may not ask back."""
        if deep:
            run = await self.waiting_run(request.user_id, request.session_id)
            if run is not None and not looks_like_new_question(request.question, run.question):
                return ResearchReply(run_id=run.run_id, question=run.question, answer=request.question)
        return await self.quick_turn(request, clarify=clarify)

    async def quick_turn(self, request: ResearchRequest, *, clarify: bool = True) -> QuickTurn:
        """``turn`` for a door that gives only quick answers: a waiting deep run is not looked at."""
        asked = await self.open_clarification(request.user_id, request.session_id)
        if asked is None or looks_like_new_question(request.question, asked):
            return NewQuestion(request, allow_clarification=clarify)
        # The same question asked again insists on an answer: it narrows nothing, like "just answer".
        insists = _normalized(request.question) == _normalized(asked)
        question = asked if insists or is_just_answer(request.question) else merge_reply(asked, request.question)
        return ClarificationReply(request.model_copy(update={"question": question}), asked=asked)

    def answered(self, request: ResearchRequest, response: FinalResponse) -> None:
        """Record the quick answer given to ``request`` (the question as researched): a clarification stays open
        for the session's next message, any other answer closes what was open."""
        key = (request.user_id, request.session_id)
        self._clarifications[key] = request.question if response.answer_kind == "clarification" else None
        self._clarifications.move_to_end(key)
        while len(self._clarifications) > OPEN_CLARIFICATIONS:
            self._clarifications.popitem(last=False)

    async def open_clarification(self, user_id: str, session_id: str) -> str | None:
        """The question this session's last answer asked clarifying questions about, if that is still open: known
        in this process, else read from the conversation history."""
        key = (user_id, session_id)
        if key in self._clarifications:
            return self._clarifications[key]
        store = self._history()
        if store is None:
            return None
        try:
            last = await store.history(user_id=user_id, session_id=session_id, limit=1)
        except MemoryStoreError as error:
            logger.warning("could not read the conversation to find an open clarification: %s", error)
            return None
        if not last or last[-1].answer_kind != "clarification":
            return None
        if self._now() - last[-1].answered_at > CLARIFICATION_REPLY_WINDOW:
            return None
        return last[-1].question

    async def waiting_run(self, user_id: str, session_id: str) -> DeepRunRecord | None:
        """The session's deep run that waits for an answer to its clarifying questions (none received yet, not
        expired), if any. A store that cannot answer now counts as none: the message is then answered quickly."""
        if self._research_runs is None:
            return None
        try:
            runs = await self._research_runs()
            records: Sequence[DeepRunRecord] = await runs.of_user(user_id, limit=RECENT_RUNS) if runs else []
        except MemoryStoreError as error:
            logger.warning("could not look for a deep run waiting in session %s: %s", session_id, error)
            return None
        for record in records:
            if (
                record.session_id == session_id
                and record.status == _AWAITING
                and record.awaiting == "clarification"
                and record.feedback is None
                and (record.expires_at is None or record.expires_at > self._now())
            ):
                return record
        return None


def _normalized(text: str) -> str:
    return " ".join(text.casefold().split())
