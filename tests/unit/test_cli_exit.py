"""The console script ends its process as soon as the command is done (cli/_exit.py, issue 19): threads are joined
and atexit handlers run, stdout is flushed, the exit status is the command's; the interpreter's module teardown is
skipped. ``main(argv)`` called from Python keeps its interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest

from researchcrew.cli._exit import exit_status

SCRIPT = """
import atexit, sys, threading, time
from researchcrew.cli import main

class Teardown:
    def __del__(self):
        print("module teardown", flush=True)

keep = Teardown()
atexit.register(lambda: print("atexit ran", flush=True))
threading.Thread(target=lambda: (time.sleep(0.3), print("thread finished", flush=True))).start()
sys.argv = ["researchcrew", *sys.argv[1:]]
main()
"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, timeout=60)


@pytest.mark.slow  # subprocesses
def test_the_console_script_joins_threads_runs_atexit_flushes_and_skips_the_teardown() -> None:
    done = run("--help")
    assert done.returncode == 0, done.stderr
    assert "Usage: researchcrew" in done.stdout  # buffered output to a pipe is flushed before the process ends
    lines = done.stdout.splitlines()
    assert lines.index("thread finished") < lines.index("atexit ran")  # threads first, as the interpreter does
    assert "module teardown" not in done.stdout


@pytest.mark.slow
def test_the_exit_status_is_the_commands() -> None:
    done = run("no-such-command")
    assert done.returncode == 2
    assert "No such command 'no-such-command'" in done.stderr
    assert "atexit ran" in done.stdout


@pytest.mark.parametrize(("code", "status"), [(None, 0), (0, 0), (3, 3), ("fatal: broken", 1)])
def test_exit_status_follows_system_exit(code: object, status: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_status(code) == status
    assert capsys.readouterr().err == ("fatal: broken\n" if isinstance(code, str) else "")
