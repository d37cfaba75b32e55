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

* a structured answer's table (issue 22): "show the rest" (or "more rows", "next page") pages through the session's
  last table from where the session left it; "export that table" (or "download as csv") gives it as CSV. The reply
  is built here (``table_reply``) from the persisted result set: no source is searched, nothing is remembered.

A message that reads as a new question of its own (``looks_like_new_question``: a question sharing no content word
with the waiting one) is a new question either way. When both wait, the deep run is asked first.

State: the quick clarification of each recent session is known in this process (``answered`` records it) and is
otherwise read from the conversation history in the memory store (another process may have asked); waiting deep runs
are read from the deep-run store each time.
"""

from __future__ import annotations

import logging
import re
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
    from researchcrew.memory.records import ExchangeRecord, StoredAnswerTable

logger = logging.getLogger(__name__)

CLARIFICATION_REPLY_WINDOW = timedelta(hours=24)  # a clarification older than this is not taken as still open
OPEN_CLARIFICATIONS = 10_000  # sessions a process remembers the clarification state of
RECENT_RUNS = 20  # a session's waiting deep run is looked for among the user's latest runs
_AWAITING = "awaiting_human_feedback"  # DeepRunRecord.status of a paused run


class History(Protocol):
    """The conversation history (the memory store)."""

    async def history(self, *, user_id: str, session_id: str | None, limit: int = 20) -> list[ExchangeRecord]: ...


class StoredRun(Protocol):
    """What this layer reads of a stored deep run (``deep.store.DeepRunRecord``, which stands above the pipeline)."""

    @property
    def run_id(self) -> str: ...
    @property
    def session_id(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def awaiting(self) -> str | None: ...
    @property
    def feedback(self) -> str | None: ...
    @property
    def expires_at(self) -> datetime | None: ...


class RunsOfUser(Protocol):
    """The deep-run store (``DeepRuns``)."""

    async def of_user(self, user_id: str, *, limit: int = 50) -> Sequence[StoredRun]: ...


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


TableAction = Literal["page", "export"]


@dataclass(frozen=True)
class TableCommand:
    """The message asks for more of the session's last table ("show the rest") or for all of it as CSV ("export
    that table"). ``table`` is that table (None: the session has none); ``Conversation.table_reply`` answers it."""

    request: ResearchRequest
    action: TableAction
    table: StoredAnswerTable | None
    allow_clarification: bool = field(default=False, init=False)
    kind: Literal["table_command"] = field(default="table_command", init=False)


QuickTurn = NewQuestion | ClarificationReply | TableCommand
Turn = NewQuestion | ClarificationReply | TableCommand | ResearchReply


class AnswerTables(Protocol):
    """Where the sessions' answer tables are persisted (the memory store)."""

    async def last_answer_table(self, *, user_id: str, session_id: str) -> StoredAnswerTable | None: ...

    async def mark_table_shown(self, *, user_id: str, table_id: str, shown: int) -> None: ...


_PAGE_COMMAND = re.compile(
    r"(?:please\s+|ok(?:ay)?,?\s+)?(?:"
    r"(?:show|give|list|see|display)(?:\s+me)?\s+(?:the\s+)?(?:rest|remaining(?:\s+rows)?|more(?:\s+rows)?|next"
    r"(?:\s+(?:rows|page))?)(?:\s+of\s+(?:it|them|the\s+(?:table|rows|results)))?"
    r"|more\s+rows|next\s+page|next\s+rows|the\s+rest)(?:,?\s+please)?[\s.!]*"
)
_EXPORT_COMMAND = re.compile(
    r"(?:please\s+|ok(?:ay)?,?\s+)?(?:"
    r"(?:export|download|save|give\s+me|send\s+me)(?:\s+(?:that|the|this)\s+(?:table|results?|rows))"
    r"(?:\s+(?:as|to|in)\s+(?:a\s+)?csv(?:\s+file)?)?"
    r"|(?:export|download|save)(?:\s+(?:it|them))?\s+(?:as|to|in)\s+(?:a\s+)?csv(?:\s+file)?"
    r")(?:,?\s+please)?[\s.!]*"
)
CSV_ROWS_IN_ANSWER = 500  # an export answered in a chat carries at most this many rows; the route gives them all


def table_action(message: str) -> TableAction | None:
    """Whether ``message`` asks for more of the last table ("page") or for it as CSV ("export")."""
    text = " ".join(message.casefold().split())
    if _PAGE_COMMAND.fullmatch(text):
        return "page"
    if _EXPORT_COMMAND.fullmatch(text):
        return "export"
    return None


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
        tables: Callable[[], AnswerTables | None] | None = None,
    ) -> None:
        self._history = history
        self._tables = tables
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
        action = table_action(request.question) if self._tables is not None else None
        if action is not None:
            return TableCommand(request, action, await self.last_table(request.user_id, request.session_id))
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

    async def last_table(self, user_id: str, session_id: str) -> StoredAnswerTable | None:
        """The session's latest answer table (None: none, or no store to read it from now)."""
        store = self._tables() if self._tables is not None else None
        if store is None:
            return None
        try:
            return await store.last_answer_table(user_id=user_id, session_id=session_id)
        except MemoryStoreError as error:
            logger.warning("could not read the last table of session %s: %s", session_id, error)
            return None

    async def table_reply(self, command: TableCommand) -> FinalResponse:
        """The answer to a table command: the next rows of the session's last table (and where the session is
        now, for the next "show the rest"), or the whole table as CSV. Never searches anything."""
        from researchcrew.contracts.query import Query
        from researchcrew.contracts.synthesizer import FinalResponse
        from researchcrew.text.answer_tables import markdown_table, more_rows_line, table_csv

        request = command.request
        query = Query(text=request.question, user_id=request.user_id, session_id=request.session_id)
        table = command.table
        if table is None:
            return FinalResponse(
                query=query,
                answer="This session has no table to page through or export yet: ask a question whose answer is "
                'a table first (for example, "which studies report a sample size above 1,000?").',
                answer_kind="uncertainty",
                final_reason="table_command: the session has no answer table",
            )
        title = f"**{table.title}**\n\n" if table.title else ""
        if command.action == "export":
            shown = table.rows[:CSV_ROWS_IN_ANSWER]
            csv_text = table_csv(table.columns, shown)
            cut = (
                f" (the first {len(shown)}; all {table.total_rows} rows: GET /v1/sessions/{table.session_id}/tables/"
                f"{table.table_id}?format=csv)"
                if len(shown) < table.total_rows
                else ""
            )
            answer = f"{title}The table as CSV, {table.total_rows} rows{cut}:\n\n```csv\n{csv_text}```"
            page = table.page(0, table.page_size)
            reason = f"table_export: {len(shown)} of {table.total_rows} rows as CSV"
        else:
            start = table.shown if table.shown < table.total_rows else table.total_rows
            page = table.page(start, table.page_size)
            if not page.rows:
                answer = (
                    f"{title}That was all {table.total_rows} rows of this table — say 'export that table' for all "
                    "of them as CSV."
                )
            else:
                end = page.offset + len(page.rows)
                answer = f"{title}Rows {page.offset + 1}–{end} of {table.total_rows}:\n\n" + markdown_table(
                    page.columns, [row.model_copy(update={"citation": None}) for row in page.rows]
                )
                answer += "\n\n" + (more_rows_line(page.more_rows) if page.more_rows else "That is the last row.")
                await self._mark_shown(request.user_id, table.table_id, end)
            reason = f"table_page: rows {page.offset + 1}–{page.offset + len(page.rows)} of {table.total_rows}"
        uncited = page.model_copy(update={"rows": [row.model_copy(update={"citation": None}) for row in page.rows]})
        return FinalResponse(
            query=query, answer=answer, answer_kind="extractive", table=uncited, final_reason=reason[:500]
        )

    async def _mark_shown(self, user_id: str, table_id: str, shown: int) -> None:
        store = self._tables() if self._tables is not None else None
        if store is None:
            return
        try:
            await store.mark_table_shown(user_id=user_id, table_id=table_id, shown=shown)
        except MemoryStoreError as error:  # the rows were given; the next "show the rest" repeats them
            logger.warning("could not record the rows shown of table %s: %s", table_id, error)

    async def waiting_run(self, user_id: str, session_id: str) -> StoredRun | None:
        """The session's deep run that waits for an answer to its clarifying questions (none received yet, not
        expired), if any. A store that cannot answer now counts as none: the message is then answered quickly."""
        if self._research_runs is None:
            return None
        try:
            runs = await self._research_runs()
            records: Sequence[StoredRun] = await runs.of_user(user_id, limit=RECENT_RUNS) if runs else []
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
