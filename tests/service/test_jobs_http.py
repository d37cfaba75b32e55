"""Batch jobs over HTTP through the real app: create (JSON, CSV uploads), read, delete, runs started and polled to
the end, results in every format, cancel, and every failure as problem+json — another user's job or run answers
404 like one that does not exist."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from researchcrew.contracts.chunks import ContextChunk
from researchcrew.testing import FakeTool
from tests.service.jobs_support import QUESTIONS, evidence_tool, finished_run, jobs_service, jobs_settings
from tests.service.support import ServiceHarness
from tests.service.test_api import assert_problem

CSV = "question,topic,owner\n" + "".join(f'"{question}",testing,team-{n}\n' for n, question in enumerate(QUESTIONS))


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[ServiceHarness]:
    async with jobs_service(jobs_settings(tmp_path)) as harness:
        yield harness


@pytest.fixture
async def client(app: ServiceHarness) -> AsyncIterator[httpx.AsyncClient]:
    async with app.client() as http:
        yield http


async def create(client: httpx.AsyncClient, app: ServiceHarness, user: str = "ada", **body: Any) -> dict[str, Any]:
    response = await client.post("/v1/jobs", headers=app.auth(user), json={"questions": QUESTIONS, **body})
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_a_job_from_json_is_listed_read_by_name_or_id_and_deleted(
    client: httpx.AsyncClient, app: ServiceHarness
) -> None:
    created = await create(client, app, name="weekly", schedule="0 6 * * MON", timezone="Europe/Berlin")
    job = created["job"]
    assert created["webhook_secret"] is None
    assert (job["name"], job["question_count"], job["owner"]) == ("weekly", 2, "ada")
    assert job["schedule"] == {"cron": "0 6 * * MON", "timezone": "Europe/Berlin"} and job["next_run_at"]
    ada = app.auth("ada")
    assert [j["id"] for j in (await client.get("/v1/jobs", headers=ada)).json()["jobs"]] == [job["id"]]
    assert (await client.get("/v1/jobs/weekly", headers=ada)).json() == job
    assert (await client.get(f"/v1/jobs/{job['id']}", headers=ada)).json() == job
    assert_problem(await client.post("/v1/jobs", headers=ada, json={"name": "weekly", "questions": ["Why?"]}), 409)
    deleted = await client.delete("/v1/jobs/weekly", headers=ada)
    assert deleted.status_code == 204
    assert_problem(await client.get("/v1/jobs/weekly", headers=ada), 404)
    assert (await client.get("/v1/jobs", headers=ada)).json() == {"jobs": []}


async def test_another_users_job_and_runs_answer_404_like_unknown_ones(
    client: httpx.AsyncClient, app: ServiceHarness
) -> None:
    job = (await create(client, app, name="private"))["job"]
    started = await client.post("/v1/jobs/private/runs", headers=app.auth("ada"))
    run_id = started.json()["id"]
    bob = app.auth("bob")
    assert (await client.get("/v1/jobs", headers=bob)).json() == {"jobs": []}
    for method, path in [
        ("GET", "/v1/jobs/private"),
        ("GET", f"/v1/jobs/{job['id']}"),
        ("DELETE", f"/v1/jobs/{job['id']}"),
        ("POST", f"/v1/jobs/{job['id']}/runs"),
        ("GET", f"/v1/jobs/{job['id']}/runs"),
        ("GET", f"/v1/runs/{run_id}"),
        ("POST", f"/v1/runs/{run_id}/cancel"),
        ("GET", f"/v1/runs/{run_id}/results"),
        ("GET", "/v1/runs/no-such-run/results?format=csv"),
    ]:
        mine = assert_problem(await client.request(method, path, headers=bob), 404)
        assert "private" not in mine["detail"] or path.endswith("/private")  # nothing of ada's job leaks
    assert_problem(await client.get("/v1/jobs"), 401)
    await finished_run(client, run_id, app.auth("ada"))  # the job still runs for its owner


@pytest.mark.parametrize("how", ["raw", "multipart"])
async def test_a_job_from_an_uploaded_csv_carries_its_other_columns(
    client: httpx.AsyncClient, app: ServiceHarness, how: str
) -> None:
    query = {"name": "from-csv", "schedule": "*/30 * * * *"}
    if how == "raw":
        response = await client.post(
            "/v1/jobs/upload",
            params={**query, "filename": "team.csv"},
            content=CSV.encode(),
            headers={**app.auth("ada"), "Content-Type": "text/csv"},
        )
    else:
        response = await client.post(
            "/v1/jobs/upload",
            params={"name": "from-csv"},
            data={"schedule": "*/30 * * * *", "options": json.dumps({"exclude_sources": ["web"]})},
            files={"file": ("team.csv", CSV.encode(), "text/csv")},
            headers=app.auth("ada"),
        )
    assert response.status_code == 201, response.text
    job = response.json()["job"]
    assert (job["source"], job["columns"], job["question_count"]) == ("team.csv", ["topic", "owner"], 2)
    assert job["schedule"]["cron"] == "*/30 * * * *"
    if how == "multipart":
        assert job["options"]["exclude_sources"] == ["web"]


@pytest.mark.parametrize(
    ("body", "content_type", "problem"),
    [
        ("title,topic\nWhat?,x\n", "text/csv", "no 'question' column (its columns: 'title', 'topic')"),
        ("question,topic\nWhat is it?,x\nWhy,y,extra\n", "text/csv", "line 3: 3 fields where the header has 2"),
        ('{"question": "What?"}\n{"question": "Why?", "colour": 1}\n', "application/x-ndjson", "line 2: unknown key"),
        ("\n\n", "text/plain", "the file is empty"),
    ],
)
async def test_a_bad_upload_is_a_422_naming_what_is_wrong(
    client: httpx.AsyncClient, app: ServiceHarness, body: str, content_type: str, problem: str
) -> None:
    response = await client.post(
        "/v1/jobs/upload",
        params={"name": "bad"},
        content=body.encode(),
        headers={**app.auth("ada"), "Content-Type": content_type},
    )
    assert problem in assert_problem(response, 422)["detail"]
    assert (await client.get("/v1/jobs", headers=app.auth("ada"))).json() == {"jobs": []}  # nothing stored


async def test_the_same_checks_apply_to_a_file_sent_in_json_and_to_odd_uploads(
    client: httpx.AsyncClient, app: ServiceHarness
) -> None:
    ada = app.auth("ada")
    bad = {"name": "bad", "file": {"filename": "q.csv", "content": "title\nWhat?\n"}}
    assert "its columns: 'title'" in assert_problem(await client.post("/v1/jobs", headers=ada, json=bad), 422)["detail"]
    good = {"name": "good", "file": {"filename": "q.jsonl", "content": '{"question": "What?", "deadline_s": 9}\n'}}
    assert (await client.post("/v1/jobs", headers=ada, json=good)).status_code == 201
    both = {"name": "x", "questions": ["What?"], "file": good["file"]}
    assert_problem(await client.post("/v1/jobs", headers=ada, json=both), 422)
    wrong_type = await client.post("/v1/jobs/upload?name=x", headers={**ada, "Content-Type": "image/png"}, content=b"x")
    assert_problem(wrong_type, 415)
    nameless = await client.post("/v1/jobs/upload", headers={**ada, "Content-Type": "text/plain"}, content=b"What?")
    assert "Name the job" in assert_problem(nameless, 422)["detail"]
    not_utf8 = await client.post("/v1/jobs/upload?name=x", headers={**ada, "Content-Type": "text/csv"}, content=b"\xff")
    assert "not UTF-8" in assert_problem(not_utf8, 422)["detail"]
    no_file = await client.post("/v1/jobs/upload?name=x", headers=ada, data={"name": "x"}, files={"other": b"What?"})
    assert "'file'" in assert_problem(no_file, 422)["detail"]
    form = {"file": ("q.txt", b"What?", "text/plain")}
    bad_options = await client.post("/v1/jobs/upload?name=x", headers=ada, data={"options": "{"}, files=form)
    assert "options: not valid JSON" in assert_problem(bad_options, 422)["detail"]
    unknown_option = await client.post(
        "/v1/jobs/upload?name=x", headers=ada, data={"options": '{"colour": 1}'}, files=form
    )
    assert "colour" in assert_problem(unknown_option, 422)["detail"]
    unknown_field = await client.post("/v1/jobs/upload?name=x", headers=ada, data={"colour": "red"}, files=form)
    assert "colour" in assert_problem(unknown_field, 422)["detail"]
    assert (await client.get("/v1/jobs", headers=ada)).json()["jobs"][0]["name"] == "good"  # only the good one


@pytest.mark.parametrize(
    ("schedule", "timezone", "problem"),
    [
        ("0 6 * * FOO", "UTC", "invalid cron expression"),
        ("* * * *", "UTC", "needs 5 fields"),
        ("0 6 * * MON", "berlin", "unknown time zone 'berlin'"),
    ],
)
async def test_a_bad_schedule_is_a_422(
    client: httpx.AsyncClient, app: ServiceHarness, schedule: str, timezone: str, problem: str
) -> None:
    body = {"name": "timed", "questions": ["What?"], "schedule": schedule, "timezone": timezone}
    assert problem in assert_problem(await client.post("/v1/jobs", headers=app.auth("ada"), json=body), 422)["detail"]


async def test_a_run_started_over_http_finishes_with_results_in_every_format(
    client: httpx.AsyncClient, app: ServiceHarness
) -> None:
    ada = app.auth("ada")
    response = await client.post(
        "/v1/jobs/upload?name=team", headers={**ada, "Content-Type": "text/csv"}, content=CSV.encode()
    )
    assert response.status_code == 201, response.text
    started = await client.post("/v1/jobs/team/runs", headers=ada)
    assert started.status_code == 202, started.text
    run = started.json()
    assert started.headers["location"] == f"/v1/runs/{run['id']}"
    assert (run["executor"], run["trigger"], run["counts"]["total"]) == ("in_process", "manual", 2)
    run = await finished_run(client, run["id"], ada)
    assert (run["status"], run["counts"]["answered"], run["counts"]["failed"]) == ("completed", 2, 0)
    assert [r["id"] for r in (await client.get("/v1/jobs/team/runs", headers=ada)).json()["runs"]] == [run["id"]]

    as_json = await client.get(f"/v1/runs/{run['id']}/results", headers=ada)
    assert as_json.headers["content-type"] == "application/json"
    results = as_json.json()["results"]
    assert [r["question"] for r in results] == QUESTIONS
    assert all(r["status"] == "answered" and r["response"]["citations"] for r in results)
    assert results[1]["carried"] == {"topic": "testing", "owner": "team-1"}

    as_csv = await client.get(f"/v1/runs/{run['id']}/results", params={"format": "csv"}, headers=ada)
    assert as_csv.headers["content-type"] == "text/csv; charset=utf-8"
    rows = list(csv.DictReader(io.StringIO(as_csv.text)))
    assert len(rows) == len(QUESTIONS) and [row["question"] for row in rows] == QUESTIONS
    assert {"question", "topic", "owner", "status"} <= set(rows[0]) and rows[0]["owner"] == "team-0"

    as_jsonl = await client.get(f"/v1/runs/{run['id']}/results?format=jsonl", headers=ada)
    assert as_jsonl.headers["content-type"] == "application/x-ndjson"
    assert [json.loads(line)["question"] for line in as_jsonl.text.splitlines()] == QUESTIONS

    as_md = await client.get(f"/v1/runs/{run['id']}/results?format=md", headers=ada)
    assert as_md.headers["content-type"] == "text/markdown; charset=utf-8"
    assert all(question in as_md.text for question in QUESTIONS)
    # what the run cost (issue 23): on the run, in the CSV's column, beside every export (JSONL lines stay results)
    assert run["cost"] == {**run["cost"], "usd": 0.0, "model": None}  # the extractive answers called no LLM
    assert {row["run_cost_usd"] for row in rows} == {"0.000000"}
    for export in (as_csv, as_jsonl, as_md):
        assert export.headers["x-researchcrew-run-cost-usd"] == "0.000000"
    assert_problem(await client.get(f"/v1/runs/{run['id']}/results?format=xml", headers=ada), 422)
    assert_problem(await client.post(f"/v1/runs/{run['id']}/cancel", headers=ada), 409)  # finished: nothing to cancel


async def test_cancel_stops_the_questions_not_yet_started(tmp_path: Path) -> None:
    slow = evidence_tool(delay_s=0.3)
    async with jobs_service(jobs_settings(tmp_path, concurrency=1), tools=[slow]) as app, app.client() as client:
        ada = app.auth("ada")
        questions = [f"{QUESTIONS[0]} ({n})" for n in range(6)]
        await client.post("/v1/jobs", headers=ada, json={"name": "long", "questions": questions})
        run = (await client.post("/v1/jobs/long/runs", headers=ada)).json()
        cancelled = await client.post(f"/v1/runs/{run['id']}/cancel", headers=ada)
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["cancel_requested"] is True
        run = await finished_run(client, run["id"], ada)
        assert run["status"] == "cancelled"
        assert run["counts"]["cancelled"] >= 4 and run["counts"]["total"] == 6
        results = (await client.get(f"/v1/runs/{run['id']}/results", headers=ada)).json()["results"]
        assert {r["status"] for r in results} <= {"answered", "cancelled"}


class PeakTool(FakeTool):
    """Evidence after a short wait; records how many searches were in progress at once."""

    def __init__(self) -> None:
        super().__init__("rag", chunks=evidence_tool().chunks, delay_s=0.05)
        self.active = 0
        self.peak = 0

    async def _search(self, query: str, **options: Any) -> list[ContextChunk]:  # type: ignore[override]
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            return await super()._search(query, **options)
        finally:
            self.active -= 1


async def test_runs_started_together_share_the_process_concurrency(tmp_path: Path) -> None:
    tool = PeakTool()
    async with jobs_service(jobs_settings(tmp_path, concurrency=2), tools=[tool]) as app, app.client() as client:
        ada = app.auth("ada")
        for name in ("one", "two", "three"):
            questions = [f"{QUESTIONS[0]} ({name} {n})" for n in range(3)]
            await client.post("/v1/jobs", headers=ada, json={"name": name, "questions": questions})
        runs = [(await client.post(f"/v1/jobs/{name}/runs", headers=ada)).json() for name in ("one", "two", "three")]
        finished = [await finished_run(client, run["id"], ada) for run in runs]
    assert [run["counts"]["answered"] for run in finished] == [3, 3, 3]
    assert tool.peak == 2  # jobs.concurrency in the process, not per run (three runs would make six)
