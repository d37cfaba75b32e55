"""Learning a user's preferences from what they ask for, a little more with every exchange.

What a request asked for explicitly travels with the exchange in ``MemoryInput.context["request"]``
(``RequestSignals``: response format, preferred sources, excluded sources); the Memory agent stores it with the
exchange, so the user's recent requests can be read back from the history, across sessions.

Two kinds of evidence:
* counters in ``StoredPreferences`` (format_requests, source_requests, source_exclusions, exchanges_seen)
  accumulate over the user's whole life;
* a preference changes only when recent evidence is consistent: a format becomes the default once at least
  ``min_evidence`` of the last ``window`` requests that named a format chose it, and more often than any other;
  a source becomes (or stops being) preferred or excluded by the same rule over the requests that named sources.
  One odd request never flips a preference; requests that say nothing are no evidence either way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from researchcrew.contracts._base import SourceType
from researchcrew.contracts.query import ResponseFormat, UserPreferences
from researchcrew.memory.records import ExchangeRecord, StoredPreferences

REQUEST_CONTEXT_KEY = "request"


class RequestSignals(BaseModel):
    """What one request asked for explicitly (None / empty: it did not say)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    response_format: ResponseFormat | None = Field(default=None, description="Format the user chose, if any.")
    preferred_sources: tuple[SourceType, ...] = Field(default=(), description="Source types to favour.")
    exclude_sources: tuple[SourceType, ...] = Field(default=(), description="Source types to leave out.")

    @classmethod
    def from_context(cls, context: dict[str, Any] | None) -> RequestSignals:
        """Read ``context["request"]``; anything unreadable counts as "said nothing"."""
        raw = (context or {}).get(REQUEST_CONTEXT_KEY)
        if not isinstance(raw, dict):
            return cls()
        try:
            return cls.model_validate(raw)
        except ValidationError:
            return cls()

    def as_context(self) -> dict[str, Any]:
        return {REQUEST_CONTEXT_KEY: self.model_dump(mode="json", exclude_defaults=True)}

    @property
    def empty(self) -> bool:
        return self.response_format is None and not self.preferred_sources and not self.exclude_sources


@dataclass(frozen=True)
class PreferencePolicy:
    window: int = 5  # how many recent requests (that said something) are weighed
    min_evidence: int = 2  # how many of them must agree before a preference changes


def _consistent(choices: Sequence[Sequence[str]], policy: PreferencePolicy) -> list[str] | None:
    """Items named in ≥ min_evidence of the last ``window`` non-empty choices, most frequent first; None when
    there are too few such requests to judge."""
    recent = [c for c in choices if c][-policy.window :]
    if len(recent) < policy.min_evidence:
        return None
    counts = Counter(item for choice in recent for item in dict.fromkeys(choice))
    order = {item: i for i, item in enumerate(dict.fromkeys(i for c in reversed(recent) for i in c))}
    return sorted((i for i, n in counts.items() if n >= policy.min_evidence), key=lambda i: (-counts[i], order[i]))


def learn(
    stored: StoredPreferences,
    current: RequestSignals,
    recent: Sequence[RequestSignals],
    policy: PreferencePolicy,
    *,
    count: bool = True,
) -> StoredPreferences:
    """The preferences after seeing ``current``. ``recent``: the user's latest requests, oldest first, ending
    with ``current``. ``count=False`` when this exchange was already counted (a retry)."""
    formats = dict(stored.format_requests)
    requested = dict(stored.source_requests)
    excluded = dict(stored.source_exclusions)
    seen = stored.exchanges_seen
    if count:
        seen += 1
        if current.response_format is not None:
            formats[current.response_format] = formats.get(current.response_format, 0) + 1
        for source in dict.fromkeys(current.preferred_sources):
            requested[source] = requested.get(source, 0) + 1
        for source in dict.fromkeys(current.exclude_sources):
            excluded[source] = excluded.get(source, 0) + 1

    prefs: UserPreferences = stored.preferences
    update: dict[str, Any] = {}
    window_formats = [r.response_format for r in recent if r.response_format][-policy.window :]
    tally = Counter(window_formats).most_common()
    if tally and tally[0][1] >= policy.min_evidence and (len(tally) == 1 or tally[0][1] > tally[1][1]):
        update["response_format"] = tally[0][0]
    preferred = _consistent([r.preferred_sources for r in recent], policy)
    exclude = _consistent([r.exclude_sources for r in recent], policy)
    if preferred is not None or exclude is not None:
        preferred = list(prefs.preferred_sources) if preferred is None else preferred
        exclude = list(prefs.excluded_sources) if exclude is None else exclude
        for source in set(preferred) & set(exclude):  # asked for and excluded: the latest request decides
            (preferred if source in current.exclude_sources else exclude).remove(source)
        update["preferred_sources"], update["excluded_sources"] = preferred, exclude
    new_prefs = prefs.model_copy(update=update) if update else prefs
    return stored.model_copy(
        update={
            "preferences": UserPreferences.model_validate(new_prefs.model_dump()),
            "format_requests": formats,
            "source_requests": requested,
            "source_exclusions": excluded,
            "exchanges_seen": seen,
        }
    )


class PreferenceStore(Protocol):
    async def history(self, *, user_id: str, session_id: str | None, limit: int = 20) -> list[ExchangeRecord]: ...

    async def update_preferences(
        self, *, user_id: str, update: Callable[[StoredPreferences], StoredPreferences]
    ) -> tuple[StoredPreferences, bool]: ...


class PreferenceLearner:
    """Reads the user's recent requests from the history and updates the stored preferences atomically."""

    def __init__(self, store: PreferenceStore, policy: PreferencePolicy | None = None) -> None:
        self.store = store
        self.policy = policy or PreferencePolicy()

    async def observe(self, *, user_id: str, response_id: str, signals: RequestSignals, count: bool = True) -> bool:
        """Account for one exchange; True when the user's preferences (not just the counters) changed."""
        history = await self.store.history(user_id=user_id, session_id=None, limit=self.policy.window * 4)
        recent = [RequestSignals.from_context(e.context) for e in history if e.response_id != response_id]
        recent.append(signals)
        before: list[UserPreferences] = []

        def update(stored: StoredPreferences) -> StoredPreferences:
            before.append(stored.preferences)
            return learn(stored, signals, recent, self.policy, count=count)

        stored, _ = await self.store.update_preferences(user_id=user_id, update=update)
        return bool(before) and stored.preferences != before[-1]


__all__ = ["REQUEST_CONTEXT_KEY", "PreferenceLearner", "PreferencePolicy", "RequestSignals", "learn"]
