"""Issue 19, done-when (this branch's part): on one machine, at once, a `researchcrew serve` of the data folder,
three concurrent CLI `ask`s and one CLI `jobs run` — 0 errors, every answer cites the knowledge base, and nothing
"in use": the commands go through the service that owns the Milvus Lite file instead of fighting over it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.service.processes import ServeProcess, cli

pytestmark = pytest.mark.slow

QUESTIONS = ["What is metamorphic testing?", "How are flaky tests detected?", "What is mutation testing?"]
JOB_QUESTIONS = ["What is metamorphic testing?", "How are flaky tests detected?"]


def _start(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", "from researchcrew.cli import main; main()", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_serve_three_asks_and_a_job_run_at_once(served: ServeProcess, demo_folder: tuple[Path, dict[str, str]]) -> None:
    _, env = demo_folder
    added = cli("jobs", "add", "--name", "together", *(f"-q{q}" for q in JOB_QUESTIONS), env=env)
    assert added.returncode == 0, added.stderr
    running = [_start("ask", question, "--json", "--user", f"u{n}", env=env) for n, question in enumerate(QUESTIONS)]
    running.append(_start("jobs", "run", "together", "--json", env=env))
    finished = [(process, *process.communicate(timeout=300)) for process in running]
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
    assert "Traceback" not in log
