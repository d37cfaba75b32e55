"""crewAI's deployed-crew API over one run: GET /inputs, POST /kickoff, GET /status/{kickoff_id} in the shapes of
crewAI's OpenAPI file, through the real app with the service's keys; the completion webhook signed and delivered."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from researchcrew.jobs.contracts import ItemFailure, QuestionResult, RunCounts, RunInfo
from researchcrew.jobs.webhooks import SIGNATURE_HEADER, verify_signature
from researchcrew.service.routes._kickoff import KickoffInputs, kickoff_status
from researchcrew.settings import WebhooksSettings
from tests.loopback.server import LoopbackServer, Reply
from tests.service.jobs_support import QUESTIONS, jobs_service, jobs_settings, poll
from tests.service.support import ServiceHarness
from tests.service.test_api import assert_problem

FINISHED = ("completed", "error")


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[ServiceHarness]:
    async with jobs_service(jobs_settings(tmp_path)) as harness:
        yield harness


@pytest.fixture
async def client(app: ServiceHarness) -> AsyncIterator[httpx.AsyncClient]:
    async with app.client() as http:
        yield http


async def kickoff(client: httpx.AsyncClient, app: ServiceHarness, body: dict[str, Any], user: str = "ada") -> str:
    response = await client.post("/kickoff", headers=app.auth(user), json=body)
    assert response.status_code == 200, response.text
    return str(response.json()["kickoff_id"])


async def test_inputs_name_the_question_then_the_options(client: httpx.AsyncClient, app: ServiceHarness) -> None:
    names = (await client.get("/inputs", headers=app.auth("ada"))).json()["inputs"]
    assert names[0] == "question" and {"exclude_sources", "deadline_s", "response_format"} <= set(names)
    assert_problem(await client.get("/inputs"), 401)


async def test_a_kickoff_runs_to_completed_with_the_answer(client: httpx.AsyncClient, app: ServiceHarness) -> None:
    kickoff_id = await kickoff(client, app, {"inputs": {"question": QUESTIONS[0], "exclude_sources": "web"}})
    status = await poll(client, f"/status/{kickoff_id}", app.auth("ada"), lambda body: body["status"] in FINISHED)
    assert (status["status"], status["state"]) == ("completed", "SUCCESS")
    assert set(status) == {"status", "state", "result", "execution_time"}  # crewAI's completed shape
    [task] = status["result"]["tasks"]
    assert task["task_id"] == "question-0" and task["agent"] == "researchcrew"
    assert status["result"]["output"] == task["output"] and "[1]" in task["output"]  # a cited answer
    assert status["execution_time"] >= 0
    # The kickoff is a run of a one-off job, readable with the native routes too.
    run = (await client.get(f"/v1/runs/{kickoff_id}", headers=app.auth("ada"))).json()
    assert run["status"] == "completed" and run["job_name"].startswith("kickoff-")
    job = (await client.get(f"/v1/jobs/{run['job_id']}", headers=app.auth("ada"))).json()
    assert job["options"]["exclude_sources"] == ["web"]  # crewAI sends strings; a list option is split


def test_string_inputs_become_lists_and_objects() -> None:
    given = KickoffInputs.model_validate(
        {
            "questions": "What is A?\n\nWhat is B?",
            "preferred_sources": '["rag", "arxiv"]',
            "tool_options": '{"web": {"domains": ["arxiv.org"]}}',
            "deadline_s": "12.5",
        }
    )
    assert given.questions == ["What is A?", "What is B?"] and given.preferred_sources == ["rag", "arxiv"]
    assert given.tool_options == {"web": {"domains": ["arxiv.org"]}} and given.deadline_s == 12.5
    with pytest.raises(ValidationError, match="tool_options"):
        KickoffInputs.model_validate({"question": "What?", "tool_options": "{not json"})


async def test_several_questions_are_one_run_and_a_running_kickoff_reports_progress(
    client: httpx.AsyncClient, app: ServiceHarness
) -> None:
    kickoff_id = await kickoff(client, app, {"inputs": {"questions": QUESTIONS}, "meta": {"requestId": "r-1"}})
    first = (await client.get(f"/status/{kickoff_id}", headers=app.auth("ada"))).json()
    assert first["status"] in ("running", "completed")
    if first["status"] == "running":
        assert first["progress"]["total_tasks"] == 2 and first["state"] in ("PENDING", "STARTED")
    status = await poll(client, f"/status/{kickoff_id}", app.auth("ada"), lambda body: body["status"] in FINISHED)
    assert [task["task_id"] for task in status["result"]["tasks"]] == ["question-0", "question-1"]
    assert all(f"## {question}" in status["result"]["output"] for question in QUESTIONS)


@pytest.mark.parametrize(
    "body",
    [
        {"inputs": {}},
        {"inputs": {"question": "What?", "questions": ["Why?"]}},
        {"inputs": {"question": "What?", "colour": "blue"}},
        {"inputs": {"question": "What?"}, "crewWebhookUrl": "not a url"},
        {"question": "What?"},
    ],
)
async def test_a_kickoff_with_wrong_inputs_is_a_422(
    client: httpx.AsyncClient, app: ServiceHarness, body: dict[str, Any]
) -> None:
    assert_problem(await client.post("/kickoff", headers=app.auth("ada"), json=body), 422)
    assert (await client.get("/v1/jobs", headers=app.auth("ada"))).json() == {"jobs": []}


async def test_an_unknown_or_another_users_kickoff_is_404(client: httpx.AsyncClient, app: ServiceHarness) -> None:
    assert_problem(await client.get("/status/no-such-kickoff", headers=app.auth("ada")), 404)
    kickoff_id = await kickoff(client, app, {"inputs": {"question": QUESTIONS[0]}})
    assert_problem(await client.get(f"/status/{kickoff_id}", headers=app.auth("bob")), 404)
    assert_problem(await client.get(f"/status/{kickoff_id}"), 401)


async def test_the_crew_webhook_receives_the_finished_run_signed(tmp_path: Path) -> None:
    # The receiver is on loopback, which the webhook address policy refuses unless the deployment allows it.
    settings = jobs_settings(tmp_path).model_copy(update={"webhooks": WebhooksSettings(allow=["127.0.0.1"])})
    with LoopbackServer(lambda request: Reply.json({"ok": True})) as receiver:
        async with jobs_service(settings) as app, app.client() as client:
            body = {"inputs": {"question": QUESTIONS[0]}, "crewWebhookUrl": f"{receiver.url}/crew"}
            response = await client.post("/kickoff", headers=app.auth("ada"), json={**body, "taskWebhookUrl": None})
            assert response.status_code == 200, response.text
            kickoff_id, secret = response.json()["kickoff_id"], response.json()["webhook_secret"]
            await poll(client, f"/status/{kickoff_id}", app.auth("ada"), lambda status: status["status"] in FINISHED)
            # The delivery runs on this event loop, after the status says finished: wait without blocking the loop
            # (a blocking wait held the delivery back until it timed out, on a loaded machine).
            for _ in range(1200):  # up to 60 s
                if receiver.requests_to("/crew"):
                    break
                await asyncio.sleep(0.05)
    [delivery] = receiver.requests_to("/crew")
    assert verify_signature(secret, delivery.body, delivery.headers[SIGNATURE_HEADER.lower()])
    assert delivery.json()["run"]["id"] == kickoff_id and delivery.json()["run"]["status"] == "completed"


def _run(status: str, **counts: int) -> RunInfo:
    now = datetime.now(UTC)
    return RunInfo(
        id="r1",
        job_id="j1",
        job_name="kickoff-x",
        owner="ada",
        trigger="manual",
        slot_at=None,
        executor="in_process",
        status=status,  # type: ignore[arg-type]
        created_at=now,
        started_at=now - timedelta(seconds=3),
        finished_at=now if status not in ("queued", "running") else None,
        cancel_requested=status == "cancelled",
        counts=RunCounts(total=2, **counts),
        source_failures=[],
        webhook_state="none",
        webhook_error=None,
    )


def _failed(index: int) -> QuestionResult:
    return QuestionResult(
        index=index,
        question=f"Q{index}?",
        carried={},
        status="failed",
        attempts=3,
        confidence_level=None,
        citation_count=0,
        sources_used=[],
        sources_failed=[],
        response=None,
        failure=ItemFailure(kind="sources_failed", message="every source timed out"),
        started_at=None,
        finished_at=None,
    )


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("queued", ("running", "PENDING")),
        ("running", ("running", "STARTED")),
        ("partial", ("completed", "SUCCESS")),
        ("failed", ("error", "FAILURE")),
        ("cancelled", ("error", "FAILURE")),
    ],
)
def test_every_run_status_has_crewais_name(status: str, expected: tuple[str, str]) -> None:
    shown = kickoff_status(_run(status, failed=2), [_failed(0), _failed(1)])
    assert (shown.status, shown.state) == expected
    if shown.status == "error":
        assert shown.error and shown.execution_time == pytest.approx(3, abs=0.5)
        assert "every source timed out" in shown.error or status == "cancelled"
    if shown.status == "running":
        assert shown.progress is not None and shown.progress.total_tasks == 2 and shown.result is None
