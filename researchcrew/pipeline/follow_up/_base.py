"""The follow-up stage's seams: what a rewrite is, and the two protocols the Flow calls (with their fallbacks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from researchcrew.contracts.follow_up import RewriteMethod
from researchcrew.memory.records import SessionSummary


@dataclass(frozen=True)
class Rewrite:
    """The question to research: the stand-alone form of a follow-up, or the question unchanged (``method`` None)."""

    question: str
    method: RewriteMethod | None = None
    reason: str = ""

    @property
    def rewritten(self) -> bool:
        return self.method is not None


def unchanged(question: str, reason: str) -> Rewrite:
    return Rewrite(question=question, method=None, reason=reason)


class FollowUpRewriter(Protocol):
    """Makes a follow-up stand alone from the session's summary; returns the question unchanged when it already
    stands alone or cannot be resolved. Must not raise for anything the model or the text does."""

    async def __call__(self, question: str, summary: SessionSummary, /) -> Rewrite: ...


class SessionContextLoader(Protocol):
    """The session's rolling summary (None: a new session, or no memory). May raise; the stage degrades."""

    async def __call__(self, user_id: str, session_id: str, /) -> SessionSummary | None: ...


async def no_session_context(user_id: str, session_id: str) -> SessionSummary | None:
    """Without a memory store there is no session to continue: every question is researched as asked."""
    return None
