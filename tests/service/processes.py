"""`researchcrew serve` as a real process (or several), for what only a real server shows: SIGTERM, workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.conftest import PROJECT_ROOT
from tests.loopback.server import closed_port


def free_port() -> int:
    return closed_port()  # a port nothing listens on right now


def cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from researchcrew.cli import main; main()", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def child_environment(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCHCREW_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


@dataclass
class ServeProcess:
    process: subprocess.Popen[str]
    url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)


@contextmanager
def serve(*args: str, env: dict[str, str], log_path: Path, start_timeout_s: float = 240) -> Iterator[ServeProcess]:
    """Start `researchcrew serve --port P ...`, wait for /healthz, and stop it (SIGTERM, then kill) at the end."""
    port = free_port()
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", "from researchcrew.cli import main; main()", "serve", "--port", str(port), *args],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
    server = ServeProcess(process, f"http://127.0.0.1:{port}", log_path)
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"serve exited with {process.returncode}:\n{server.log()}")
            try:
                if httpx.get(f"{server.url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"serve did not start within {start_timeout_s} s:\n{server.log()}")
            time.sleep(0.2)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
