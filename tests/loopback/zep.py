"""A stateful fake of the Zep v2 REST API (Community Edition routes), for contract tests with the real zep-python.

It follows ../shared/fixtures/zep/API.md: the routes zep-python 2.0.2 calls, the `Authorization: Api-Key <key>`
check, the CE server's validation (``role_type`` required, at most 30 messages per call, a content length limit,
unique message uuids: "message_uuid already exists"), 404 bodies ``{"message": "not found"}`` and the response
shapes of apidata/*.go. Search scores messages by word overlap (Zep Cloud's ``search_scope="messages"`` result
shape) or returns the facts a test seeded (the CE shape). Faults are switches: ``down`` (503), ``hang`` (a delay
longer than the client's timeout), ``drop`` (connection closed without a response), or ``fault`` for anything else.

    zep = FakeZep(api_key="test-key")
    with LoopbackServer(zep.route) as server:
        ...
        assert zep.message_ids_received() == [...]

What the fake does NOT model (the real server's behaviour there is unknown or irrelevant here): summaries,
fact extraction (tests seed facts with ``add_fact``). Pagination (``cursor``) is a 1-based page number, as in the
CE store (``GetListBySession``).
"""

from __future__ import annotations

import re
import threading
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import unquote

from tests.loopback.server import Reply, Request

API = "/api/v2"
MAX_MESSAGES_PER_CALL = 30
ROLE_TYPES = {"norole", "system", "assistant", "user", "function", "tool"}
_WORD = re.compile(r"[a-z0-9]+")

Mode = Literal["up", "down", "hang", "drop"]


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _error(message: str, status: int) -> Reply:
    return Reply.json({"message": message}, status=status)


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


@dataclass
class FakeZep:
    api_key: str = "test-key"
    max_message_chars: int = 100_000
    search_returns: Literal["messages", "facts"] = "messages"
    honour_uuids: bool = True  # False: assign our own uuids, like a server that ignores the client's
    mode: Mode = "up"
    hang_s: float = 30.0
    fault: Any = None  # optional Callable[[Request], Reply | None]: a reply here short-circuits the route
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    facts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _next_id: int = 1

    # Test-side helpers -------------------------------------------------------------------------------------
    def add_fact(self, user_id: str, fact: str, rating: float = 0.8) -> None:
        with self._lock:
            self.facts.setdefault(user_id, []).append(
                {"uuid": str(uuid.uuid4()), "created_at": _now(), "fact": fact, "rating": rating}
            )

    def all_messages(self) -> list[dict[str, Any]]:
        with self._lock:
            return [m for session in self.messages.values() for m in session]

    def message_ids_received(self, key: str = "researchcrew_message_id") -> list[str]:
        """Our message ids as stored by the server (from message metadata), in arrival order."""
        return [m["metadata"][key] for m in self.all_messages() if key in (m.get("metadata") or {})]

    def duplicates(self, key: str = "researchcrew_message_id") -> dict[str, int]:
        return {k: n for k, n in Counter(self.message_ids_received(key)).items() if n > 1}

    # The route ---------------------------------------------------------------------------------------------
    def route(self, request: Request) -> Reply:
        if self.fault is not None:
            injected = self.fault(request)
            if injected is not None:
                return injected  # type: ignore[no-any-return]
        if self.mode == "down":
            return _error("service unavailable", 503)
        if self.mode == "hang":
            return Reply.json({"message": "too late"}, delay_s=self.hang_s)
        if self.mode == "drop":
            return Reply(drop_connection=True)
        if request.headers.get("authorization") != f"Api-Key {self.api_key}":
            return _error("unauthorized", 401)
        if not request.path.startswith(API + "/"):
            return _error("not found", 404)
        parts = [unquote(p) for p in request.path[len(API) + 1 :].split("/")]
        body: Any = request.json() if request.body else None
        with self._lock:
            return self._dispatch(request.method, parts, request.query, body)

    def _dispatch(self, method: str, parts: list[str], query: dict[str, list[str]], body: Any) -> Reply:
        match method, parts:
            case "POST", ["users"]:
                return self._add_user(body)
            case "GET", ["users", user_id]:
                return Reply.json(self.users[user_id]) if user_id in self.users else _error("not found", 404)
            case "DELETE", ["users", user_id]:
                return self._delete_user(user_id)
            case "GET", ["users", user_id, "sessions"]:
                return Reply.json([s for s in self.sessions.values() if s["user_id"] == user_id])
            case "POST", ["sessions"]:
                return self._add_session(body)
            case "POST", ["sessions", "search"]:
                return self._search(body, query)
            case "GET", ["sessions", session_id]:
                found = self.sessions.get(session_id)
                return Reply.json(found) if found else _error("not found", 404)
            case "POST", ["sessions", session_id, "memory"]:
                return self._add_memory(session_id, body)
            case "GET", ["sessions", session_id, "memory"]:
                return self._get_memory(session_id, query)
            case "GET", ["sessions", session_id, "messages"]:
                return self._list_messages(session_id, query)
            case "GET", ["sessions", session_id, "messages", message_uuid]:
                for message in self.messages.get(session_id, []):
                    if message["uuid"] == message_uuid:
                        return Reply.json(message)
                return _error("not found", 404)
        return _error("not found", 404)

    # Handlers (called with the lock held) ------------------------------------------------------------------
    def _add_user(self, body: dict[str, Any]) -> Reply:
        user_id = (body or {}).get("user_id")
        if not user_id:
            return _error("bad request: user_id is required", 400)
        if user_id in self.users:
            return _error(f"bad request: user already exists with user_id: {user_id}", 400)
        self._next_id += 1
        user = {
            "uuid": str(uuid.uuid4()),
            "id": self._next_id,
            "created_at": _now(),
            "updated_at": _now(),
            "deleted_at": None,
            "user_id": user_id,
            "email": body.get("email"),
            "first_name": body.get("first_name"),
            "last_name": body.get("last_name"),
            "project_uuid": "00000000-0000-0000-0000-000000000000",
            "metadata": body.get("metadata"),
        }
        self.users[user_id] = user
        return Reply.json(user, status=201)

    def _delete_user(self, user_id: str) -> Reply:
        if user_id not in self.users:
            return _error("not found", 404)
        del self.users[user_id]
        for session_id in [s for s, v in self.sessions.items() if v["user_id"] == user_id]:
            del self.sessions[session_id]
            self.messages.pop(session_id, None)
        self.facts.pop(user_id, None)
        return Reply.json({"message": "OK"})

    def _add_session(self, body: dict[str, Any]) -> Reply:
        session_id = (body or {}).get("session_id")
        user_id = body.get("user_id") if body else None
        if not session_id:
            return _error("bad request: session_id is required", 400)
        if user_id and user_id not in self.users:
            return _error("user not found", 400)
        if session_id in self.sessions:
            return _error(f"bad request: session {session_id} already exists", 400)
        self._next_id += 1
        session = {
            "uuid": str(uuid.uuid4()),
            "id": self._next_id,
            "created_at": _now(),
            "updated_at": _now(),
            "deleted_at": None,
            "ended_at": None,
            "session_id": session_id,
            "metadata": body.get("metadata"),
            "user_id": user_id,
            "project_uuid": "00000000-0000-0000-0000-000000000000",
        }
        self.sessions[session_id] = session
        return Reply.json(session, status=201)

    def _add_memory(self, session_id: str, body: dict[str, Any]) -> Reply:
        if session_id not in self.sessions:
            return _error("not found", 404)
        incoming = (body or {}).get("messages") or []
        if len(incoming) > MAX_MESSAGES_PER_CALL:
            return _error(f"max messages per memory of {MAX_MESSAGES_PER_CALL} exceeded", 400)
        for message in incoming:
            if len(message.get("content") or "") > self.max_message_chars:
                return _error(f"message content exceeds {self.max_message_chars} characters", 400)
            if not message.get("role_type"):
                return _error("messages are required to have a RoleType", 400)
            if message["role_type"] not in ROLE_TYPES:
                return _error(f"invalid role type {message['role_type']}", 400)
        known = {m["uuid"] for session in self.messages.values() for m in session}
        if self.honour_uuids and any(m.get("uuid") in known for m in incoming):  # one INSERT: all or nothing
            return _error("bad request: message_uuid already exists", 400)
        stored = self.messages.setdefault(session_id, [])
        for message in incoming:
            stored.append(
                {
                    "uuid": (message.get("uuid") if self.honour_uuids else None) or str(uuid.uuid4()),
                    "created_at": _now(),
                    "updated_at": _now(),
                    "role": message.get("role"),
                    "role_type": message["role_type"],
                    "content": message.get("content"),
                    "metadata": message.get("metadata"),
                    "token_count": 0,
                }
            )
        return Reply.json({"message": "OK"}, status=201)

    def _get_memory(self, session_id: str, query: dict[str, list[str]]) -> Reply:
        raw = (query.get("lastn") or ["0"])[0] or "0"
        lastn = int(raw)
        if lastn < 0:
            return _error("lastn cannot be negative", 400)
        stored = self.messages.get(session_id)
        if not stored:
            return _error("not found", 404)
        user_id = self.sessions[session_id]["user_id"]
        return Reply.json({"messages": stored[-(lastn or 6) :], "relevant_facts": self.facts.get(user_id, [])})

    def _list_messages(self, session_id: str, query: dict[str, list[str]]) -> Reply:
        if session_id not in self.sessions:
            return _error("not found", 404)
        limit = int((query.get("limit") or ["100"])[0] or 100)
        page = max(1, int((query.get("cursor") or ["1"])[0] or 1))
        stored = self.messages.get(session_id, [])
        rows = stored[(page - 1) * limit : page * limit]
        return Reply.json({"messages": rows, "total_count": len(stored), "row_count": len(rows)})

    def _search(self, body: dict[str, Any], query: dict[str, list[str]]) -> Reply:
        limit = int((query.get("limit") or ["0"])[0] or 0)
        if limit < 0:
            return _error("limit cannot be negative", 400)
        body = body or {}
        user_id = body.get("user_id")
        session_ids = body.get("session_ids")
        if self.search_returns == "facts":
            results = [{"fact": f} for f in self.facts.get(user_id or "", [])]
            return Reply.json({"results": results[: limit or None]})
        wanted = _words(body.get("text") or "")
        scored: list[tuple[float, str, dict[str, Any]]] = []
        for session_id, session in self.sessions.items():
            if user_id and session["user_id"] != user_id:
                continue
            if session_ids and session_id not in session_ids:
                continue
            for message in self.messages.get(session_id, []):
                words = _words(message.get("content") or "")
                if wanted and words:
                    score = len(wanted & words) / len(wanted)
                    if score > 0:
                        scored.append((score, session_id, message))
        scored.sort(key=lambda item: -item[0])
        results = [{"message": m, "score": round(s, 4), "session_id": sid} for s, sid, m in scored]
        return Reply.json({"results": results[: limit or None]})


__all__ = ["FakeZep"]
