"""The test suite's own guards: a hung test fails within its budget, and missing shared data is a failure under CI."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import SLOW_TEST_TIMEOUT_S
from tests.helpers.services import required_directory


def test_every_test_has_a_time_budget(pytestconfig: pytest.Config, request: pytest.FixtureRequest) -> None:
    assert float(pytestconfig.getini("timeout")) == 300
    assert pytestconfig.getini("timeout_method") == "signal"
    assert request.node.get_closest_marker("timeout") is None  # not slow: the default budget


@pytest.mark.slow
def test_a_slow_test_gets_the_longer_budget(request: pytest.FixtureRequest) -> None:
    marker = request.node.get_closest_marker("timeout")
    assert marker is not None and marker.args == (SLOW_TEST_TIMEOUT_S,)


def test_a_hung_async_test_fails_at_its_budget_and_the_session_goes_on(tmp_path: Path) -> None:
    """The configuration above, in a pytest of its own: an await that never returns fails after the budget."""
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
        "timeout = 2\ntimeout_method = signal\n"
    )
    (tmp_path / "test_hang.py").write_text(
        textwrap.dedent(
            """
            import asyncio

            async def test_hangs():
                await asyncio.Event().wait()

            def test_after_it():
                pass
            """
        )
    )
    finished = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_hang.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,  # far beyond the 2 s budget: this bound is only against the guard itself being broken
    )
    assert finished.returncode == 1, finished.stdout + finished.stderr
    assert "1 failed, 1 passed" in finished.stdout, finished.stdout
    assert "Timeout (>2.0s)" in finished.stdout, finished.stdout


def test_missing_shared_data_skips_locally_and_fails_under_ci(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert required_directory(tmp_path, "shared data") == tmp_path
    missing = tmp_path / "shared"
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="shared data not found at"):
        required_directory(missing, "shared data")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true, so this is a failure"):
        required_directory(missing, "shared data")
