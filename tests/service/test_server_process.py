"""A real `researchcrew serve`: SIGTERM lets running answers finish and loses no memory write; several workers
share PostgreSQL memory and Redis limits.

These servers search conversation memory and arXiv (the recorded arXiv fake on loopback), not a knowledge base:
a Milvus Lite file belongs to one process, so a multi-process test with it would not be honest, and a Milvus
server cannot run here. The knowledge base is served by the same code either way (tests/e2e cover it)."""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from researchcrew.memory.store import MemoryStore
from tests.e2e.support import MODEL_CACHE_DIR
from tests.helpers.services import MEMORY_CONNECT_TIMEOUT, fresh_postgres_database
from tests.loopback.arxiv import ArxivFake
from tests.loopback.server import LoopbackServer, Reply, Request
from tests.service.processes import child_environment, cli, serve
from tests.service.support import redis_url

pytestmark = pytest.mark.slow

QUESTION = "What is metamorphic testing?"
RATE = 100  # requests per minute and user in the multi-worker test
ARXIV_DELAY_S = 5.0  # long enough that the server is seen refusing new connections while the answer still runs


class SlowArxiv:
    """The recorded arXiv fake, answering after ``delay_s``; ``asked`` is set when a query arrives."""

    def __init__(self, fixtures: Path, delay_s: float) -> None:
        self.fake = ArxivFake(fixtures / "arxiv")
        self.delay_s = delay_s
        self.asked = threading.Event()

    def __call__(self, request: Request) -> Reply:
        self.asked.set()
        return dataclasses.replace(self.fake(request), delay_s=self.delay_s)


@pytest.fixture
def slow_arxiv(fixtures_dir: Path) -> Iterator[tuple[LoopbackServer, SlowArxiv]]:
    route = SlowArxiv(fixtures_dir, delay_s=ARXIV_DELAY_S)
    with LoopbackServer(route) as server:
        yield server, route


def _environment(data_dir: Path, arxiv_url: str, **extra: str) -> dict[str, str]:
    return child_environment(
        {
            "RESEARCHCREW_DATA_DIR": str(data_dir),
            "RESEARCHCREW_ENABLED_SOURCES": '["arxiv", "memory"]',
            "RESEARCHCREW_ARXIV__API_URL": f"{arxiv_url}/api/query",
            "RESEARCHCREW_ARXIV__MIN_INTERVAL_S": "0",
            "RESEARCHCREW_ARXIV__NUM_RETRIES": "0",
            "RESEARCHCREW_ARXIV__TIMEOUT_S": "15",
            "RESEARCHCREW_RETRIEVAL__TIMEOUT_PER_SOURCE_S": "15",
            "RESEARCHCREW_EMBEDDING__CACHE_DIR": str(MODEL_CACHE_DIR),
            **MEMORY_CONNECT_TIMEOUT,
            "GRPC_VERBOSITY": "NONE",
            **extra,
        }
    )


async def _exchanges(url: str, user_id: str) -> list[dict[str, Any]]:
    async with await MemoryStore.open(url) as store:
        return list((await store.export_user(user_id=user_id))["exchanges"])


def _stops_accepting(url: str, *, within_s: float) -> bool:
    """True once a new request to ``url`` is refused (polled: a loaded machine takes a moment to close the socket)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/healthz", timeout=2)
        except httpx.TransportError:
            return True
        time.sleep(0.1)
    return False


def test_sigterm_lets_a_running_answer_finish_and_keeps_its_memory(
    tmp_path: Path, slow_arxiv: tuple[LoopbackServer, SlowArxiv]
) -> None:
    arxiv, route = slow_arxiv
    env = _environment(tmp_path / "data", arxiv.url, RESEARCHCREW_SERVICE__SHUTDOWN_GRACE_S="20")
    with serve("--no-auth", env=env, log_path=tmp_path / "serve.log") as server:
        session_id = httpx.post(f"{server.url}/v1/sessions", json={}).json()["session_id"]
        outcome: dict[str, Any] = {}

        def ask() -> None:
            try:
                outcome["response"] = httpx.post(
                    f"{server.url}/v1/sessions/{session_id}/messages", json={"question": QUESTION}, timeout=60
                )
            except httpx.HTTPError as error:
                outcome["error"] = error

        asker = threading.Thread(target=ask)
        asker.start()
        assert route.asked.wait(30), server.log()  # the answer is being researched (arXiv takes 5 s)
        server.terminate()
        assert _stops_accepting(server.url, within_s=30), server.log()
        assert "response" not in outcome and asker.is_alive()  # ... while the answer was still running
        asker.join(60)
        assert "error" not in outcome, f"{outcome.get('error')!r}\n{server.log()}"
        response = outcome["response"]
        assert response.status_code == 200, response.text
        answer = response.json()
        arxiv_report = next(r for r in answer["source_reports"] if r["source_type"] == "arxiv")
        assert arxiv_report["status"] in ("success", "empty")  # it answered (after the SIGTERM), it did not fail
        assert arxiv_report["latency_ms"] >= ARXIV_DELAY_S * 1000
        # uvicorn shuts down gracefully, then re-raises the signal it caught: the exit status says "SIGTERM"
        assert server.process.wait(60) in (0, -signal.SIGTERM), server.log()

    exchanges = asyncio.run(_exchanges(f"sqlite+aiosqlite:///{tmp_path / 'data' / 'memory.db'}", "local"))
    stored = [(e["response_id"], e["session_id"]) for e in exchanges]
    assert stored == [(answer["response_id"], session_id)], server.log()  # the log says why a write was lost
    assert "Application shutdown complete" in server.log()


@pytest.fixture
def postgres_url(migrated_postgres_template: str) -> Iterator[str]:
    """A copy of the session's migrated database (what the first open would make of an empty one, faster)."""
    with fresh_postgres_database("rc_servetest", template=migrated_postgres_template) as url:
        yield url


@pytest.mark.postgres
@pytest.mark.redis
def test_two_workers_share_postgres_memory_and_redis_limits(
    tmp_path: Path, fixtures_dir: Path, postgres_url: str
) -> None:
    redis = redis_url()
    with LoopbackServer(ArxivFake(fixtures_dir / "arxiv")) as arxiv:
        env = _environment(
            tmp_path / "data",
            arxiv.url,
            RESEARCHCREW_MEMORY__DATABASE_URL=postgres_url,
            RESEARCHCREW_REDIS__URL=redis,
            RESEARCHCREW_SERVICE__RATE_LIMIT=f"{RATE}/minute",
        )
        user = f"ada{uuid.uuid4().hex[:8]}"  # Redis outlives the test: a fresh user has a fresh count
        added = cli("users", "add", user, env=env)
        assert added.returncode == 0, added.stderr
        auth = {"Authorization": f"Bearer {added.stdout.strip()}"}
        with serve("--workers", "2", env=env, log_path=tmp_path / "serve.log", start_timeout_s=180) as server:
            pids: set[int] = set()
            for _ in range(200):  # every request on a new connection, so either worker may take it
                pids.add(httpx.get(f"{server.url}/healthz", headers={"Connection": "close"}).json()["pid"])
                if len(pids) == 2:
                    break
            assert len(pids) == 2, f"one worker answered everything: {pids}"

            statuses: list[int] = []  # of every authenticated request, in order

            def fresh(method: str, path: str, **kwargs: Any) -> httpx.Response:
                with httpx.Client(base_url=server.url, headers=auth, timeout=60) as client:
                    response = client.request(method, path, **kwargs)
                statuses.append(response.status_code)
                return response

            sessions = [fresh("POST", "/v1/sessions", json={}).json()["session_id"] for _ in range(4)]
            for session_id in sessions:
                answer = fresh("POST", f"/v1/sessions/{session_id}/messages", json={"question": QUESTION})
                assert answer.status_code == 200, answer.text
            listed = [fresh("GET", "/v1/sessions").json()["sessions"] for _ in range(6)]
            assert all({s["session_id"] for s in listing} == set(sessions) for listing in listed)
            deadline = time.monotonic() + 30
            counts: list[int] = []
            while time.monotonic() < deadline:  # memory is written in the background, by whichever worker answered
                counts = [fresh("GET", f"/v1/sessions/{s}").json()["session"]["exchanges"] for s in sessions]
                if counts == [1, 1, 1, 1]:
                    break
                time.sleep(0.5)
            assert counts == [1, 1, 1, 1]

            # The rate limit is one count across both workers: request RATE + 1 is the first one refused.
            assert 429 not in statuses and len(statuses) < RATE
            while len(statuses) < RATE + 4:
                fresh("GET", "/v1/sessions")
            assert 429 not in statuses[:RATE]
            assert statuses[RATE:] == [429] * 4
        assert "Finished server process" in server.log()
