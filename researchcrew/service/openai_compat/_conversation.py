"""How an OpenAI-style conversation (the whole ``messages`` list, sent again on every turn) maps to a researchcrew
session, and which of its messages is the question.

The question is the last message, which must be the user's. Earlier turns are not re-read: the session's memory
already holds the exchanges researchcrew answered in it, and that is what follow-up questions are resolved against
("What are its limitations?" after "What is metamorphic testing?"). So the session must be the same on every turn
of one conversation, and different for different conversations. In order:

1. ``metadata.session_id`` (OpenAI's own request field; the SDK sends it as ``metadata={"session_id": ...}``): an
   explicit session, created on first use. A session made with ``POST /v1/sessions`` can be continued this way.
2. ``X-OpenWebUI-Chat-Id``: the chat id Open WebUI forwards (``ENABLE_FORWARD_USER_INFO_HEADERS=true``), so every
   Open WebUI chat is its own session, whatever its first message.
3. Otherwise a stable id derived from the key's user, the request's ``user`` (a front-end's end user) and the first
   user message: the only things of a conversation that never change while it grows. Any OpenAI client gets
   continuity with no configuration. The price: two conversations that open with exactly the same message (from
   the same end user) continue one session; a client that cares sends 1 or 2.

The session is recorded like one made with ``POST /v1/sessions`` (titled by its first question, by
``ChatSessions.ensure``), so the web page and ``GET /v1/sessions`` list OpenAI conversations too, and ``DELETE``
removes them.

A conversation whose earlier turns were answered elsewhere (another model in the same front-end chat) has nothing
of them in memory; its follow-ups are researched as they stand.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Literal

from researchcrew.service.openai_compat._errors import OpenAIError, unsupported
from researchcrew.service.openai_compat._schema import ChatCompletionRequest, ChatMessage

SessionSource = Literal["metadata", "header", "conversation"]
CHAT_ID_HEADER = "x-openwebui-chat-id"
DERIVED_PREFIX = "chat-"
_EXPLICIT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


def text_of(message: ChatMessage) -> str:
    """The message's text: its string content, or its text parts joined by blank lines."""
    if message.content is None:
        return ""
    if isinstance(message.content, str):
        return message.content
    return "\n\n".join(part.text or "" for part in message.content if part.type == "text")


def question_of(request: ChatCompletionRequest) -> str:
    """The question: the text of the last message, which must be the user's and must say something."""
    last = request.messages[-1]
    index = len(request.messages) - 1
    if last.role != "user":
        raise OpenAIError(
            400,
            f"The last message must be the user's question; it is a {last.role!r} message.",
            param=f"messages.{index}.role",
        )
    if isinstance(last.content, list):
        other = sorted({part.type for part in last.content if part.type != "text"})
        if other:
            raise unsupported(
                f"messages.{index}.content", f"researchcrew reads text only; the question has {', '.join(other)}."
            )
    question = text_of(last)
    if not question.strip():
        raise OpenAIError(400, "The question (the last user message) is empty.", param=f"messages.{index}.content")
    return question


def first_user_text(request: ChatCompletionRequest) -> str:
    return next(text_of(message) for message in request.messages if message.role == "user")


def derived_session_id(user_id: str, end_user: str | None, first_question: str) -> str:
    """A stable session id for a conversation: the same user, end user and first user message, the same id."""
    material = json.dumps([user_id, end_user or "", " ".join(first_question.split())], ensure_ascii=False)
    return DERIVED_PREFIX + hashlib.sha256(material.encode()).hexdigest()[:32]


def session_of(
    request: ChatCompletionRequest, *, user_id: str, chat_id_header: str | None
) -> tuple[str, SessionSource]:
    """The session this conversation continues, and how it was chosen (see the module's docstring)."""
    explicit = (request.metadata or {}).get("session_id")
    if explicit is not None:
        return _explicit(explicit.strip(), "metadata.session_id"), "metadata"
    if chat_id_header and chat_id_header.strip():
        return _explicit(chat_id_header.strip(), "X-OpenWebUI-Chat-Id"), "header"
    end_user = request.user or request.safety_identifier
    return derived_session_id(user_id, end_user, first_user_text(request)), "conversation"


def _explicit(session_id: str, where: str) -> str:
    if not _EXPLICIT_ID.match(session_id):
        raise OpenAIError(
            400,
            f"{where} must be 1-128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit.",
            param="metadata.session_id" if where.startswith("metadata") else None,
        )
    return session_id
