"""The official ``openai`` SDK against a real ``researchcrew serve`` process (uvicorn, the app built from the
environment, a key made by ``researchcrew users add``) answering from the demo corpus offline: both modes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.conftest import PROJECT_ROOT
from tests.e2e.support import offline_environment
from tests.helpers.demo_folder import copy_of_the_demo_folder
from tests.loopback.server import closed_port

pytestmark = pytest.mark.slow
QUESTION = "What is metamorphic testing?"


def environment(data_dir: Path) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("RESEARCHCREW_")}
    env.update(offline_environment(data_dir))
    env["PYTHONPATH"] = str(PROJECT_ROOT)  # this checkout's researchcrew, also in the child
    env["RESEARCHCREW_ENABLED_SOURCES"] = '["rag", "web", "arxiv"]'
    return env


def researchcrew(*arguments: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "researchcrew", *arguments],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


@pytest.fixture
def served(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(base URL, key) of a `researchcrew serve` process over the bundled demo corpus (a copy of the run's one
    `researchcrew ingest --demo`, made in its own process: a Milvus Lite file is one process's)."""
    env = environment(copy_of_the_demo_folder(tmp_path_factory, tmp_path / "data"))
    key = json.loads(researchcrew("users", "add", "ada", "--json", env=env).stdout)["key"]
    port = closed_port()
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "researchcrew", "serve", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                pytest.fail(f"researchcrew serve exited: {(tmp_path / 'serve.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{base_url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("researchcrew serve did not answer /healthz within 120 s")
            time.sleep(0.2)
        yield base_url, key
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def test_the_openai_sdk_gets_cited_answers_from_researchcrew_serve(served: tuple[str, str]) -> None:
    base_url, key = served
    # Each client is closed by its `with`: an SDK client left to the garbage collector takes its pooled keep-alive
    # socket along, and whether that socket's finalizer runs before the client's own close is up to the collector
    # (a ResourceWarning, an error here, at session end about one run in two).
    with openai.OpenAI(base_url=f"{base_url}/v1", api_key=key, max_retries=0, timeout=120) as client:
        assert "researchcrew" in [model.id for model in client.models.list()]

        completion = client.chat.completions.create(
            model="researchcrew", messages=[{"role": "user", "content": QUESTION}]
        )
        content = completion.choices[0].message.content or ""
        details = completion.researchcrew  # type: ignore[attr-defined]
        assert "[1]" in content and "**Sources**" in content, content
        assert any("arxiv.org" in (citation["url"] or "") for citation in details["citations"])
        reports = {report["source_type"]: report for report in details["source_reports"]}
        assert reports["rag"]["status"] == "success"
        assert reports["web"]["status"] == "failed" and reports["web"]["failure"]["kind"] == "not_configured"
        assert reports["arxiv"]["status"] == "failed"

        stream = client.chat.completions.create(
            model="researchcrew-concise",
            messages=[
                {"role": "user", "content": QUESTION},
                {"role": "assistant", "content": content},
                {"role": "user", "content": "How are flaky tests detected?"},
            ],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
        reasoning = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices)
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert "✓ knowledge base" in reasoning and "✗ web failed (not configured)" in reasoning
        assert "[1]" in streamed, streamed
        finished = next(c for c in chunks if c.choices and c.choices[0].finish_reason == "stop")
        assert finished.researchcrew["session_id"] == details["session_id"]  # type: ignore[attr-defined]
        assert chunks[-1].usage is not None

    stranger = openai.OpenAI(base_url=f"{base_url}/v1", api_key="rc_000000000000_" + "x" * 43, max_retries=0)
    with stranger, pytest.raises(openai.AuthenticationError):
        stranger.models.list()
