"""Zep through zep-python 2.0.2's async client: mirror conversation turns into Zep sessions, recall from Zep.

Writes never happen here directly on the answer path: the outbox (``memory/outbox.py``) calls
``ZepMemory.deliver_turn`` from its background worker. What makes a retried write safe:

* every message carries our stable message id (a uuid5 of response id and role, see ``memory/store.py``) as its
  Zep ``uuid`` and in ``metadata``; the Zep CE server stores the uuid and refuses a second insert
  ("message_uuid already exists"), which we count as delivered;
* before re-sending a write that was attempted before, ``already_delivered`` asks Zep whether the message is there.

Users and sessions are created on demand ("already exists" is fine; a session owned by another user is refused).
Our session ids are only unique per user, Zep's are global: a Zep session id is derived from both
(``zep_session_id``), and the session's and messages' metadata carry our ids.
Every call has a timeout (``ZepSettings.timeout_s``: an ``httpx`` client with that timeout is injected, and
``asyncio.timeout`` bounds the whole call). zep-python's named errors are mapped to ``ZepError``, which is both a
``MemoryStoreError`` and a ``ToolError`` (so ``MemoryTool`` reports its kind as data) and says whether retrying
can help (``retryable``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, Field
from zep_python.client import AsyncZep
from zep_python.core.api_error import ApiError
from zep_python.core.pydantic_utilities import pydantic_v1
from zep_python.types import Memory, Message, MessageListResponse, Session

from researchcrew.errors import FailureKind, MemoryStoreError, ToolError
from researchcrew.memory._zep_recall import (
    MESSAGE_ID_KEY,
    SESSION_ID_KEY,
    USER_ID_KEY,
    fact_hits,
    message_hits,
    ranked,
)
from researchcrew.memory.records import RecalledExchange
from researchcrew.net.response_limits import MEGABYTE, CappedTransport, ResponseTooLargeError
from researchcrew.settings import ZepSettings

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Statuses after which trying again later can succeed: auth/config can be fixed (nothing is lost meanwhile), a
# missing session is recreated, timeouts/conflicts/rate limits pass.
_RETRYABLE_4XX = frozenset({401, 403, 404, 408, 409, 425, 429})
_EXCEEDS = re.compile(r"exceeds (\d+) characters")
_TRUNCATION_MARK = " […]"


class ZepError(MemoryStoreError, ToolError):
    """A Zep call failed. ``kind`` says how (timeout, http_error, ...); ``retryable`` whether a later try can work."""

    def __init__(self, kind: FailureKind, message: str, *, status_code: int | None = None) -> None:
        ToolError.__init__(self, kind, message, status_code=status_code)

    @property
    def retryable(self) -> bool:
        if self.kind in ("timeout", "unreachable", "bad_response"):
            return True
        if self.kind == "http_error" and self.status_code is not None:
            return self.status_code >= 500 or self.status_code in _RETRYABLE_4XX
        return False


class ZepMessage(BaseModel):
    """One message as it travels through the outbox to Zep (JSON-serialisable)."""

    uuid: str = Field(description="Our stable message id; Zep's message uuid and metadata carry it.")
    role: str = Field(description="Free-text speaker name.")
    role_type: Literal["user", "assistant"] = Field(description="Zep's role type; the CE server requires it.")
    content: str = Field(min_length=1, description="The message text.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Stored with the message in Zep.")


def _quoted(identifier: str) -> str:
    """zep-python puts ids into URL paths unescaped; quote them so "a/b" stays one path segment."""
    return quote(identifier, safe="")


def _api_message(body: Any) -> str:
    """The human-readable part of an ApiError body ({"message": ...} from the server, or raw text)."""
    message = getattr(body, "message", None)
    if isinstance(body, dict):
        message = body.get("message")
    return str(message if message is not None else body)[:500]


class ZepMemory:
    """Zep for one process: ``deliver_turn`` (used by the outbox worker), ``recall`` and ``delete_user``."""

    def __init__(
        self,
        settings: ZepSettings,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        search_scope: Literal["messages", "facts"] = "messages",
    ) -> None:
        if not settings.api_url:
            raise ZepError("not_configured", "Zep is not configured: set ZEP_API_URL (or RESEARCHCREW_ZEP__API_URL)")
        if settings.api_key is None:
            raise ZepError("not_configured", "Zep has no API key: set ZEP_API_KEY (or RESEARCHCREW_ZEP__API_KEY)")
        self.base_url = settings.api_url.rstrip("/")
        self.timeout_s = settings.timeout_s
        self.search_scope = search_scope
        capped = CappedTransport(transport, int(settings.max_response_mb * MEGABYTE))
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(settings.timeout_s), transport=capped)
        self._client = AsyncZep(
            base_url=self.base_url, api_key=settings.api_key.get_secret_value(), httpx_client=self._http
        )
        # zep-python 2.0.2 lets the ZEP_API_URL variable override base_url; our settings already honour that
        # variable, so an explicit setting must win over it here as everywhere else.
        expected = f"{self.base_url}/api/v2"
        wrapper = self._client._client_wrapper
        if wrapper.httpx_client.base_url != expected:
            wrapper._base_url = wrapper.httpx_client.base_url = expected
        self._users: set[str] = set()
        self._sessions: dict[str, str] = {}  # session id → its user, for sessions known to exist in Zep

    async def aclose(self) -> None:
        await self._http.aclose()

    # The boundary: every SDK call goes through here ----------------------------------------------------------
    async def _call(self, what: str, operation: Callable[[], Awaitable[T]]) -> T:
        try:
            async with asyncio.timeout(self.timeout_s):
                return await operation()
        except (TimeoutError, httpx.TimeoutException) as error:
            raise ZepError("timeout", f"Zep {what} did not answer within {self.timeout_s:g} s") from error
        except ResponseTooLargeError as error:
            raise ZepError("bad_response", f"Zep {what}: {error}") from error
        except httpx.HTTPError as error:  # refused, reset, closed without a response, DNS, TLS
            raise ZepError("unreachable", f"Zep {what}: {type(error).__name__}: {error}") from error
        except ApiError as error:  # NotFoundError, BadRequestError, ConflictError, InternalServerError, others
            status = error.status_code if error.status_code and 100 <= error.status_code <= 599 else None
            raise ZepError(
                "http_error", f"Zep {what}: HTTP {status}: {_api_message(error.body)}", status_code=status
            ) from error
        except (json.JSONDecodeError, pydantic_v1.ValidationError) as error:
            raise ZepError("bad_response", f"Zep {what}: unreadable response: {error}"[:500]) from error

    # Users and sessions, on demand -------------------------------------------------------------------------
    async def ensure_user(self, user_id: str) -> None:
        if user_id in self._users:
            return
        try:
            await self._call(
                "user.add", lambda: self._client.user.add(user_id=user_id, metadata={"created_by": "researchcrew"})
            )
        except ZepError as error:
            if error.status_code not in (400, 409):
                raise
            await self._confirm(error, lambda: self._call("user.get", lambda: self._client.user.get(_quoted(user_id))))
        self._users.add(user_id)

    async def ensure_session(self, user_id: str, session_id: str) -> str:
        """Create (or find) the user's Zep session for our ``session_id``; returns the Zep session id."""
        zid = zep_session_id(user_id, session_id)
        owner = self._sessions.get(zid)
        if owner == user_id:
            return zid
        if owner is None:
            await self.ensure_user(user_id)
            metadata = {"created_by": "researchcrew", USER_ID_KEY: user_id, SESSION_ID_KEY: session_id}
            try:
                await self._call(
                    "memory.add_session",
                    lambda: self._client.memory.add_session(session_id=zid, user_id=user_id, metadata=metadata),
                )
                owner = user_id
            except ZepError as error:
                if error.status_code not in (400, 409):
                    raise
                session = await self._confirm(error, lambda: self._get_session(zid))
                owner = session.user_id
        if owner != user_id:
            raise ZepError("invalid_request", f"Zep session {zid!r} belongs to another user")
        self._sessions[zid] = user_id
        return zid

    async def _confirm(self, original: ZepError, lookup: Callable[[], Awaitable[T]]) -> T:
        """After an "add" was refused, confirm the thing exists; if it does not, the refusal was the real error."""
        try:
            return await lookup()
        except ZepError as error:
            if error.status_code == 404 or not error.retryable:
                raise original from error
            raise

    def forget_cached(self, user_id: str | None = None, zep_session: str | None = None) -> None:
        """Drop what we believe exists in Zep (after a 404, or after deleting a user)."""
        if user_id is not None:
            self._users.discard(user_id)
            for sid in [s for s, owner in self._sessions.items() if owner == user_id]:
                del self._sessions[sid]
        if zep_session is not None:
            self._sessions.pop(zep_session, None)

    # Writes ------------------------------------------------------------------------------------------------
    async def deliver_turn(
        self, *, user_id: str, session_id: str, messages: Sequence[ZepMessage], retry: bool = False
    ) -> Literal["delivered", "already_delivered"]:
        """Add the messages of one turn to the user's Zep session (creating both when needed). Idempotent."""
        zid = await self.ensure_session(user_id, session_id)
        if retry and await self.already_delivered(zid, messages):
            return "already_delivered"
        try:
            added = await self._add(zid, messages)
        except ZepError as error:
            limit = _EXCEEDS.search(error.message) if error.status_code == 400 else None
            if limit is None:
                raise
            # The server named its content limit (2,500 characters on Zep's free plan): fit into it, once.
            logger.warning("Zep refused a message over %s characters; sending the turn truncated", limit.group(1))
            added = await self._add(zid, [_truncated(m, int(limit.group(1))) for m in messages])
        return "delivered" if added else "already_delivered"

    async def _add(self, session_id: str, messages: Sequence[ZepMessage]) -> bool:
        """Post the messages; False when Zep already has them (it refuses known uuids: all or nothing)."""
        try:
            await self._call(
                "memory.add",
                lambda: self._client.memory.add(_quoted(session_id), messages=[_sdk_message(m) for m in messages]),
            )
        except ZepError as error:
            if error.status_code == 400 and "already exists" in error.message:
                return False  # an earlier attempt got through
            if error.status_code == 404:
                self.forget_cached(zep_session=session_id)  # the session vanished: recreate it next time
            raise
        return True

    async def already_delivered(self, session_id: str, messages: Sequence[ZepMessage]) -> bool:
        """Whether the Zep session ``session_id`` already holds this turn: by its uuid, else by our message id in
        the recent messages' metadata."""
        if not messages:
            return True
        first = messages[0]
        try:
            await self._call(
                "memory.get_session_message",
                lambda: self._client.memory.get_session_message(_quoted(session_id), first.uuid),
            )
            return True
        except ZepError as error:
            if error.status_code != 404:
                raise
        # Servers that assign their own uuids: look for our id in the session's most recent messages.
        page = await self._messages_page(session_id, limit=1, cursor=None)
        total = page.total_count or 0
        if total == 0:
            return False
        size = 100
        last_page = (total + size - 1) // size
        for cursor in range(last_page, max(0, last_page - 3), -1):  # the newest 300 messages at most
            listing = await self._messages_page(session_id, limit=size, cursor=cursor)
            for message in listing.messages or []:
                if (message.metadata or {}).get(MESSAGE_ID_KEY) == first.uuid:
                    return True
        return False

    async def _messages_page(self, session_id: str, *, limit: int, cursor: int | None) -> MessageListResponse:
        return await self._call(
            "memory.get_session_messages",
            lambda: self._client.memory.get_session_messages(_quoted(session_id), limit=limit, cursor=cursor),
        )

    # Recall (the MemoryRecall protocol) ------------------------------------------------------------------------
    async def recall(
        self,
        *,
        user_id: str,
        query_text: str,
        session_id: str | None = None,
        limit: int = 3,
        min_relevance: float = 0.0,
    ) -> list[RecalledExchange]:
        """The user's earlier exchanges (and Zep facts) relevant to the query, from Zep's session search, plus
        the facts of the session's memory when a session is given. Never another user's: see _zep_recall.py."""
        if limit <= 0 or not query_text.strip():
            return []
        options: dict[str, Any] = {
            "text": query_text,
            "user_id": user_id,
            "search_scope": self.search_scope,
            "search_type": "similarity",
            "limit": max(limit * 2, 5),
        }
        zid = zep_session_id(user_id, session_id) if session_id is not None else None
        if zid is not None:
            options["session_ids"] = [zid]
        if min_relevance > 0:
            options["min_score"] = min_relevance
        searching = self._call("memory.search_sessions", lambda: self._client.memory.search_sessions(**options))
        if zid is None:
            response, memory = await searching, None
        else:
            response, memory = await asyncio.gather(searching, self._session_memory(zid, limit))
        results = list(response.results or [])
        messages = [r for r in results if r.message is not None]
        foreign = {r.session_id for r in messages if r.session_id and not _metadata(r.message).get(USER_ID_KEY)}
        owned = await self._owned_sessions(user_id, foreign)  # only for messages researchcrew did not write
        facts = [r for r in results if r.message is None and r.fact is not None]
        found = message_hits(messages, user_id=user_id, zep_session=zid, owned_sessions=owned)
        found += fact_hits(
            [r.fact for r in facts],
            user_id=user_id,
            session_id=session_id,
            query_text=query_text,
            scores=[r.score for r in facts],
        )
        if memory is not None:
            found += fact_hits(
                memory.relevant_facts or [], user_id=user_id, session_id=session_id, query_text=query_text
            )
        return ranked(found, limit=limit, min_relevance=min_relevance)

    async def _session_memory(self, session_id: str, limit: int) -> Memory | None:
        try:
            return await self._call(
                "memory.get", lambda: self._client.memory.get(_quoted(session_id), lastn=max(limit * 2, 6))
            )
        except ZepError as error:
            if error.status_code == 404:  # a session without messages has no memory yet
                return None
            raise

    async def _owned_sessions(self, user_id: str, session_ids: set[str]) -> set[str]:
        """Which of these Zep sessions belong to the user. (``user.get_sessions`` cannot be used: zep-python
        2.0.2 parses its flat list as a list of lists and fails.)"""
        unknown = [s for s in session_ids if self._sessions.get(s) != user_id]
        owners = await asyncio.gather(*(self._get_session(s) for s in unknown))
        return {s for s in session_ids if self._sessions.get(s) == user_id} | {
            s for s, session in zip(unknown, owners, strict=True) if session.user_id == user_id
        }

    async def _get_session(self, session_id: str) -> Session:
        return await self._call("memory.get_session", lambda: self._client.memory.get_session(_quoted(session_id)))

    async def delete_user(self, user_id: str) -> Literal["deleted", "absent"]:
        """Delete the user and everything Zep holds for them. A user Zep never had counts as done."""
        self.forget_cached(user_id=user_id)
        try:
            await self._call("user.delete", lambda: self._client.user.delete(_quoted(user_id)))
        except ZepError as error:
            if error.status_code == 404:
                return "absent"
            raise
        return "deleted"


def zep_session_id(user_id: str, session_id: str) -> str:
    """The Zep session for our (user, session): Zep session ids are global, ours only unique per user."""
    digest = hashlib.sha256(f"{user_id}\x00{session_id}".encode()).hexdigest()[:32]
    return f"rc_{digest}"


def _metadata(message: Message | None) -> dict[str, Any]:
    return (message.metadata if message is not None else None) or {}


def _sdk_message(message: ZepMessage) -> Message:
    metadata = {**message.metadata, MESSAGE_ID_KEY: message.uuid}
    return Message(
        uuid=message.uuid, role=message.role, role_type=message.role_type, content=message.content, metadata=metadata
    )


def _truncated(message: ZepMessage, limit: int) -> ZepMessage:
    if len(message.content) <= limit:
        return message
    keep = max(1, limit - len(_TRUNCATION_MARK))
    return message.model_copy(
        update={
            "content": message.content[:keep] + _TRUNCATION_MARK,
            "metadata": {**message.metadata, "truncated": True},
        }
    )


__all__ = ["MESSAGE_ID_KEY", "ZepError", "ZepMemory", "ZepMessage", "zep_session_id"]
