"""Deep research over HTTP, through the real app (httpx against its ASGI interface, lifespan running) over the
in-process corpus the deep-run tests use: a session message with ``mode: "deep"`` pauses at the plan, an edited plan
resumes the run in the service to a report whose every claim cites evidence; clarifying questions answered by the
session's next message or by the clarification resource; the server-sent events in order; and every misuse a
problem+json with its own status (404 for another user's run exactly as for an unknown id)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from researchcrew.contracts import FinalResponse
from researchcrew.contracts.deep import DeepRun, PlanDecision
from researchcrew.settings import DeepResearchSettings, ServiceSettings, Settings
from tests.deep.corpus import PASSAGES, CorpusTool
from tests.e2e.support import assert_every_claim_cited
from tests.service.support import ServiceHarness, running_service

QUESTION = "What is known about pooled testing?"
VAGUE = "What is known about the screening method?"  # the corpus answers only queries naming "pooled"
SSE = {"Accept": "text/event-stream"}


def deep_settings(tmp_path: Path, **deep: Any) -> Settings:
    # The six-passage corpus answers nearly every query with the same passages: checked against it, a plan keeps one
    # sub-question (tests/deep/test_plan_checks.py); these tests edit and cut a plan of several, judged in the probe.
    deep.setdefault("plan_checks", 0)
    return Settings(data_dir=tmp_path, service=ServiceSettings(), deep=DeepResearchSettings(**deep))


class Client:
    """ada's (or bob's) view of the service."""

    def __init__(self, http: httpx.AsyncClient, harness: ServiceHarness, user: str) -> None:
        self.http = http
        self.headers = harness.auth(user)

    async def session(self) -> str:
        response = await self.http.post("/v1/sessions", json={}, headers=self.headers)
        return str(response.json()["session_id"])

    async def post(self, path: str, body: dict[str, Any] | None = None, **headers: str) -> httpx.Response:
        return await self.http.post(path, json=body, headers={**self.headers, **headers})

    async def ask(self, session_id: str, body: dict[str, Any], **headers: str) -> httpx.Response:
        return await self.post(f"/v1/sessions/{session_id}/messages", body, **headers)

    async def run(self, run_id: str) -> httpx.Response:
        return await self.http.get(f"/v1/deep-runs/{run_id}", headers=self.headers)

    async def until(self, run_id: str, *statuses: str, awaiting: str | None = None) -> DeepRun:
        """The run once its status is one of ``statuses`` (and, when given, it waits for ``awaiting``)."""
        for _ in range(600):
            run = DeepRun.model_validate((await self.run(run_id)).json())
            if run.status in statuses and (awaiting is None or run.awaiting == awaiting):
                return run
            await asyncio.sleep(0.05)
        raise AssertionError(f"run {run_id} never reached {statuses}: {run.status}")


@asynccontextmanager
async def ada_over(settings: Settings, tool: CorpusTool) -> AsyncIterator[Client]:
    """ada's client of a service of its own (other settings or sources than the fixtures')."""
    async with running_service(settings, tools=[tool], remember=False) as running, running.client() as http:
        yield Client(http, running, "ada")


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[ServiceHarness]:
    async with running_service(deep_settings(tmp_path), tools=[CorpusTool()], remember=False) as running:
        yield running


@pytest.fixture
async def http(harness: ServiceHarness) -> AsyncIterator[httpx.AsyncClient]:
    async with harness.client() as client:
        yield client


@pytest.fixture
def ada(http: httpx.AsyncClient, harness: ServiceHarness) -> Client:
    return Client(http, harness, "ada")


@pytest.fixture
def bob(http: httpx.AsyncClient, harness: ServiceHarness) -> Client:
    return Client(http, harness, "bob")


def events(body: str) -> list[tuple[str, int | None, dict[str, Any]]]:
    """(event, id, data) of each server-sent event of a stream."""
    parsed = []
    for block in body.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if "event" in fields:
            number = int(fields["id"]) if "id" in fields else None
            parsed.append((fields["event"], number, json.loads(fields["data"])))
    return parsed


def assert_problem(response: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status and body["type"].endswith(kind), body
    return body


async def test_a_deep_message_pauses_at_its_plan_and_the_edited_plan_runs_to_a_cited_report(
    ada: Client, bob: Client
) -> None:
    session = await ada.session()
    started = await ada.ask(session, {"question": QUESTION, "mode": "deep", "deep": {"max_subquestions": 4}})
    assert started.status_code == 202, started.text
    run = DeepRun.model_validate(started.json())
    assert (run.status, run.awaiting, run.session_id, run.user_id) == (
        "awaiting_human_feedback",
        "plan_approval",
        session,
        "ada",
    )
    assert run.plan is not None and 2 <= len(run.plan.items) <= 4 and run.report is None
    assert DeepRun.model_validate((await ada.run(run.run_id)).json()) == run

    first, last = run.plan.items[0], run.plan.items[-1]
    decision = {"items": [{"id": last.id}, {"id": first.id, "question": "How does pooled testing save reagents?"}]}
    resumed = await ada.post(f"/v1/deep-runs/{run.run_id}/plan", decision)
    assert resumed.status_code == 202, resumed.text
    assert resumed.json()["status"] in ("running", "completed")

    done = await ada.until(run.run_id, "completed", "failed")
    assert done.status == "completed" and done.report is not None, done.error
    report = done.report
    assert [item.question for item in report.plan.items] == [last.question, "How does pooled testing save reagents?"]
    assert [sub.item.id for sub in report.sub_questions] == [last.id, first.id]
    response = FinalResponse.model_validate(report.response.model_dump())
    assert response.citations and {citation.source_id for citation in response.citations} <= set(PASSAGES)
    assert_every_claim_cited(response)
    assert report.quality and 0 < report.quality[-1].overall <= 1

    unknown = assert_problem(await bob.run("no-such-run"), 404, "deep-run-not-found")
    others = assert_problem(await bob.run(run.run_id), 404, "deep-run-not-found")
    assert others["detail"] == unknown["detail"].replace("no-such-run", run.run_id)
    assert_problem(await bob.post(f"/v1/deep-runs/{run.run_id}/cancel"), 404, "deep-run-not-found")


async def test_the_sessions_next_message_answers_the_clarifying_questions(tmp_path: Path) -> None:
    async with ada_over(deep_settings(tmp_path), CorpusTool(only_if="pooled")) as ada:
        session = await ada.session()
        started = await ada.ask(session, {"question": VAGUE, "mode": "deep"})
        run = DeepRun.model_validate(started.json())
        assert (started.status_code, run.status, run.awaiting) == (
            202,
            "awaiting_human_feedback",
            "clarification",
        )
        assert run.clarification is not None and run.clarification.questions and run.plan is None

        # A new question of its own is not an answer: it gets a quick answer, and the run still waits.
        unrelated = await ada.ask(session, {"question": "How do flaky tests affect continuous integration?"})
        assert unrelated.status_code == 200 and "answer_kind" in unrelated.json()
        assert (await ada.run(run.run_id)).json()["awaiting"] == "clarification"

        answered = await ada.ask(session, {"question": "pooled testing of samples"})  # an ordinary message
        assert answered.status_code == 202 and answered.json()["run_id"] == run.run_id, answered.text
        paused = await ada.until(run.run_id, "awaiting_human_feedback", "failed", awaiting="plan_approval")
        assert paused.plan is not None and paused.plan.question.endswith("(pooled testing of samples)")

        # The run waits for a plan decision now: an answer is refused, and the next message is a quick one.
        late = await ada.post(f"/v1/deep-runs/{run.run_id}/clarification", {"answer": "anything"})
        assert "waits for a decision on its plan" in assert_problem(late, 409, "deep-run-conflict")["detail"]
        quick = await ada.ask(session, {"question": "What is pooled testing?"})
        assert quick.status_code == 200 and "answer_kind" in quick.json()

        # The clarification resource, with "just answer": the question stays as asked.
        other = DeepRun.model_validate((await ada.ask(session, {"question": VAGUE, "mode": "deep"})).json())
        reply = await ada.post(f"/v1/deep-runs/{other.run_id}/clarification", {"just_answer": True})
        assert reply.status_code == 202, reply.text
        other = await ada.until(other.run_id, "awaiting_human_feedback", awaiting="plan_approval")
        assert other.plan is not None and other.plan.question == VAGUE


async def test_the_event_stream_shows_phases_then_the_run_then_done(ada: Client) -> None:
    session = await ada.session()
    body = {"question": QUESTION, "mode": "deep", "deep": {"max_subquestions": 2}}
    started = await ada.ask(session, body, **SSE)
    assert started.status_code == 200 and started.headers["content-type"].startswith("text/event-stream")
    first = events(started.text)
    names = [name for name, _, _ in first]
    assert names[-2:] == ["run", "done"] and set(names[:-2]) == {"phase"}
    phases = [(data["phase"], data["status"]) for _, _, data in first[:-2]]
    assert phases[0] == ("clarify", "started") and phases[-1] == ("plan", "paused")
    numbers = [number for _, number, _ in first[:-1]]
    assert numbers == list(range(1, len(numbers) + 1))
    run = DeepRun.model_validate(first[-2][2])
    assert run.status == "awaiting_human_feedback" and run.awaiting == "plan_approval"

    resumed = await ada.post(f"/v1/deep-runs/{run.run_id}/plan", {"action": "approve"}, **SSE)
    rest = events(resumed.text)
    names = [name for name, _, _ in rest]
    assert names[-2:] == ["run", "done"] and {"phase", "stage"} <= set(names) <= {
        "phase",
        "stage",
        "source",
        "text",
        "run",
        "done",
    }
    research = [data for name, _, data in rest if name in ("stage", "source")]
    assert {data["sub_question"] for data in research} == {1, 2}
    order = [(data["phase"], data["status"]) for name, _, data in rest if name == "phase"]
    assert order[0] == ("plan", "finished") and order[-1] == ("respond", "finished")
    assert order.index(("research", "started")) < order.index(("report", "started"))
    finished = DeepRun.model_validate(rest[-2][2])
    assert finished.status == "completed" and finished.report is not None
    assert_every_claim_cited(finished.report.response)


async def test_misuse_is_a_clear_problem(ada: Client) -> None:
    session = await ada.session()
    assert_problem(await ada.ask(session, {"question": QUESTION, "mode": "thorough"}), 422, "invalid-request")
    assert_problem(await ada.ask(session, {"question": QUESTION, "mode": "deep", "deep": {"depth": 3}}), 422, "request")
    assert_problem(await ada.ask("nobodys-session", {"question": QUESTION, "mode": "deep"}), 404, "session-not-found")

    body = {"question": QUESTION, "mode": "deep", "deep": {"max_subquestions": 3}}
    run = DeepRun.model_validate((await ada.ask(session, body)).json())
    plan = f"/v1/deep-runs/{run.run_id}/plan"
    for bad, says in [
        ({"items": []}, "leaves no sub-question"),
        ({"items": [{"id": 1, "question": " "}]}, "empties it"),
        ({"items": [{"question": f"Extra question {n}?"} for n in range(4)]}, "at most 3"),
    ]:
        assert says in assert_problem(await ada.post(plan, bad), 422, "invalid-plan-decision")["detail"]
    assert_problem(await ada.post(plan, {"items": [{"id": 1}] * 41}), 422, "invalid-request")
    assert_problem(await ada.post(f"/v1/deep-runs/{run.run_id}/clarification", {"answer": "x"}), 409, "conflict")
    assert not DeepRun.model_validate((await ada.run(run.run_id)).json()).feedback_received  # nothing stored

    cancelled = await ada.post(f"/v1/deep-runs/{run.run_id}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert "is cancelled" in assert_problem(await ada.post(plan, {}), 409, "deep-run-conflict")["detail"]
    assert_problem(await ada.post(f"/v1/deep-runs/{run.run_id}/cancel"), 409, "deep-run-conflict")

    approved = await ada.ask(session, {**body, "deep": {"auto_approve": True, "max_subquestions": 2}})
    assert approved.status_code == 202 and approved.json()["status"] in ("running", "completed")
    done = await ada.until(approved.json()["run_id"], "completed", "failed")
    assert done.status == "completed"
    assert_problem(await ada.post(f"/v1/deep-runs/{done.run_id}/plan", {}), 409, "deep-run-conflict")


async def test_an_expired_pause_is_gone(tmp_path: Path) -> None:
    async with ada_over(deep_settings(tmp_path, pause_ttl_s=0.2), CorpusTool()) as ada:
        session = await ada.session()
        run = DeepRun.model_validate((await ada.ask(session, {"question": QUESTION, "mode": "deep"})).json())
        await asyncio.sleep(0.3)
        assert (await ada.run(run.run_id)).json()["status"] == "expired"
        gone = await ada.post(f"/v1/deep-runs/{run.run_id}/plan", {"action": "approve"})
        assert "expired: start a new run" in assert_problem(gone, 410, "deep-run-expired")["detail"]
        assert_problem(await ada.post(f"/v1/deep-runs/{run.run_id}/cancel"), 410, "deep-run-expired")


async def test_the_schema_documents_deep_runs(http: httpx.AsyncClient) -> None:
    schema = (await http.get("/openapi.json")).json()
    ask = schema["paths"]["/v1/sessions/{session_id}/messages"]["post"]
    assert ask["responses"]["202"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/DeepRun"}
    assert "`phase`" in ask["responses"]["200"]["description"] and "`run`" in ask["responses"]["200"]["description"]
    mode = schema["components"]["schemas"]["SessionMessage"]["properties"]["mode"]
    assert mode["enum"] == ["quick", "deep"] and mode["default"] == "quick"
    for path, method in [("", "get"), ("/clarification", "post"), ("/plan", "post"), ("/cancel", "post")]:
        operation = schema["paths"][f"/v1/deep-runs/{{run_id}}{path}"][method]
        assert {"404", "422"} <= set(operation["responses"]), path
    assert {"409", "410"} <= set(schema["paths"]["/v1/deep-runs/{run_id}/plan"]["post"]["responses"])


async def test_a_working_run_holds_one_of_the_users_question_slots(tmp_path: Path) -> None:
    settings = deep_settings(tmp_path)
    settings.service.max_concurrent_questions = 1
    async with ada_over(settings, CorpusTool(delay_s=0.2)) as ada:
        session = await ada.session()
        body = {"question": QUESTION, "mode": "deep", "deep": {"auto_approve": True, "max_subquestions": 3}}
        started = await ada.ask(session, body)
        assert started.status_code == 202 and started.json()["status"] == "running", started.text
        busy = await ada.ask(session, {"question": "What is pooled testing?"})
        assert_problem(busy, 429, "too-many-questions")
        assert busy.headers["Retry-After"] == "1"
        assert (await ada.until(started.json()["run_id"], "completed", "failed")).status == "completed"
        for _ in range(40):  # the slot is given back just after the run is stored as completed
            after = await ada.ask(session, {"question": "What is pooled testing?"})
            if after.status_code != 429:
                break
            await asyncio.sleep(0.05)
        assert after.status_code == 200, after.text


async def test_a_run_whose_decision_was_stored_but_not_resumed_is_resumed_by_its_owner(
    harness: ServiceHarness, ada: Client, bob: Client
) -> None:
    """As after a restart: the decision reached the store, the process resuming the run did not go on."""
    session = await ada.session()
    started = await ada.ask(session, {"question": QUESTION, "mode": "deep", "deep": {"max_subquestions": 2}})
    run = DeepRun.model_validate(started.json())
    waiting = await ada.post(f"/v1/deep-runs/{run.run_id}/resume")
    assert "still waits for a decision on its plan" in assert_problem(waiting, 409, "deep-run-conflict")["detail"]

    deep = await harness.runtime.deep_research()
    await deep.decide_plan(run.run_id, user_id="ada", decision=PlanDecision())  # stored, not resumed
    assert_problem(await bob.post(f"/v1/deep-runs/{run.run_id}/resume"), 404, "deep-run-not-found")
    resumed = await ada.post(f"/v1/deep-runs/{run.run_id}/resume")
    assert resumed.status_code == 202, resumed.text
    done = await ada.until(run.run_id, "completed", "failed")
    assert done.status == "completed" and done.report is not None, done.error
    assert_every_claim_cited(FinalResponse.model_validate(done.report.response.model_dump()))

    finished = await ada.post(f"/v1/deep-runs/{run.run_id}/resume")
    assert "completed" in assert_problem(finished, 409, "deep-run-conflict")["detail"]


async def test_a_finished_report_downloads_in_every_format(ada: Client, bob: Client) -> None:
    from tests.deep.export_support import docx_text, markers, pdf_text

    session = await ada.session()
    options = {"auto_approve": True, "max_subquestions": 3, "length": "brief", "type": "literature_review"}
    started = await ada.ask(session, {"question": QUESTION, "mode": "deep", "deep": options})
    assert started.status_code == 202, started.text
    run_id = started.json()["run_id"]
    early = await ada.http.get(f"/v1/deep-runs/{run_id}/report?format=pdf", headers=ada.headers)
    if early.status_code != 200:  # still working: no report yet
        assert_problem(early, 409, "deep-run-conflict")
    done = await ada.until(run_id, "completed", "failed")
    assert done.report is not None and (done.report.length, done.report.report_type) == ("brief", "literature_review")
    assert done.report.themes and len(done.report.plan.items) <= 3
    numbers = sorted(citation.number for citation in done.report.response.citations)

    kinds = {
        "md": "text/markdown; charset=utf-8",
        "html": "text/html; charset=utf-8",
        "pdf": "application/pdf",
        "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    }
    texts = {}
    for fmt, media_type in kinds.items():
        response = await ada.http.get(f"/v1/deep-runs/{run_id}/report", params={"format": fmt}, headers=ada.headers)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == media_type
        disposition = response.headers["content-disposition"]
        assert disposition.startswith('attachment; filename="report-what-is-known-about-pooled-testing-')
        assert disposition.endswith(f'.{fmt}"') and "\n" not in disposition
        texts[fmt] = {"pdf": pdf_text, "docx": docx_text}.get(fmt, lambda c: c.decode("utf-8"))(response.content)
    for fmt, text in texts.items():
        assert sorted(set(markers(text))) == numbers, fmt
        assert "Sources on this theme:" in text, fmt
    default = await ada.http.get(f"/v1/deep-runs/{run_id}/report", headers=ada.headers)
    assert default.headers["content-type"].startswith("text/markdown")

    assert_problem(await bob.http.get(f"/v1/deep-runs/{run_id}/report", headers=bob.headers), 404, "deep-run-not-found")
    bad = await ada.http.get(f"/v1/deep-runs/{run_id}/report?format=odt", headers=ada.headers)
    assert bad.status_code == 422 and bad.headers["content-type"].startswith("application/problem+json")

    deep = {"max_subquestions": 2, "length": "detailed", "report_type": "comparison"}
    paused = await ada.ask(session, {"question": QUESTION, "mode": "deep", "deep": deep})
    waiting = paused.json()["run_id"]
    stored = DeepRun.model_validate((await ada.run(waiting)).json())
    assert stored.options is not None and (stored.options.length, stored.options.report_type) == (
        "detailed",
        "comparison",
    )
    conflict = assert_problem(
        await ada.http.get(f"/v1/deep-runs/{waiting}/report?format=docx", headers=ada.headers), 409, "deep-run-conflict"
    )
    assert "only a completed run has a report" in conflict["detail"]
    wrong = await ada.ask(session, {"question": QUESTION, "mode": "deep", "deep": {"length": "huge"}})
    assert wrong.status_code == 422, wrong.text
