"""What a question asks about, read from its words alone (no model): shared by the tools and the pipeline, so that
neither has to reach into the other for it."""

from __future__ import annotations

import re

_ABOUT_THE_CONVERSATION = re.compile(
    r"\b(?:"
    r"(?:i|we)\s+(?:\w+\s+)?(?:asked|discussed|talked|mentioned|said)"  # "I asked", "we already discussed"
    r"|(?:did|have|had)\s+(?:i|we)\s+(?:\w+\s+)?(?:ask|discuss|talk|mention|say)"  # "what did I ask", "have we ..."
    r"|you\s+(?:\w+\s+)?(?:said|told|mentioned|answered|suggested|recommended)"  # "what you said earlier"
    r"|last\s+time|(?:our|the|my)\s+(?:last|previous|earlier)\s+(?:conversation|question|answer|chat|session)s?"
    r"|earlier\s+in\s+(?:this|our|the)\s+(?:conversation|chat|session)"
    r")\b",
    re.IGNORECASE,
)


def asks_about_the_conversation(question: str) -> bool:
    """Whether a question is about the conversation itself ("What did I ask about X before?", "as you said last
    time"), which makes conversation memory a first-hand source for it."""
    return _ABOUT_THE_CONVERSATION.search(question) is not None
