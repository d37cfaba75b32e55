"""Finished-run webhooks against a loopback receiver (allowed through ``webhooks.allow``: by default the address
policy refuses loopback, see test_webhook_policy.py): signed with the job's secret, retried with backoff on 5xx and
connection errors, not retried on a refusal, the outcome stored on the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from researchcrew.jobs.api import Jobs
from researchcrew.jobs.webhooks import SIGNATURE_HEADER, sign, verify_signature
from researchcrew.runtime import open_runtime
from researchcrew.settings import JobsSettings, Settings, WebhooksSettings
from researchcrew.testing import FakeTool, fake_chunk
from tests.loopback.server import LoopbackServer, Reply, Request, closed_port


def _settings(tmp_path: Path) -> Settings:
    jobs = JobsSettings(retry_backoff_s=0.01, retry_backoff_max_s=0.05, webhook_attempts=4, webhook_timeout_s=2)
    return Settings(data_dir=tmp_path / "data", jobs=jobs, webhooks=WebhooksSettings(allow=["127.0.0.1"]))


async def _run_with_webhook(tmp_path: Path, url: str) -> tuple[Any, str]:
    tool = FakeTool("rag", chunks=[fake_chunk("rag", 1, content="Flaky tests fail at random.", semantic_relevance=0.9)])
    async with open_runtime(_settings(tmp_path), tools=[tool], remember=False) as runtime:
        jobs = Jobs(runtime)
        created = await jobs.create("ada", name="hooked", questions=["What is a flaky test?"], webhook_url=url)
        assert created.webhook_secret is not None
        run = await jobs.run("ada", "hooked")
        return await jobs.status("ada", run.id), created.webhook_secret


async def test_a_finished_run_is_posted_signed_after_transient_failures(tmp_path: Path) -> None:
    answers = iter([Reply.text("busy", status=503), Reply(drop_connection=True), Reply.json({"ok": True})])

    def receiver(request: Request) -> Reply:
        return next(answers)

    with LoopbackServer(receiver) as server:
        run, secret = await _run_with_webhook(tmp_path, f"{server.url}/hooks/researchcrew")
    assert (run.webhook_state, run.webhook_error) == ("delivered", None)
    deliveries = server.requests_to("/hooks/researchcrew")
    assert len(deliveries) == 3
    last = deliveries[-1]
    assert verify_signature(secret, last.body, last.headers[SIGNATURE_HEADER.lower()])
    assert not verify_signature("another-secret", last.body, last.headers[SIGNATURE_HEADER.lower()])
    assert last.headers["x-researchcrew-event"] == "run.finished"
    assert {request.headers["x-researchcrew-delivery"] for request in deliveries} == {run.id}
    payload = last.json()
    assert payload["event"] == "run.finished" and payload["run"]["id"] == run.id
    assert payload["run"]["status"] == "completed" and payload["run"]["counts"]["answered"] == 1
    assert all(request.body == last.body for request in deliveries)  # the same signed body on every retry


async def test_a_refusal_is_not_retried_and_an_unreachable_receiver_fails_after_the_attempts(tmp_path: Path) -> None:
    with LoopbackServer(lambda request: Reply.text("no such hook", status=404)) as server:
        run, _ = await _run_with_webhook(tmp_path / "a", f"{server.url}/gone")
    assert (run.webhook_state, run.webhook_error) == ("failed", "HTTP 404")
    assert len(server.requests) == 1

    run, _ = await _run_with_webhook(tmp_path / "b", f"http://127.0.0.1:{closed_port()}/hook")
    # A closed port says no more than "delivery failed" (the same as a timeout or a broken answer: no port scanner).
    assert (run.webhook_state, run.webhook_error) == ("failed", "delivery failed")


@pytest.mark.parametrize("body", [b"", b'{"a": 1}', "ünïcödé".encode()])
def test_signatures_are_hmac_sha256_of_the_body(body: bytes) -> None:
    import hashlib
    import hmac

    assert sign("s3cret", body) == "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert not verify_signature("s3cret", body + b" ", sign("s3cret", body))
    assert not verify_signature("s3cret", body, None)
