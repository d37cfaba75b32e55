"""The session's rolling summary: what the follow-up stage reads instead of the whole history.

How it is maintained: after every exchange the Memory stage (``remember.writer``, step "session") applies
``summary_after`` to the stored summary in one atomic read-modify-write (``MemoryStore.update_session_summary``).
The summary keeps the last ``RECENT_TURNS`` turns in full — the question as asked, the question as researched,
its subjects and the opening of the answer — and, for the whole session, the list of subjects discussed (the most
recent last, at most ``MAX_TOPICS``; older ones drop off). Every stored string is cut to a fixed length, so the
summary and its prompt text (``render_summary``, at most ``MAX_SUMMARY_CHARS``) stay the same size however long
the session runs. A refused question does not enter it.

A session whose summary is missing (it began before the summary existed, or the exchange before this question is
still being remembered in another process) is summarised from its latest stored exchanges instead
(``summary_from_history``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime

from researchcrew.contracts.synthesizer import NO_ANSWER_KINDS, FinalResponse
from researchcrew.memory.records import ExchangeRecord, SessionSummary, SessionTurn
from researchcrew.pipeline.follow_up._subjects import question_subjects

RECENT_TURNS = 4
MAX_TOPICS = 10
MAX_QUESTION_CHARS = 200
MAX_GIST_CHARS = 200
MAX_TOPIC_CHARS = 80
# 10 topics of 80 characters and 4 turns of 3 × 200 characters with their labels fit, so the cut below is only a
# guard; the prompt never grows with the session.
MAX_SUMMARY_CHARS = 4_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MARKER = re.compile(r"\s*\[\d+(?:\s*[,–-]\s*\d+)*\]")
_EXTRACTIVE_NOTICE = re.compile(r"^_[^_]*_$")


def shorten(text: str, limit: int) -> str:
    """Whitespace collapsed, citation markers removed, cut at a word boundary within ``limit`` characters."""
    text = " ".join(_MARKER.sub("", text).split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] or text[: limit - 1]
    return cut + "…"


def answer_gist(response: FinalResponse) -> str:
    """The opening of an answer: its first statements (or first prose line), without markers; "" when the answer
    found nothing to say."""
    if response.answer_kind in NO_ANSWER_KINDS:
        return ""
    claims = [claim.text for section in response.sections for claim in section.claims[:2]][:2]
    if claims:
        return shorten(" ".join(claims), MAX_GIST_CHARS)
    lines = [line.strip("-*# ").strip() for line in response.answer.splitlines()]
    prose = [line for line in lines if line and not _EXTRACTIVE_NOTICE.match(line)]
    return shorten(prose[0], MAX_GIST_CHARS) if prose else ""


def turn_of(question: str, standalone: str, gist: str, *, answered: bool, asked_at: datetime | None) -> SessionTurn:
    return SessionTurn(
        question=shorten(question, MAX_QUESTION_CHARS),
        standalone=shorten(standalone, MAX_QUESTION_CHARS),
        subjects=[shorten(subject, MAX_TOPIC_CHARS) for subject in question_subjects(standalone)],
        answer_gist=gist,
        answered=answered,
        asked_at=asked_at,
    )


def turn_from_response(response: FinalResponse) -> SessionTurn:
    """The turn a finished answer adds to its session."""
    standalone = response.rewrite.standalone if response.rewrite is not None else response.query.text
    return turn_of(
        response.query.text,
        standalone,
        answer_gist(response),
        answered=response.answer_kind in ("generated", "extractive"),
        asked_at=response.query.asked_at,
    )


def _topics_after(topics: Sequence[str], new: Sequence[str]) -> list[str]:
    """``topics`` with ``new`` moved to the end (case-insensitive), at most ``MAX_TOPICS``, oldest dropped."""
    folded = {subject.casefold() for subject in new}
    kept = [topic for topic in topics if topic.casefold() not in folded]
    return [*kept, *new][-MAX_TOPICS:]


def summary_after(
    previous: SessionSummary | None, turn: SessionTurn, *, user_id: str, session_id: str
) -> SessionSummary:
    """The summary once ``turn`` has happened (see the module docstring for the bounds)."""
    base = previous or SessionSummary(user_id=user_id, session_id=session_id)
    # In the order asked: exchanges are remembered in the background and may be stored out of order.
    recent = sorted([*base.recent, turn], key=lambda t: (t.asked_at is None, t.asked_at or _EPOCH))
    return SessionSummary(
        user_id=user_id,
        session_id=session_id,
        turns=base.turns + 1,
        recent=recent[-RECENT_TURNS:],
        topics=_topics_after(base.topics, turn.subjects),
        updated_at=base.updated_at,
    )


def summary_from_history(records: Sequence[ExchangeRecord], *, user_id: str, session_id: str) -> SessionSummary | None:
    """A summary of a session from its latest exchanges (oldest first), for sessions without a stored one."""
    summary: SessionSummary | None = None
    for record in records[-RECENT_TURNS:]:
        if record.answer_kind == "refusal":
            continue
        standalone = str((record.context or {}).get("standalone_question") or record.question)
        gist = "" if record.answer_kind == "uncertainty" else shorten(record.answer, MAX_GIST_CHARS)
        answered = record.answer_kind in ("generated", "extractive")
        turn = turn_of(record.question, standalone, gist, answered=answered, asked_at=record.asked_at)
        summary = summary_after(summary, turn, user_id=user_id, session_id=session_id)
    return summary


def render_summary(summary: SessionSummary) -> str:
    """The summary as prompt text (bounded): earlier topics, then the recent turns, oldest first."""
    lines: list[str] = []
    recent_subjects = {subject.casefold() for turn in summary.recent for subject in turn.subjects}
    earlier = [topic for topic in summary.topics if topic.casefold() not in recent_subjects]
    if earlier:
        lines.append("Earlier topics: " + "; ".join(earlier))
    for turn in summary.recent:
        lines.append(f"User asked: {turn.question}")
        if turn.standalone != turn.question:
            lines.append(f"  (meaning: {turn.standalone})")
        lines.append(f"Answer: {turn.answer_gist}" if turn.answer_gist else "Answer: (no answer was found)")
    text = "\n".join(lines)
    return text if len(text) <= MAX_SUMMARY_CHARS else "…" + text[-(MAX_SUMMARY_CHARS - 1) :]
