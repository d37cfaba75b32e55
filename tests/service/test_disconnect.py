"""A client that goes away cancels the work for it; an answer that did complete is still remembered. Served by a
real uvicorn (in a thread) so that disconnects are real TCP disconnects."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import httpx

from researchcrew.contracts import ContextChunk
from researchcrew.runtime import open_runtime
from researchcrew.service._app import create_app
from researchcrew.service.accounts import Accounts
from researchcrew.testing import fake_chunk
from researchcrew.tools.base import Tool
from tests.service.support import EVIDENCE, QUESTION, live_server, service_settings


class SlowSource(Tool):
    """Answers after ``delay_s``; records whether it was cancelled first."""

    name: ClassVar[str] = "slow_rag"
    description: ClassVar[str] = "A slow in-process source."
    source_type: ClassVar[str] = "rag"

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.started = threading.Event()
        self.cancelled = threading.Event()
        self.finished = threading.Event()

    async def _search(self, query: str, **_: Any) -> Sequence[ContextChunk]:
        self.started.set()
        try:
            await asyncio.sleep(self.delay_s)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        self.finished.set()
        return [fake_chunk("rag", 1, content=EVIDENCE, semantic_relevance=0.9)]


def _serve(tmp_path: Path, tool: Tool) -> Any:
    settings = service_settings(tmp_path, auth=False)
    runtime = open_runtime(settings, tools=[tool])
    return runtime, create_app(settings, runtime=runtime)


def _session(base: str) -> str:
    return str(httpx.post(f"{base}/v1/sessions", json={}).json()["session_id"])


def test_closing_the_event_stream_cancels_the_question(tmp_path: Path) -> None:
    source = SlowSource(delay_s=5.0)
    runtime, app = _serve(tmp_path, source)
    with live_server(app) as server:
        url = f"{server.url}/v1/sessions/{_session(server.url)}/messages"
        with (
            httpx.Client(timeout=10) as client,
            client.stream("POST", url, json={"question": QUESTION}, headers={"Accept": "text/event-stream"}) as r,
        ):
            for line in r.iter_lines():
                if line.startswith("data:") and '"stage":"retrieve","status":"started"' in line:
                    break
            assert source.started.wait(5)
        # the client is gone: the source is cancelled long before its 5 s are up
        assert source.cancelled.wait(3), "the question kept running after the client left"
        assert not source.finished.is_set()
        store = server.run_in_loop(runtime.memory_store())
        assert server.run_in_loop(runtime.flush_memory(timeout_s=60))
        assert server.run_in_loop(store.export_user(user_id="local"))["exchanges"] == []
        assert app.state.service.throttle.running("local") == 0  # its place was given back
    asyncio.run(runtime.aclose())


def test_a_plain_request_abandoned_by_its_client_is_cancelled_too(tmp_path: Path) -> None:
    source = SlowSource(delay_s=5.0)
    runtime, app = _serve(tmp_path, source)
    with live_server(app) as server:
        url = f"{server.url}/v1/sessions/{_session(server.url)}/messages"
        started = time.monotonic()
        with contextlib.suppress(httpx.ReadTimeout):  # the client gives up after 0.5 s
            httpx.post(url, json={"question": QUESTION}, timeout=httpx.Timeout(10, read=0.5))
        assert source.cancelled.wait(3)
        assert time.monotonic() - started < 4
        assert not source.finished.is_set()
    asyncio.run(runtime.aclose())


def test_an_answer_that_completed_is_remembered_although_the_client_left(tmp_path: Path) -> None:
    source = SlowSource(delay_s=0.05)
    runtime, app = _serve(tmp_path, source)
    with live_server(app) as server:
        session_id = _session(server.url)
        url = f"{server.url}/v1/sessions/{session_id}/messages"
        with (
            httpx.Client(timeout=10) as client,
            client.stream("POST", url, json={"question": QUESTION}, headers={"Accept": "text/event-stream"}) as r,
        ):
            for line in r.iter_lines():
                if '"stage":"remember","status":"finished"' in line:
                    break  # leave before the answer is delivered
        assert server.run_in_loop(runtime.flush_memory(timeout_s=60))
        store = server.run_in_loop(runtime.memory_store())
        exchanges = server.run_in_loop(store.export_user(user_id="local"))["exchanges"]
        assert [(e["session_id"], e["question"]) for e in exchanges] == [(session_id, QUESTION)]
        assert server.run_in_loop(Accounts(store).count_active()) == 0  # no users needed with auth off
    asyncio.run(runtime.aclose())
