"""A webhook URL the address policy refuses is a 422 wherever one is given over HTTP — POST /v1/jobs, the upload's
`webhook_url`, POST /kickoff's `crewWebhookUrl` and `webhooks.url` — and nothing is stored; a public URL, or a
private one the deployment allows, is accepted."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from researchcrew.settings import WebhooksSettings
from tests.service.jobs_support import QUESTIONS, jobs_service, jobs_settings
from tests.service.support import ServiceHarness
from tests.service.test_api import assert_problem

REFUSED = [
    "http://127.0.0.1/hook",
    "http://127.0.0.1:8080/hook",
    "http://localhost/hook",
    "http://LOCALHOST./hook",
    "http://api.localhost/hook",
    "http://[::1]/hook",
    "http://0.0.0.0/hook",
    "http://0/hook",
    "http://2130706433/hook",
    "http://0x7f000001/hook",
    "http://017700000001/hook",
    "http://127.1/hook",
    "http://user@127.0.0.1/hook",
    "http://user:pw@hooks.example.com/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://[::ffff:127.0.0.1]/hook",
    "http://[::ffff:169.254.169.254]/hook",
    "http://[fe80::1]/hook",
    "http://10.0.0.1/hook",
    "http://192.168.1.1/hook",
    "http://172.16.0.1/hook",
    "http://100.64.0.1/hook",
    "http://224.0.0.1/hook",
    "http://[fd00::1]/hook",
    "http://[2002:7f00:1::]/hook",
    "http://[64:ff9b::7f00:1]/hook",
    "ftp://hooks.example.com/hook",
]


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[ServiceHarness]:
    async with jobs_service(jobs_settings(tmp_path)) as harness:
        yield harness


@pytest.fixture
async def client(app: ServiceHarness) -> AsyncIterator[httpx.AsyncClient]:
    async with app.client() as http:
        yield http


async def _refused(response: httpx.Response, url: str, field: str) -> None:
    problem = assert_problem(response, 422)
    assert field in response.text, (url, problem)


async def test_every_refused_spelling_is_a_422_when_creating_a_job(
    client: httpx.AsyncClient, app: ServiceHarness
) -> None:
    for n, url in enumerate(REFUSED):
        body = {"name": f"hooked-{n}", "questions": QUESTIONS, "webhook_url": url}
        await _refused(await client.post("/v1/jobs", headers=app.auth("ada"), json=body), url, "webhook_url")
        response = await client.post(
            "/v1/jobs/upload",
            params={"name": f"uploaded-{n}", "filename": "q.txt", "webhook_url": url},
            content="\n".join(QUESTIONS).encode(),
            headers={**app.auth("ada"), "Content-Type": "text/plain"},
        )
        await _refused(response, url, "webhook_url")
    assert (await client.get("/v1/jobs", headers=app.auth("ada"))).json() == {"jobs": []}


async def test_every_refused_spelling_is_a_422_at_kickoff(client: httpx.AsyncClient, app: ServiceHarness) -> None:
    inputs = {"question": QUESTIONS[0]}
    for url in REFUSED:
        for field, body in (
            ("crewWebhookUrl", {"inputs": inputs, "crewWebhookUrl": url}),
            ("webhooks.url", {"inputs": inputs, "webhooks": {"url": url}}),
        ):
            response = await client.post("/kickoff", headers=app.auth("ada"), json=body)
            await _refused(response, url, field)
    assert (await client.get("/v1/jobs", headers=app.auth("ada"))).json() == {"jobs": []}


async def test_a_refusal_says_why_and_how_a_deployment_allows_it(
    client: httpx.AsyncClient, app: ServiceHarness
) -> None:
    body = {"name": "metadata", "questions": QUESTIONS, "webhook_url": "http://2852039166/latest"}
    problem = assert_problem(await client.post("/v1/jobs", headers=app.auth("ada"), json=body), 422)
    assert "169.254.169.254" in problem["detail"] and "cloud metadata" in problem["detail"]
    assert "RESEARCHCREW_WEBHOOKS__ALLOW" in problem["detail"]


async def test_public_urls_are_accepted_and_allowed_private_ones_too(tmp_path: Path) -> None:
    allowed = jobs_settings(tmp_path).model_copy(
        update={"webhooks": WebhooksSettings(allow=["10.0.0.0/8", "hooks.internal"])}
    )
    async with jobs_service(allowed) as app, app.client() as client:
        accepted: list[tuple[str, dict[str, Any]]] = [
            ("/v1/jobs", {"name": "public", "questions": QUESTIONS, "webhook_url": "https://hooks.example.com/x"}),
            ("/v1/jobs", {"name": "private", "questions": QUESTIONS, "webhook_url": "http://10.1.2.3:9000/x"}),
            ("/v1/jobs", {"name": "named", "questions": QUESTIONS, "webhook_url": "http://hooks.internal/x"}),
        ]
        for path, body in accepted:
            response = await client.post(path, headers=app.auth("ada"), json=body)
            assert response.status_code == 201, response.text
            assert response.json()["webhook_secret"]
        refused = {"name": "other", "questions": QUESTIONS, "webhook_url": "http://192.168.1.1/x"}
        assert_problem(await client.post("/v1/jobs", headers=app.auth("ada"), json=refused), 422)
