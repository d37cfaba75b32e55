"""The crash-and-restart test (tests/jobs/crash_restart.py) with the job store on SQLite; its PostgreSQL half is
test_crash_restart_postgresql.py (a module each, so that pytest-xdist can run the two halves side by side)."""

from __future__ import annotations

import pytest

from tests.jobs import crash_restart

pytestmark = crash_restart.pytestmark

arxiv = crash_restart.arxiv  # the slow loopback arXiv


@pytest.fixture
def database_url(sqlite_url: str) -> str:
    return sqlite_url


test_sigkill_mid_run_and_an_immediate_restart_end_every_question_once = (
    crash_restart.test_sigkill_mid_run_and_an_immediate_restart_end_every_question_once
)
