"""Turning Zep search results and session memory into ``RecalledExchange`` records, scoped to one user.

Zep answers a session search with messages (Zep Cloud, ``search_scope="messages"``: a message, its session and a
score) or with facts (the Community Edition always returns facts). Messages we mirrored carry our ids in their
metadata (``memory/outbox.py`` writes them), so a hit can be traced to its exchange and its owner: a hit owned by
another user, or from another session when one was asked for, is dropped whatever the server sent. The question
and the answer of one exchange are two messages; both hits merge into one record.

Facts have no session and no score in the CE server: they are kept only because the search was already scoped
to the user by Zep, and their relevance is the share of the query's words they contain.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from researchcrew.memory.records import RecalledExchange

MESSAGE_ID_KEY = "researchcrew_message_id"  # our message id in each Zep message's metadata
USER_ID_KEY = "researchcrew_user_id"
RESPONSE_ID_KEY = "researchcrew_response_id"
SESSION_ID_KEY = "researchcrew_session_id"
_WORD = re.compile(r"\w+")


def word_overlap(query: str, text: str) -> float:
    """Share of the query's distinct words found in ``text``: a plain relevance for results Zep did not score."""
    wanted = {w.casefold() for w in _WORD.findall(query)}
    if not wanted:
        return 0.0
    found = {w.casefold() for w in _WORD.findall(text)}
    return len(wanted & found) / len(wanted)


def _date(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def message_hits(
    results: Iterable[Any], *, user_id: str, zep_session: str | None, owned_sessions: set[str] | None
) -> list[RecalledExchange]:
    """Message results (``SessionSearchResult`` with ``message``) → one record per exchange, scoped to the user
    (and to the Zep session ``zep_session`` when given). Records carry our session id (from the metadata).

    ``owned_sessions``: which Zep sessions are the user's, needed only for messages without our metadata (not
    written by researchcrew); when None such messages are dropped."""
    merged: dict[str, RecalledExchange] = {}
    for result in results:
        message = getattr(result, "message", None)
        found_session = getattr(result, "session_id", None)
        if message is None or not found_session or not message.content:
            continue
        if zep_session is not None and found_session != zep_session:
            continue
        metadata: dict[str, Any] = message.metadata or {}
        owner = metadata.get(USER_ID_KEY)
        if owner is not None and owner != user_id:
            continue
        if owner is None and (owned_sessions is None or found_session not in owned_sessions):
            continue
        score = getattr(result, "score", None)
        relevance = min(1.0, max(0.0, float(score))) if score is not None else 0.0
        response_id = str(metadata.get(RESPONSE_ID_KEY) or message.uuid_ or "")
        if not response_id:
            continue
        is_question = message.role_type == "user"
        record = merged.get(response_id) or RecalledExchange(
            response_id=response_id,
            user_id=user_id,
            session_id=str(metadata.get(SESSION_ID_KEY) or found_session),
            relevance=relevance,
            origin="zep",
        )
        update: dict[str, Any] = {"relevance": max(record.relevance, relevance)}
        if is_question:
            update["question"] = message.content
            update["asked_at"] = record.asked_at or _date(metadata.get("asked_at")) or _date(message.created_at)
        else:
            update["answer"] = message.content
            update["question"] = record.question or str(metadata.get("question") or "")
            update["asked_at"] = record.asked_at or _date(metadata.get("asked_at"))
            update["answered_at"] = _date(metadata.get("answered_at")) or _date(message.created_at)
            update["citations"] = [c for c in metadata.get("citations") or [] if isinstance(c, dict)]
            update["sources_used"] = [str(s) for s in metadata.get("sources_used") or []]
        merged[response_id] = record.model_copy(update=update)
    return list(merged.values())


def fact_hits(
    facts: Iterable[Any], *, user_id: str, session_id: str | None, query_text: str, scores: Sequence[float | None] = ()
) -> list[RecalledExchange]:
    """Zep facts → answer-only records (``response_id`` ``zep-fact:<uuid>``)."""
    records: list[RecalledExchange] = []
    score_list = list(scores)
    for index, fact in enumerate(facts):
        text = getattr(fact, "fact", None)
        if not text:
            continue
        score = score_list[index] if index < len(score_list) else None
        relevance = min(1.0, max(0.0, float(score))) if score is not None else word_overlap(query_text, text)
        records.append(
            RecalledExchange(
                response_id=f"zep-fact:{fact.uuid_ or text[:64]}",
                user_id=user_id,
                session_id=session_id or "",
                answer=text,
                relevance=relevance,
                answered_at=_date(getattr(fact, "created_at", None)),
                origin="zep",
            )
        )
    return records


def ranked(records: Iterable[RecalledExchange], *, limit: int, min_relevance: float) -> list[RecalledExchange]:
    """Best first, one record per response id, at least ``min_relevance``, at most ``limit``."""
    best: dict[str, RecalledExchange] = {}
    for record in records:
        if record.relevance < min_relevance:
            continue
        current = best.get(record.response_id)
        if current is None or record.relevance > current.relevance:
            best[record.response_id] = record
    return sorted(best.values(), key=lambda r: -r.relevance)[:limit]


__all__ = [
    "MESSAGE_ID_KEY",
    "RESPONSE_ID_KEY",
    "SESSION_ID_KEY",
    "USER_ID_KEY",
    "fact_hits",
    "message_hits",
    "ranked",
    "word_overlap",
]
