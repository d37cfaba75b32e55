"""``MemoryTool`` (``memory_recall``): earlier exchanges of the same user, relevant to the new question.

It searches a ``MemoryRecall`` given at construction: the built-in ``MemoryStore`` (local semantic recall) or Zep
(memory/zep.py). Recall is strictly scoped: without a ``user_id`` the call is refused (``invalid_request``) rather
than guessing whose memory to read, and ``scope="session"`` narrows it to the current session.

Each recalled exchange becomes one chunk, ``memory:<response_id>``, in the user's words only: the earlier question
(``metadata["speaker"] = "user"``). The assistant's answer then is not in it — the assistant never cites itself
(issue 20): its earlier answers are never evidence, never compared or counted. What that answer rested on is listed
in ``metadata["earlier_citations"]`` (the sources, which a new search finds again when they are relevant). Such a
chunk is context (``recalled_as = "earlier_question"``) beside a research question, and evidence only for a question
about the conversation (below); ``contracts.chunks.is_evidence`` is the rule every stage applies.

With ``include_entities=True`` and a backend that keeps an entity graph (the built-in store), one more chunk,
``memory:entities:<hash>``, lists the known entities the question names and what they were related to. Its
relevance is a prior, not a similarity: 0.7 when the question names an entity, 0.4 when it only shares a word. The
graph is built from the assistant's answers, so this chunk is context (``speaker = "assistant"``), not evidence.

A question about the conversation itself ("What did I ask before?", "what did we discuss last time?") is answered
from the conversation: the session's most recent exchanges (the user's, when the session has none) are recalled
beside the topical matches, every chunk marked ``metadata["recalled_as"] = "conversation"`` so that the answer's
confidence treats them as the first-hand evidence they are for such a question (pipeline/_support.py).

A question about the user's own facts ("what is my project code?", "what's my name?", "which database am I using?")
is answered by what the user said (memory/statements.py): the user's latest messages (of all their sessions, or of
this one for ``scope="session"``) and the recalled ones are read for statements that answer it ("my project code is
BLUEFALCON-7731", "call me Zed", "I'm using Postgres for the database"), and each becomes one chunk,
``memory:said:<response_id>:<n>``, quoting the user — ``You said: "my project code is BLUEFALCON-7731"`` — marked
``metadata["recalled_as"] = "user_statement"``, newest first. The exchanges they came from are left out: the evidence
is the user's words, not what the assistant answered then. Only the user's messages are read, never the answers.

Failures are data: a store that cannot be reached is ``unreachable``, a missing embedding model
``not_configured``; a backend that raises ``ToolError`` itself (Zep) keeps its own kind.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Sequence
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from sqlalchemy.exc import InterfaceError, OperationalError

from researchcrew.contracts.chunks import MEMORY_SOURCE_TYPE, ContextChunk
from researchcrew.errors import FailureKind, MemoryStoreError, ModelUnavailableError, ToolError
from researchcrew.memory.recall import MemoryRecall
from researchcrew.memory.records import EntityRecord, ExchangeRecord, RecalledExchange, RelationshipRecord
from researchcrew.memory.statements import PersonalQuestion, personal_question, stated_answers
from researchcrew.settings import MemorySettings
from researchcrew.tools.base import Tool

logger = logging.getLogger(__name__)

MAX_RESULTS = 50
MAX_ENTITIES = 5
MAX_LINKS = 4
CONVERSATION_RELEVANCE = 0.9  # a recent exchange, for a question about the conversation: what was asked for
STATED_RELEVANCE = 0.95  # the user's own statement of the fact a question asks about them
STATEMENT_SCAN = 100  # latest messages of the user read for statements of their facts
MAX_STATEMENTS = 3  # statements of one fact returned (newest first: a fact the user restated may have changed)
USER_STATEMENT = "user_statement"  # metadata["recalled_as"] of a chunk quoting the user's statement of a fact
EARLIER_QUESTION = "earlier_question"  # metadata["recalled_as"] of an earlier question: context, not evidence


@runtime_checkable
class ConversationHistory(Protocol):
    """A memory backend that can list a conversation's latest exchanges (``MemoryStore`` does)."""

    async def history(self, *, user_id: str, session_id: str | None, limit: int = 20) -> list[ExchangeRecord]: ...


@runtime_checkable
class EntityMemory(Protocol):
    """A memory backend that also keeps an entity graph (``MemoryStore`` does)."""

    async def entities(self, *, user_id: str, query_text: str | None = None, limit: int = 20) -> list[EntityRecord]: ...

    async def relationships(self, *, user_id: str, entity_name: str | None = None) -> list[RelationshipRecord]: ...


_MARKER = re.compile(r"\s*\[\d+(?:\s*[,–-]\s*\d+)*\]")
_CONNECTION_ERRORS = (OperationalError, InterfaceError, OSError)


def compact(text: str, limit: int) -> str:
    """Whitespace collapsed, citation markers removed, cut at a word boundary within ``limit`` characters."""
    text = " ".join(_MARKER.sub("", text).split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return f"{cut} …"


# PostgreSQL SQLSTATE classes that mean "the database is not there for us": connection exceptions (08), the
# database does not exist (3D000), operator intervention such as a shutdown (57P), out of resources (53).
_UNREACHABLE_SQLSTATES = ("08", "3D", "57P", "53")
_NOT_CONFIGURED_SQLSTATES = ("28",)  # invalid authorization: the URL's credentials are wrong


def _kind_of(error: BaseException) -> FailureKind:
    """What a store failure means for the Retriever, judged by its cause chain."""
    seen: BaseException | None = error
    while seen is not None:
        sqlstate = str(getattr(seen, "sqlstate", None) or "")
        if isinstance(seen, ModelUnavailableError) or sqlstate.startswith(_NOT_CONFIGURED_SQLSTATES):
            return "not_configured"
        if isinstance(seen, _CONNECTION_ERRORS) or (sqlstate and sqlstate.startswith(_UNREACHABLE_SQLSTATES)):
            return "unreachable"
        if getattr(seen, "connection_invalidated", False):  # SQLAlchemy: the connection broke mid-operation
            return "unreachable"
        seen = seen.__cause__ or seen.__context__
    return "bad_response"


class MemoryTool(Tool):
    """Recall of the user's earlier exchanges relevant to the query."""

    name: ClassVar[str] = "memory_recall"
    description: ClassVar[str] = (
        "Recall what this user asked and was answered before, relevant to the query. Options: num_results (1-50), "
        "scope ('user': all their sessions, 'session': this conversation only), min_relevance (0-1), "
        "include_entities (also list known entities the query names)."
    )
    source_type: ClassVar[str] = MEMORY_SOURCE_TYPE

    def __init__(self, recall: MemoryRecall, settings: MemorySettings | None = None) -> None:
        self.recall = recall
        self.settings = settings or MemorySettings()

    # The base declares **kwargs ("tool-specific options"); Tool.search checks calls against this signature.
    async def _search(  # type: ignore[override]
        self,
        query: str,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        num_results: int = 3,
        scope: Literal["user", "session"] = "user",
        min_relevance: float | None = None,
        include_entities: bool = False,
    ) -> Sequence[ContextChunk]:
        if not user_id or not user_id.strip():
            raise ToolError("invalid_request", "memory recall needs a user_id: recall never guesses whose memory")
        if scope not in ("user", "session"):
            raise ToolError("invalid_request", f"scope must be 'user' or 'session', not {scope!r}")
        if scope == "session" and not session_id:
            raise ToolError("invalid_request", "scope='session' needs a session_id")
        if not 1 <= num_results <= MAX_RESULTS:
            raise ToolError("invalid_request", f"num_results must be between 1 and {MAX_RESULTS}, not {num_results}")
        threshold = self.settings.recall_min_relevance if min_relevance is None else min_relevance
        if not 0.0 <= threshold <= 1.0:
            raise ToolError("invalid_request", f"min_relevance must be in [0, 1], not {threshold}")
        from researchcrew.text.questions import asks_about_the_conversation

        # "What did I say my project code was?" is about the conversation too; the fact asked for is what it wants.
        asked = personal_question(query)
        about_conversation = asked is None and asks_about_the_conversation(query)
        stated: list[ContextChunk] = []
        try:
            recalled = await self.recall.recall(
                user_id=user_id,
                query_text=query,
                session_id=session_id if scope == "session" else None,
                limit=num_results,
                min_relevance=threshold,
            )
            if about_conversation:
                recalled = await self._with_recent(recalled, user_id, session_id, num_results)
            if asked is not None:
                stated, sources = await self._statements(asked, recalled, user_id, session_id, scope)
                recalled = [item for item in recalled if item.response_id not in sources]
            entity_chunk = await self._entity_chunk(query, user_id) if include_entities else None
        except ToolError:
            raise  # a backend that knows its failure kind (Zep) reports it itself
        except (MemoryStoreError, *_CONNECTION_ERRORS) as error:
            kind = _kind_of(error)
            logger.warning("memory recall for user %s failed (%s): %s", user_id, kind, error)
            raise ToolError(kind, f"memory store: {error}") from error
        foreign = [item for item in recalled if item.user_id != user_id]
        if foreign:  # defence in depth: a backend bug must not leak another user's memory into this answer
            logger.error("memory recall for user %s returned %d items of other users; dropped", user_id, len(foreign))
        chunks = [*stated, *(self._chunk(item, session_id=session_id) for item in recalled if item.user_id == user_id)]
        if about_conversation:
            chunks = [
                chunk.model_copy(update={"metadata": {**chunk.metadata, "recalled_as": "conversation"}})
                for chunk in chunks
            ]
        return [*chunks, entity_chunk] if entity_chunk is not None else chunks

    async def _with_recent(
        self, recalled: list[RecalledExchange], user_id: str, session_id: str | None, limit: int
    ) -> list[RecalledExchange]:
        """For a question about the conversation: the topical matches plus the latest exchanges of this session
        (of the user's sessions when this one has none), newest first, each once."""
        history = self.recall
        if not isinstance(history, ConversationHistory):
            return recalled
        recent = await history.history(user_id=user_id, session_id=session_id, limit=limit) if session_id else []
        if not recent:
            recent = await history.history(user_id=user_id, session_id=None, limit=limit)
        known = {item.response_id for item in recalled}
        latest = [
            RecalledExchange.of(record, CONVERSATION_RELEVANCE)
            for record in reversed(recent)
            if record.response_id not in known
        ]
        return [*latest, *recalled][: max(limit, len(latest))]

    async def _statements(
        self,
        asked: PersonalQuestion,
        recalled: list[RecalledExchange],
        user_id: str,
        session_id: str | None,
        scope: Literal["user", "session"],
    ) -> tuple[list[ContextChunk], set[str]]:
        """Chunks quoting what the user said that answers ``asked``, newest first, and the exchanges they came
        from. The user's latest messages are read when the backend keeps a history; the recalled ones always."""
        messages: dict[str, ExchangeRecord | RecalledExchange] = {item.response_id: item for item in recalled}
        history = self.recall
        if isinstance(history, ConversationHistory):
            narrowed = session_id if scope == "session" else None
            for record in await history.history(user_id=user_id, session_id=narrowed, limit=STATEMENT_SCAN):
                messages.setdefault(record.response_id, record)
        newest = sorted((item for item in messages.values() if item.user_id == user_id), key=_said_at, reverse=True)
        chunks: list[ContextChunk] = []
        seen: set[str] = set()
        sources: set[str] = set()
        for item in newest:
            for index, statement in enumerate(stated_answers(item.question, asked)):
                sources.add(item.response_id)
                folded = " ".join(statement.text.casefold().split())
                if folded in seen or len(chunks) >= MAX_STATEMENTS:
                    continue
                seen.add(folded)
                chunks.append(self._statement_chunk(item, index, statement.text, statement.value, session_id))
        return chunks, sources

    def _statement_chunk(
        self, item: ExchangeRecord | RecalledExchange, index: int, text: str, value: str, session_id: str | None
    ) -> ContextChunk:
        same = item.session_id == session_id
        when = item.asked_at or item.answered_at
        return ContextChunk(
            chunk_id=f"memory:said:{item.response_id}:{index}",
            source_type=self.source_type,
            content=f'You said: "{text}".',
            semantic_relevance=STATED_RELEVANCE,
            title="What you said " + ("earlier in this conversation" if same else "in an earlier conversation"),
            source_id=item.response_id,
            source_date=when,
            metadata={
                "recalled_as": USER_STATEMENT,
                "speaker": "user",
                "statement": text,
                "value": value,
                "session_id": item.session_id,
                "same_session": same,
                "asked_at": when.isoformat() if when else None,
                "origin": item.origin if isinstance(item, RecalledExchange) else "local",
            },
            tool_name=self.name,
        )

    async def _entity_chunk(self, query: str, user_id: str) -> ContextChunk | None:
        graph = self.recall
        if not isinstance(graph, EntityMemory):
            return None
        named = await graph.entities(user_id=user_id, query_text=query, limit=MAX_ENTITIES)
        if not named:
            return None
        folded = query.casefold()
        lines = ["Entities from this user's earlier conversations that the question refers to:"]
        for entity in named:
            links = (await graph.relationships(user_id=user_id, entity_name=entity.name))[:MAX_LINKS]
            related = ", ".join(f"{link.target} ({link.relation.replace('_', ' ')})" for link in links)
            lines.append(
                f"- {entity.name} ({entity.type}; mentioned in {entity.mention_count} earlier answers"
                + (f"; related to {related})" if related else ")")
            )
        names = sorted(entity.name for entity in named)
        return ContextChunk(
            chunk_id=f"memory:entities:{hashlib.blake2b('|'.join(names).encode(), digest_size=8).hexdigest()}",
            source_type=self.source_type,
            content="\n".join(lines),
            semantic_relevance=0.7 if any(entity.name.casefold() in folded for entity in named) else 0.4,
            title="Entities discussed before",
            metadata={"entities": names, "origin": "entity_graph", "speaker": "assistant"},
            tool_name=self.name,
        )

    def _chunk(self, item: RecalledExchange, *, session_id: str | None) -> ContextChunk:
        """The user's side of an earlier exchange (the module docstring): what they asked, never what was answered."""
        question = compact(item.question, 500)
        when = item.asked_at or item.answered_at
        said = "earlier in this conversation" if item.session_id == session_id else "in an earlier conversation"
        content = f"You asked {said}" + (f" ({when:%Y-%m-%d})" if when else "") + f": {question}"
        metadata: dict[str, Any] = {
            "speaker": "user",
            "recalled_as": EARLIER_QUESTION,
            "question": question,
            "answer_kind": item.answer_kind,
            "session_id": item.session_id,
            "same_session": item.session_id == session_id,
            "asked_at": item.asked_at.isoformat() if item.asked_at else None,
            "sources_used": item.sources_used,
            "earlier_citations": [_citation_summary(c) for c in item.citations],
            "origin": item.origin,
        }
        return ContextChunk(
            chunk_id=f"memory:{item.response_id}",
            source_type=self.source_type,
            content=content if question else "(empty question)",
            semantic_relevance=item.relevance,
            title=f"Earlier question: {compact(item.question, 120)}" if question else "Earlier question",
            source_id=item.response_id,
            source_date=item.answered_at or item.asked_at,
            metadata=metadata,
            tool_name=self.name,
        )


def _said_at(item: ExchangeRecord | RecalledExchange) -> float:
    when = item.asked_at or item.answered_at
    return when.timestamp() if when is not None else 0.0


def _citation_summary(citation: dict[str, Any]) -> dict[str, Any]:
    keys = ("number", "source_type", "title", "url", "source_id")
    return {key: citation[key] for key in keys if citation.get(key) is not None}
