"""Issue 19 item 1 for `researchcrew research`: with a `researchcrew serve` of the data folder running, deep research
goes through the service's ``/v1/deep-runs`` routes over its Unix socket (the service holds the knowledge base) and
gives what it gives in process: the same run and report, the pause without a terminal and ``--run`` to steer it, the
plan prompt at a terminal (a bad decision is said and asked again), ``-o report.pdf``, the exit codes; ``--local``
is still in process."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from researchcrew.contracts.deep import DeepRun
from tests.helpers.cli_batch import cli_batch
from tests.service.processes import cli, serve

pytestmark = pytest.mark.slow

QUESTION = "What is known about flaky tests?"
OPTIONS = ("--max-items", "3", "--no-clarify", "--length", "brief")


def _same(run: DeepRun) -> dict[str, Any]:
    """What must not depend on where the run worked (ids, times and timings left out)."""
    report = run.report
    assert report is not None, run
    return {
        "status": run.status,
        "plan": [item.question for item in report.plan.items],
        "answer": report.response.answer,
        "cited": [citation.chunk_id for citation in report.response.citations],
        "sub_questions": [(sub.status, sub.citations) for sub in report.sub_questions],
    }


def _at_a_terminal(env: dict[str, str], *args: str, typed: str) -> subprocess.CompletedProcess[str]:
    """The command with a terminal as its stdin (so it prompts), ``typed`` typed ahead into it."""
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", "from researchcrew.cli import main; main()", *args],
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        os.write(controller, typed.encode())
        out, err = process.communicate(timeout=300)
    finally:
        os.close(terminal)
        os.close(controller)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def test_research_goes_through_the_running_service_with_the_same_results(
    demo_folder: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    _, env = demo_folder
    # both in one process (tests/helpers/cli_batch.py): what they print and their exit codes are compared
    in_process, missing_in_process = cli_batch(
        [["research", QUESTION, "--yes", "--json", *OPTIONS], ["research", "--run", "no-such-run", "--approve"]],
        env=env,
    )
    assert in_process.returncode == 0, in_process.stderr

    with serve("--no-auth", env=env, log_path=tmp_path / "serve.log") as server:
        report_path = tmp_path / "out" / "report.pdf"
        through = cli("research", QUESTION, "--yes", "--json", *OPTIONS, "-o", str(report_path), env=env, timeout=300)
        assert through.returncode == 0, through.stderr
        assert _same(DeepRun.model_validate_json(through.stdout)) == _same(
            DeepRun.model_validate_json(in_process.stdout)
        )
        assert "Report written to" in through.stderr and report_path.read_bytes().startswith(b"%PDF")

        # no terminal: the run pauses at its plan; a later command approves it (the run is the service's)
        paused = cli("research", QUESTION, "--user", "bob", *OPTIONS, env=env, timeout=300)
        assert paused.returncode == 0 and "— awaiting_human_feedback" in paused.stdout, paused.stderr
        run_id = paused.stdout.split()[3]
        approved = cli("research", "--run", run_id, "--user", "bob", "--approve", "--json", env=env, timeout=300)
        assert approved.returncode == 0, approved.stderr
        assert DeepRun.model_validate_json(approved.stdout).status == "completed"
        shown = cli("research", "--run", run_id, "--user", "bob", env=env)
        assert "Quality: overall" in shown.stdout and "Plan:" in shown.stdout and "… research" not in shown.stderr

        # at a terminal: progress on stderr, the plan prompt, a decision the service refuses said and asked again
        # ("edit 3" is refused by the command itself; "edit 9 Why?" by the service, which knows no item 9: its 422)
        typed = _at_a_terminal(
            env, "research", QUESTION, "--user", "carol", *OPTIONS, typed="edit 3\nedit 9 Why?\ncut 2\n"
        )
        assert typed.returncode == 0, typed.stderr
        assert "Proposed plan for: What is known about flaky tests?" in typed.stderr
        # The plan holds what the evidence's facets gave (issue 21 item 1): at most the 3 asked for.
        proposed = [line for line in typed.stderr.splitlines() if re.match(r"^  \d+\. ", line)]
        assert 2 <= len(proposed) <= 3, typed.stderr
        numbers = ", ".join(str(n) for n in range(1, len(proposed) + 1))
        assert f"names item 9, which the plan does not have ({numbers})" in typed.stderr, typed.stderr
        assert typed.stderr.count("Error:") == 2 and "… researching" in typed.stderr, typed.stderr
        decided = typed.stdout.split()[3]
        finished = cli("research", "--run", decided, "--user", "carol", "--json", env=env)
        report = DeepRun.model_validate_json(finished.stdout).report
        assert report is not None and len(report.plan.items) == len(proposed) - 1  # item 2 was cut

        missing = cli("research", "--run", "no-such-run", "--approve", env=env)
        looked_up = server.log().count(f"GET /v1/deep-runs/{run_id} ")
        local = cli("research", "--run", run_id, "--user", "bob", "--local", "--json", env=env)
        log = server.log()

    assert (missing.returncode, missing_in_process.returncode) == (1, 1)
    assert "no-such-run" in missing.stderr.splitlines()[-1] and "Traceback" not in missing.stderr
    # --local: read in this process (from the memory database), not asked of the service
    assert local.returncode == 0 and DeepRun.model_validate_json(local.stdout).run_id == run_id, local.stderr
    assert log.count(f"GET /v1/deep-runs/{run_id} ") == looked_up > 0
    for route in ("POST /v1/deep-runs HTTP", f"POST /v1/deep-runs/{run_id}/plan HTTP", "/report?format=pdf HTTP"):
        assert route in log, route
    assert f'POST /v1/deep-runs/{decided}/plan HTTP/1.1" 422' in log and "Traceback" not in log
    assert json.loads(cli("status", "--json", env=env).stdout)["commands"]["mode"] == "local"
