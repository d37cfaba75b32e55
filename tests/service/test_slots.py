"""``question_slot``: the one "take a slot, touch the session, give the slot back on failure" every route that starts
work uses (quick answers, deep-run segments, chat completions), on the real service state (its in-process throttle
and its chat sessions in SQLite)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from researchcrew.service._problems import ApiProblem
from researchcrew.service._slots import question_slot
from researchcrew.service._state import ServiceState
from tests.service.support import running_service, service_settings


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ServiceState]:
    async with running_service(service_settings(tmp_path, max_concurrent_questions=1), remember=False) as running:
        state = running.app.state.service
        assert isinstance(state, ServiceState)
        yield state


async def test_a_block_that_ends_gives_its_slot_back_and_touches_the_session(service: ServiceState) -> None:
    session = await service.sessions.create("ada")
    async with question_slot(service, "ada", lease_s=30, session_id=session.session_id, question="What is X?"):
        assert service.throttle.running("ada") == 1
    assert service.throttle.running("ada") == 0
    touched = await service.sessions.get("ada", session.session_id)
    assert touched is not None and touched.title == "What is X?"  # an untitled session takes its first question


async def test_a_session_that_is_not_the_users_is_404_and_the_slot_is_given_back(service: ServiceState) -> None:
    bobs = await service.sessions.create("bob")
    for session_id in ("no-such-session", bobs.session_id):
        with pytest.raises(ApiProblem) as raised:
            async with question_slot(service, "ada", lease_s=30, session_id=session_id, question="What is X?"):
                raise AssertionError("the block must not run")
        assert (raised.value.status, raised.value.kind) == (404, "session-not-found")
        assert service.throttle.running("ada") == 0


async def test_a_failing_block_gives_the_slot_back_and_a_full_user_is_429(service: ServiceState) -> None:
    with pytest.raises(RuntimeError):
        async with question_slot(service, "ada", lease_s=30):
            raise RuntimeError("the work could not start")
    assert service.throttle.running("ada") == 0

    async with question_slot(service, "ada", lease_s=30) as held:
        with pytest.raises(ApiProblem) as raised:
            async with question_slot(service, "ada", lease_s=30):
                raise AssertionError("the block must not run")
        assert (raised.value.status, raised.value.kind) == (429, "too-many-questions")
        assert raised.value.headers == {"Retry-After": "1"}
        handed = held.hand_over()  # a stream or a task releases it when its work ends
    assert service.throttle.running("ada") == 1
    await handed.release()
    assert service.throttle.running("ada") == 0
