"""`serve`, `worker` and `scheduler` with a server they need unreachable (issue 17 item 8): each ends with a non-zero
exit code and a few lines naming the setting, the address with its password masked, and the error; no traceback,
no password, and a worker or scheduler retrying Redis gives up within ``jobs.startup_timeout_s``.

The server is "down" as it is in real life: a closed loopback port, reached with a password in the URL.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT
from tests.e2e.support import offline_environment
from tests.helpers.services import REDIS_URL, reachable_redis
from tests.loopback.server import closed_port

PASSWORD = "s3cretPW-17"
MEMORY_SETTING = "RESEARCHCREW_MEMORY__DATABASE_URL"
REDIS_SETTING = "RESEARCHCREW_REDIS__URL"
STARTUP_TIMEOUT_S = 2.0
# Generous: interpreter start-up and imports on a loaded two-core machine, plus the retries themselves. A command
# that hangs (taskiq restarting a dying worker forever) is cut off by the subprocess timeout instead.
EXIT_WITHIN_S = 60.0


def _run(command: str, tmp_path: Path, extra: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(PROJECT_ROOT),
        "CREWAI_DISABLE_TELEMETRY": "true",
        "OTEL_SDK_DISABLED": "true",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        **offline_environment(tmp_path / "data"),
        "RESEARCHCREW_JOBS__STARTUP_TIMEOUT_S": str(STARTUP_TIMEOUT_S),
        **extra,
    }
    args = [command, "--port", str(closed_port())] if command == "serve" else [command]
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-m", "researchcrew", *args],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=EXIT_WITHIN_S,
        check=False,
    )
    return completed, time.monotonic() - started


def _assert_one_clear_failure(
    completed: subprocess.CompletedProcess[str], setting: str, masked_address: str, *, max_lines: int
) -> None:
    output = completed.stdout + completed.stderr
    lines = completed.stderr.strip().splitlines()
    assert completed.returncode != 0, output
    assert "Traceback" not in output
    assert PASSWORD not in output
    assert 1 <= len(lines) <= max_lines, output
    final = lines[-1]
    assert final.startswith("Error: ") and setting in final and masked_address in final, output
    assert "refused" in final.lower() or "failed" in final.lower(), final  # the error itself, not only the address


def _unreachable_postgres() -> tuple[str, str]:
    port = closed_port()
    return (
        f"postgresql+asyncpg://ada:{PASSWORD}@127.0.0.1:{port}/research",
        f"postgresql+asyncpg://ada:***@127.0.0.1:{port}/research",
    )


def _unreachable_redis() -> tuple[str, str]:
    port = closed_port()
    return f"redis://:{PASSWORD}@127.0.0.1:{port}/0", f"redis://:***@127.0.0.1:{port}/0"


@pytest.mark.slow
def test_serve_with_the_memory_database_down_says_so_in_one_line(tmp_path: Path) -> None:
    url, masked = _unreachable_postgres()
    completed, _ = _run("serve", tmp_path, {MEMORY_SETTING: url})
    _assert_one_clear_failure(completed, MEMORY_SETTING, masked, max_lines=1)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["worker", "scheduler"])
def test_worker_and_scheduler_with_redis_down_retry_then_give_up_in_bounded_time(tmp_path: Path, command: str) -> None:
    url, masked = _unreachable_redis()
    completed, elapsed = _run(command, tmp_path, {REDIS_SETTING: url})
    # 2 s of backoff from 0.5 s: three or four attempts, each a line, then the final one.
    _assert_one_clear_failure(completed, REDIS_SETTING, masked, max_lines=6)
    lines = completed.stderr.strip().splitlines()
    retries = lines[:-1]
    assert retries, completed.stderr  # it said it was retrying
    for line in retries:
        assert REDIS_SETTING in line and masked in line and "retrying in" in line
    assert elapsed < EXIT_WITHIN_S  # gave up on its own: run() would have raised TimeoutExpired


@pytest.mark.slow
@pytest.mark.parametrize("command", ["worker", "scheduler"])
def test_worker_and_scheduler_with_the_memory_database_down_say_so(tmp_path: Path, command: str) -> None:
    redis_url = reachable_redis(REDIS_URL)
    url, masked = _unreachable_postgres()
    completed, _ = _run(
        command, tmp_path, {REDIS_SETTING: redis_url, MEMORY_SETTING: url, "RESEARCHCREW_JOBS__STARTUP_TIMEOUT_S": "0"}
    )
    _assert_one_clear_failure(completed, MEMORY_SETTING, masked, max_lines=1)


async def test_a_failure_in_the_lifespan_itself_is_one_line_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What the check before uvicorn cannot see (a `--workers` process, a database gone in between) still ends in
    one line: the app as `serve` hands it to uvicorn, its memory database unreachable when the lifespan opens it."""
    import uvicorn

    from researchcrew.runtime import open_runtime
    from researchcrew.service._app import create_app
    from researchcrew.service.server import BriefStartupFailure
    from researchcrew.settings import MemorySettings, Settings
    from tests.service.support import default_tools

    url, masked = _unreachable_postgres()
    settings = Settings(data_dir=tmp_path, memory=MemorySettings(database_url=url, connect_timeout_s=5))
    runtime = open_runtime(settings, tools=default_tools())
    app = BriefStartupFailure(create_app(settings, runtime=runtime))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="on", log_config=None))
    try:
        with pytest.raises(SystemExit):  # uvicorn ends the process on a failed start-up (exit code 3)
            await server.serve()
    finally:
        await runtime.aclose()
    assert not server.started
    reported = [record for record in caplog.records if record.name == "uvicorn.error" and record.levelname == "ERROR"]
    text = "\n".join(record.getMessage() for record in reported)
    assert "Traceback" not in text and PASSWORD not in text
    first = reported[0].getMessage()
    assert "\n" not in first and masked in first and "cannot start" in first, text
    assert len(reported) == 2, text  # that line, then uvicorn's "Application startup failed. Exiting."
