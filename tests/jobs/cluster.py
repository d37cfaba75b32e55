"""Real `researchcrew worker` and `researchcrew scheduler` processes for the fault tests, on this machine's Redis and
PostgreSQL, with arXiv (and Firecrawl) as loopback servers that count, delay and fail requests per question.

Each question carries a token (``q007``); the arXiv stand-in answers a one-entry Atom feed naming it, after
``delay_s``, or fails as scripted, and counts requests per token — so a test knows how often each question was
really researched, in whichever process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from researchcrew.settings import Settings
from tests.conftest import PROJECT_ROOT
from tests.e2e.support import MODEL_CACHE_DIR
from tests.helpers.services import MEMORY_CONNECT_TIMEOUT
from tests.jobs.conftest import RedisFixture
from tests.loopback.server import Reply, Request

TOKEN = re.compile(r"q\d{3}")
ATOM = "application/atom+xml; charset=utf-8"


def question(number: int) -> str:
    return f"What do studies report about flaky test detection method q{number:03d}?"


_NO_RESULTS = b"""<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">
  <title>arXiv Query</title>
  <id>http://arxiv.org/api/none</id>
  <updated>2025-06-01T00:00:00-04:00</updated>
  <opensearch:totalResults>0</opensearch:totalResults>
  <opensearch:startIndex>0</opensearch:startIndex>
  <opensearch:itemsPerPage>0</opensearch:itemsPerPage>
</feed>
"""


def _feed(token: str) -> bytes:
    """The one paper of a question's token, or arXiv's empty feed for a query naming no token (a reformulated or
    follow-up search): before, that crashed the stand-in's request thread ("int('one')") onto the test's stderr."""
    if not TOKEN.fullmatch(token):
        return _NO_RESULTS
    number = int(token[1:])
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/"
      xmlns:arxiv="http://arxiv.org/schemas/atom">
  <title>arXiv Query: {token}</title>
  <id>http://arxiv.org/api/{token}</id>
  <updated>2025-06-01T00:00:00-04:00</updated>
  <opensearch:totalResults>1</opensearch:totalResults>
  <opensearch:startIndex>0</opensearch:startIndex>
  <opensearch:itemsPerPage>1</opensearch:itemsPerPage>
  <entry>
    <id>http://arxiv.org/abs/2501.{number:05d}v1</id>
    <updated>2025-05-20T10:00:00Z</updated>
    <published>2025-05-20T10:00:00Z</published>
    <title>Flaky test detection method {token}</title>
    <summary>Studies report that flaky test detection method {token} finds flaky tests by rerunning them.
    Flaky tests pass and fail on the same code, and detection method {token} reports them reliably.</summary>
    <author><name>A. Tester</name></author>
    <link href="http://arxiv.org/abs/2501.{number:05d}v1" rel="alternate" type="text/html"/>
    <arxiv:primary_category term="cs.SE" scheme="http://arxiv.org/schemas/atom"/>
    <category term="cs.SE" scheme="http://arxiv.org/schemas/atom"/>
  </entry>
</feed>
""".encode()


class ArxivStandIn:
    """Route for ``LoopbackServer``: counts requests per question token, delays, fails as scripted."""

    def __init__(self, *, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.counts: Counter[str] = Counter()
        self.arrivals: list[float] = []  # time.monotonic() of every request
        self.failures: dict[str, Callable[[int], Reply | None]] = {}  # token -> (attempt number) -> reply or None
        self._lock = threading.Lock()

    def __call__(self, request: Request) -> Reply:
        text = " ".join(request.query.get("search_query", [""]))
        found = TOKEN.search(text)
        token = found.group(0) if found else "none"
        with self._lock:
            self.counts[token] += 1
            self.arrivals.append(time.monotonic())
            attempt = self.counts[token]
        scripted = self.failures.get(token)
        reply = scripted(attempt) if scripted else None
        if reply is not None:
            return reply
        if self.delay_s:
            time.sleep(self.delay_s)
        return Reply.text(_feed(token), content_type=ATOM)


class Cluster:
    """Processes of one test; every one is stopped (SIGKILL to its process group) at the end."""

    def __init__(self, tmp_path: Path, database_url: str, redis: RedisFixture, **settings: str) -> None:
        self.tmp_path = tmp_path
        self.environment = {
            key: value for key, value in os.environ.items() if not key.startswith(("RESEARCHCREW_", "PYTEST"))
        }
        self.environment.update(
            {
                "PYTHONPATH": str(PROJECT_ROOT),
                "RESEARCHCREW_MEMORY__DATABASE_URL": database_url,
                "RESEARCHCREW_REDIS__URL": redis.url,
                "RESEARCHCREW_REDIS__KEY_PREFIX": redis.prefix,
                "RESEARCHCREW_ENABLED_SOURCES": '["arxiv"]',
                "RESEARCHCREW_ARXIV__MIN_INTERVAL_S": "0",
                "RESEARCHCREW_ARXIV__NUM_RETRIES": "0",
                "RESEARCHCREW_ARXIV__CACHE_TTL_S": "0",
                "RESEARCHCREW_EMBEDDING__CACHE_DIR": str(MODEL_CACHE_DIR),
                **MEMORY_CONNECT_TIMEOUT,
                "RESEARCHCREW_JOBS__LEASE_S": "3",
                "RESEARCHCREW_JOBS__REDELIVERY_AFTER_S": "5",
                "RESEARCHCREW_JOBS__RETRY_BACKOFF_S": "0.05",
                "RESEARCHCREW_JOBS__RETRY_BACKOFF_MAX_S": "0.2",
                "RESEARCHCREW_JOBS__SCHEDULE_REFRESH_S": "2",
                "CREWAI_DISABLE_TELEMETRY": "true",
                "OTEL_SDK_DISABLED": "true",
                "CREWAI_TRACING_ENABLED": "false",
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "GRPC_VERBOSITY": "NONE",
            }
        )
        self.environment.update({f"RESEARCHCREW_{key.upper()}": value for key, value in settings.items()})
        self.processes: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def settings(self) -> Settings:
        """The same settings, for the test process itself (it creates jobs and reads results)."""
        values: dict[str, Any] = {}
        for key, value in self.environment.items():
            if key.startswith("RESEARCHCREW_"):
                values[key] = value
        saved = {key: os.environ.get(key) for key in values}
        os.environ.update(values)
        try:
            return Settings(data_dir=self.tmp_path / "test-process")
        finally:
            for key, old in saved.items():
                if old is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = old

    def start(self, command: str, *args: str) -> subprocess.Popen[bytes]:
        """Start `researchcrew <command>` in its own process group and data directory."""
        number = len(self.processes)
        log = self.tmp_path / f"{command}-{number}.log"
        environment = {**self.environment, "RESEARCHCREW_DATA_DIR": str(self.tmp_path / f"{command}-{number}")}
        with log.open("wb") as handle:  # the child keeps its own copy of the descriptor
            process = subprocess.Popen(
                [sys.executable, "-m", "researchcrew", "-v", command, *args],
                cwd=PROJECT_ROOT,
                env=environment,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.append(process)
        self.logs.append(log)
        return process

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        """SIGKILL a command and every process it started (taskiq's worker processes)."""
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)

    def close(self) -> None:
        for process in self.processes:
            self.kill(process)

    def output(self) -> str:
        return "\n".join(
            f"--- {log.name}\n{log.read_text(errors='replace')[-4000:]}" for log in self.logs if log.exists()
        )


async def wait_for(
    predicate: Callable[[], Awaitable[bool]], timeout_s: float, what: str, cluster: Cluster | None = None
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await predicate():
            return
        await asyncio.sleep(0.2)
    detail = f"\n{cluster.output()}" if cluster is not None else ""
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}{detail}")
