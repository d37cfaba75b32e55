"""Issue 19, done-when: on one machine, at once, a `researchcrew serve` of the data folder, three concurrent CLI
`ask`s, one CLI `jobs run`, one upload over HTTP and a question asked the way the web page asks it (a session, then
the message as an event stream) — 0 errors, every answer cites the knowledge base, the upload is ingested, and
nothing "in use": every door goes through the service that owns the Milvus Lite file instead of fighting over it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.service.processes import ServeProcess, cli

pytestmark = pytest.mark.slow

QUESTIONS = ["What is metamorphic testing?", "How are flaky tests detected?", "What is mutation testing?"]
JOB_QUESTIONS = ["What is metamorphic testing?", "How are flaky tests detected?"]


NOTES = (
    "# Lab notes\n\n## Flaky tests\n\nQuarantining flaky tests keeps the main branch green while the zorblax "
    "scheduler reruns them overnight.\n"
)


def _sse(lines: list[str]) -> list[tuple[str, Any]]:
    """(event, data) pairs of an event stream's lines."""
    events, name = [], "message"
    for line in lines:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            events.append((name, json.loads(line[6:])))
    return events


def _upload_and_ask_as_the_page(url: str, outcome: dict[str, Any]) -> None:
    """What a team member does meanwhile in the browser: upload a file, then ask in a new session (streamed)."""
    with httpx.Client(base_url=url, timeout=300) as client:
        upload = client.post("/v1/documents", files=[("file", ("lab-notes.md", NOTES.encode(), "text/markdown"))])
        outcome["upload_status"] = upload.status_code
        document_id = upload.json()["documents"][0]["id"]
        session = client.post("/v1/sessions", json={}).json()["session_id"]
        question = {"question": "How are flaky tests detected?"}
        headers = {"Accept": "text/event-stream"}
        with client.stream("POST", f"/v1/sessions/{session}/messages", json=question, headers=headers) as reply:
            outcome["page_status"] = reply.status_code
            outcome["page_events"] = _sse(list(reply.iter_lines()))
        with client.stream("GET", f"/v1/documents/{document_id}/events") as progress:
            outcome["document_events"] = _sse(list(progress.iter_lines()))


def _start(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", "from researchcrew.cli import main; main()", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_serve_three_asks_a_job_run_an_upload_and_a_page_question_at_once(
    served: ServeProcess, demo_folder: tuple[Path, dict[str, str]]
) -> None:
    _, env = demo_folder
    added = cli("jobs", "add", "--name", "together", *(f"-q{q}" for q in JOB_QUESTIONS), env=env)
    assert added.returncode == 0, added.stderr
    running = [_start("ask", question, "--json", "--user", f"u{n}", env=env) for n, question in enumerate(QUESTIONS)]
    running.append(_start("jobs", "run", "together", "--json", env=env))
    page: dict[str, Any] = {}
    browser = threading.Thread(target=_upload_and_ask_as_the_page, args=(served.url, page))
    browser.start()
    finished = [(process, *process.communicate(timeout=300)) for process in running]
    browser.join(timeout=300)
    assert not browser.is_alive()
    assert page["upload_status"] == 202 and page["page_status"] == 200, page
    [(_, answer)] = [(name, data) for name, data in page["page_events"] if name == "response"]
    assert answer["citations"] and all(c["source_type"] == "rag" for c in answer["citations"]), answer["answer"]
    assert page["document_events"][-1][1]["status"] == "ready", page["document_events"]
    for process, out, err in finished:
        assert process.returncode == 0, err
        assert "in use" not in out + err, err
    *asks, (_, run_out, _) = finished
    for _, out, _ in asks:
        answer = json.loads(out)
        assert answer["citations"] and all(c["source_type"] == "rag" for c in answer["citations"]), answer["answer"]
    run = json.loads(run_out)
    assert run["status"] == "completed" and run["counts"]["answered"] == len(JOB_QUESTIONS), run
    exported = cli("jobs", "results", run["id"], "--format", "jsonl", env=env)
    results = [json.loads(line) for line in exported.stdout.splitlines()]
    assert len(results) == len(JOB_QUESTIONS)
    for result in results:
        assert result["status"] == "answered"
        assert any(c["source_type"] == "rag" for c in result["response"]["citations"]), result
    log = served.log()
    assert "in use" not in log and "POST /v1/jobs/together/runs" in log and log.count("POST /v1/ask") >= 3
    assert "POST /v1/documents" in log
    assert "Traceback" not in log
