"""`researchcrew jobs ...` as a user types it: add from a file, run with a progress bar, status, export, cancel,
remove; bad input ends in one line naming the problem; `worker`/`scheduler` without Redis say what to set."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from researchcrew.cli import cli
from researchcrew.jobs.contracts import QuestionResult, RunInfo
from tests.conftest import PROJECT_ROOT
from tests.e2e.support import offline_environment


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        **offline_environment(tmp_path / "data"),
        "RESEARCHCREW_ENABLED_SOURCES": '["memory"]',
        "RESEARCHCREW_USER": "ada",
    }


def _invoke(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_add_run_status_export_and_remove(env: dict[str, str], tmp_path: Path) -> None:
    questions = tmp_path / "questions.csv"
    questions.write_text("question,team\nWhat is a flaky test?,qa\nWhat is mutation testing?,dev\n")
    code, out, _ = _invoke(
        env,
        "jobs",
        "add",
        str(questions),
        "--name",
        "weekly-testing",
        "--schedule",
        "0 6 * * MON",
        "--tz",
        "Europe/Berlin",
    )
    assert code == 0, out
    assert "Added job weekly-testing" in out and "2 question(s) from questions.csv" in out and "next run" in out
    code, out, _ = _invoke(env, "jobs", "list")
    assert "weekly-testing" in out and "0 6 * * MON (Europe/Berlin)" in out

    code, out, err = _invoke(env, "jobs", "run", "weekly-testing", "--json")
    assert code == 0, out + err
    run = json.loads(out)
    assert run["status"] == "completed" and run["counts"]["total"] == 2
    code, out, _ = _invoke(env, "jobs", "status", run["id"])
    assert f"Run {run['id']} of job weekly-testing: completed" in out and "2 question(s)" in out
    assert "  cost: $0 (no LLM calls)" in out.splitlines()  # the extractive answers called no LLM
    assert run["cost"]["usd"] == 0 and run["cost"]["model"] is None
    code, out, _ = _invoke(env, "jobs", "runs", "weekly-testing")
    assert run["id"] in out

    code, out, _ = _invoke(env, "jobs", "results", run["id"], "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(row["question"], row["team"]) for row in rows] == [
        ("What is a flaky test?", "qa"),
        ("What is mutation testing?", "dev"),
    ]
    report = tmp_path / "report.md"
    code, _, err = _invoke(env, "jobs", "results", run["id"], "--format", "md", "-o", str(report))
    assert code == 0 and "Wrote" in err and report.read_text().startswith("# weekly-testing — run ")
    # JSONL: every line stays one question's result; the run and its cost go beside the file
    exported = tmp_path / "results.jsonl"
    code, _, err = _invoke(env, "jobs", "results", run["id"], "--format", "jsonl", "-o", str(exported))
    lines = exported.read_text().splitlines()
    assert code == 0 and len([QuestionResult.model_validate_json(line) for line in lines]) == 2
    sidecar = RunInfo.model_validate_json((tmp_path / "results.jsonl.run.json").read_text())
    assert sidecar.id == run["id"] and sidecar.cost.usd == 0 and "results.jsonl.run.json" in err
    code, out, err = _invoke(env, "jobs", "results", run["id"], "--format", "jsonl")
    assert len(out.splitlines()) == 2 and "Run cost: $0 (no LLM calls)" in err

    code, _, err = _invoke(env, "jobs", "cancel", run["id"])
    assert code == 1 and "finished already" in err  # one clear line, no traceback
    code, out, _ = _invoke(env, "jobs", "remove", "weekly-testing", "--yes")
    assert "Removed job weekly-testing" in out
    code, _, err = _invoke(env, "jobs", "status", run["id"])
    assert code == 1 and f"no run '{run['id']}'" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--schedule", "0 6 * * FOO"], "schedule.cron: invalid cron expression"),
        (["--schedule", "0 6 * * MON", "--tz", "Europe/Nowhere"], "unknown time zone 'Europe/Nowhere'"),
    ],
)
def test_bad_schedules_end_in_one_line(env: dict[str, str], tmp_path: Path, args: list[str], message: str) -> None:
    questions = tmp_path / "q.txt"
    questions.write_text("What is a flaky test?\n")
    code, _, err = _invoke(env, "jobs", "add", str(questions), "--name", "x", *args)
    assert code == 1 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_csv_without_a_question_column_says_which_columns_it_has(env: dict[str, str], tmp_path: Path) -> None:
    questions = tmp_path / "q.csv"
    questions.write_text("prompt,team\nWhat?,qa\n")
    code, _, err = _invoke(env, "jobs", "add", str(questions), "--name", "x")
    assert code == 1 and "the CSV has no 'question' column (its columns: 'prompt', 'team')" in err
    code, out, _ = _invoke(env, "jobs", "list")
    assert "No jobs for user ada" in out  # nothing was stored


def test_inline_questions_and_usage_errors(env: dict[str, str]) -> None:
    code, out, _ = _invoke(
        env, "jobs", "add", "--name", "inline", "-q", "What is RAG?", "-q", "What is BM25?", "--json"
    )
    assert code == 0 and json.loads(out)["job"]["question_count"] == 2
    code, out, err = _invoke(env, "jobs", "add", "--name", "none")
    assert code == 2 and "either a question file or one or more -q" in out + err


@pytest.mark.slow
@pytest.mark.parametrize("command", ["worker", "scheduler"])
def test_worker_and_scheduler_without_redis_say_what_to_set(tmp_path: Path, command: str) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "researchcrew", command],
        cwd=PROJECT_ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT_ROOT), "RESEARCHCREW_DATA_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 1
    assert "the job queue needs Redis: set RESEARCHCREW_REDIS__URL" in completed.stderr
    assert "Traceback" not in completed.stderr
