"""Preference learning: counters accumulate; a preference changes only on consistent recent evidence."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from researchcrew.memory.records import StoredPreferences
from researchcrew.memory.store import MemoryStore
from researchcrew.pipeline.remember._preferences import PreferenceLearner, PreferencePolicy, RequestSignals, learn
from tests.memory_logic.conftest import turn
from tests.memory_store.conftest import Database

POLICY = PreferencePolicy(window=5, min_evidence=2)


def _replay(requests: list[RequestSignals]) -> list[StoredPreferences]:
    """Feed requests one by one, as the agent would; returns the stored state after each."""
    stored, states = StoredPreferences(), []
    for i, current in enumerate(requests):
        stored = learn(stored, current, requests[: i + 1], POLICY)
        states.append(stored)
    return states


def test_one_request_never_flips_a_preference_two_consistent_ones_do() -> None:
    concise = RequestSignals(response_format="concise")
    states = _replay([concise, RequestSignals(), concise])
    assert [s.preferences.response_format for s in states] == ["detailed", "detailed", "concise"]
    assert states[-1].format_requests == {"concise": 2} and states[-1].exchanges_seen == 3


def test_a_format_needs_to_lead_the_recent_window_to_win() -> None:
    c, t = RequestSignals(response_format="concise"), RequestSignals(response_format="technical")
    states = _replay([c, c, t, t, t])
    assert [s.preferences.response_format for s in states] == [
        "detailed",
        "concise",
        "concise",
        "concise",
        "technical",  # 2–2 is a tie: no change until technical leads
    ]
    assert states[-1].format_requests == {"concise": 2, "technical": 3}


def test_sources_asked_for_repeatedly_become_preferred_and_lapse_when_no_longer_asked_for() -> None:
    arxiv = RequestSignals(preferred_sources=("arxiv",))
    arxiv_rag = RequestSignals(preferred_sources=("rag", "arxiv"))
    web = RequestSignals(preferred_sources=("web",))
    states = _replay([arxiv, RequestSignals(), arxiv_rag, arxiv_rag, web, web, web, web])
    preferred = [s.preferences.preferred_sources for s in states]
    assert preferred[0] == [] and preferred[1] == []
    assert preferred[2] == ["arxiv"]  # asked twice
    assert preferred[3] == ["arxiv", "rag"]  # arxiv three times, rag twice: most asked first
    assert preferred[5] == ["arxiv", "web", "rag"]  # web and rag twice each: the more recent one first
    assert preferred[7] == ["web"]  # the last five requests that named sources no longer agree on arxiv or rag
    assert states[-1].source_requests == {"arxiv": 3, "rag": 2, "web": 4}


def test_exclusions_and_a_change_of_mind() -> None:
    no_web = RequestSignals(exclude_sources=("web",))
    web = RequestSignals(preferred_sources=("web",))
    states = _replay([no_web, no_web, web, web, web])
    assert states[1].preferences.excluded_sources == ["web"]
    final = states[-1].preferences
    assert final.preferred_sources == ["web"] and final.excluded_sources == []  # the latest request decides
    assert states[-1].source_exclusions == {"web": 2}


def test_a_retried_exchange_is_not_counted_twice() -> None:
    concise = RequestSignals(response_format="concise")
    once = learn(StoredPreferences(), concise, [concise], POLICY)
    again = learn(once, concise, [concise], POLICY, count=False)
    assert again.format_requests == {"concise": 1} and again.exchanges_seen == 1


@pytest.mark.parametrize(
    "context",
    [
        None,
        {},
        {"request": "concise"},
        {"request": {"response_format": "shouty"}},
        {"request": {"preferred_sources": ["Not A Source!"]}},
    ],
)
def test_unreadable_signals_say_nothing(context: dict[str, object] | None) -> None:
    assert RequestSignals.from_context(context).empty


def test_signals_round_trip_through_the_exchange_context() -> None:
    signals = RequestSignals(response_format="technical", preferred_sources=("arxiv",), exclude_sources=("web",))
    assert RequestSignals.from_context(signals.as_context()) == signals


@pytest.fixture
async def store(database: Database) -> AsyncIterator[MemoryStore]:
    memory = await MemoryStore.open(database.url, embedder=None)
    try:
        yield memory
    finally:
        await memory.close()


async def _exchange(
    store: MemoryStore, learner: PreferenceLearner, user: str, i: int, signals: RequestSignals, session: str = "s1"
) -> bool:
    query, response = turn(user, session, f"question {i}", f"answer {i}", minutes=i)
    record = await store.add_exchange(
        user_id=user, session_id=session, query=query, response=response, context=signals.as_context()
    )
    return await learner.observe(user_id=user, response_id=response.response_id, signals=signals, count=record.created)


async def test_preferences_accumulate_over_turns_and_sessions_in_the_store(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # add_exchange embeds for recall; that is the store's business (tested there), not this test's.
    async def no_embedding(question: str, answer: str) -> tuple[None, None]:
        return None, None

    monkeypatch.setattr(store, "_embed_exchange", no_embedding)
    learner = PreferenceLearner(store, POLICY)
    concise_arxiv = RequestSignals(response_format="concise", preferred_sources=("arxiv",))

    changes = [
        await _exchange(store, learner, "ada", 0, concise_arxiv, session="s1"),
        await _exchange(store, learner, "ada", 1, RequestSignals(), session="s2"),
        await _exchange(store, learner, "ada", 2, concise_arxiv, session="s3"),  # a new session still counts
        await _exchange(store, learner, "ada", 3, concise_arxiv, session="s3"),
        await _exchange(store, learner, "bob", 4, RequestSignals(response_format="technical")),
    ]

    assert changes == [False, False, True, False, False]
    ada = await store.get_preferences(user_id="ada")
    assert ada.preferences.response_format == "concise" and ada.preferences.preferred_sources == ["arxiv"]
    assert ada.format_requests == {"concise": 3} and ada.source_requests == {"arxiv": 3}
    assert ada.exchanges_seen == 4
    bob = await store.get_preferences(user_id="bob")
    assert bob.preferences.response_format == "detailed" and bob.format_requests == {"technical": 1}
