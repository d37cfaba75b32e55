"""Issue 19 item 5: a real CLI process that asks two questions (`jobs run` of a two-question job, in process) writes
no gRPC keep-alive chatter on stderr, and each warning (here: arXiv unreachable, web search not configured) once,
not once per question."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.service.processes import cli

pytestmark = pytest.mark.slow


def test_two_questions_leave_a_quiet_stderr(demo_folder: tuple[Path, dict[str, str]]) -> None:
    _, base = demo_folder
    env = {**base, "RESEARCHCREW_ENABLED_SOURCES": "rag,memory,arxiv,web", "RESEARCHCREW_LOCAL": "1"}
    added = cli("jobs", "add", "--name", "two", "-q", "What is metamorphic testing?", "-q", "What is fuzzing?", env=env)
    assert added.returncode == 0, added.stderr
    done = cli("jobs", "run", "two", "--json", env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["counts"]["total"] == 2
    lines = [line.strip() for line in done.stderr.replace("\r", "\n").splitlines() if line.strip()]
    assert not [line for line in lines if "GOAWAY" in line or "too_many_pings" in line or "chttp2" in line]
    warnings = Counter(line[line.index("WARNING") :] for line in lines if "WARNING" in line)
    assert warnings, done.stderr  # arXiv (a closed port) and web search (no key) do warn ...
    assert {line: count for line, count in warnings.items() if count > 1} == {}  # ... once each
