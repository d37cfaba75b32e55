"""The service client without a service: URLs it accepts, problems it raises, and the routes it picks."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from researchcrew import ResearchAssistant
from researchcrew.client import ServiceClient, find_service, problem_of
from researchcrew.errors import ConfigurationError, ServiceError
from researchcrew.testing import FakeTool


@pytest.mark.parametrize("url", ["unix://relative/service.sock", "ftp://host", "127.0.0.1:8000", ""])
def test_a_url_that_is_neither_a_socket_nor_http_is_refused_with_the_accepted_forms(url: str) -> None:
    with pytest.raises(ConfigurationError, match="unix:///"):
        ServiceClient(url)


def test_a_problem_becomes_a_service_error_with_its_detail() -> None:
    error = problem_of(404, '{"type": "about:blank", "title": "Not Found", "status": 404, "detail": "No job x."}')
    assert (error.detail, error.status) == ("No job x.", 404)
    assert problem_of(502, "<html>bad gateway</html>").detail.startswith("the service answered HTTP 502")


async def test_a_refused_connection_is_a_service_error_without_status(tmp_path: Path) -> None:
    async with ServiceClient(f"unix://{tmp_path / 'nobody.sock'}") as client:
        with pytest.raises(ServiceError) as caught:
            await client.identity()
    assert caught.value.status is None and "did not answer" in str(caught.value)


async def test_requests_carry_the_user_and_the_key() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"data_dir": "/d", "pid": 1, "version": "0", "local": True})

    client = ServiceClient("http://svc:8000", api_key="rc_k", user_id="ada", transport=httpx.MockTransport(answer))
    async with client:
        await client.identity()
        await client.request("GET", "/v1/memory", user_id="bob")
    assert seen[0].headers["authorization"] == "Bearer rc_k" and seen[0].headers["x-researchcrew-user"] == "ada"
    assert seen[1].headers["x-researchcrew-user"] == "bob"


def test_no_socket_or_a_file_in_its_place_means_in_process(tmp_path: Path) -> None:
    path = tmp_path / "service.sock"
    assert find_service(tmp_path, path).mode == "local"
    assert "no service is running" in find_service(tmp_path, path).reason
    path.write_text("not a socket")
    assert "is not a socket" in find_service(tmp_path, path).reason
    path.unlink()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()
    route = find_service(tmp_path, path)
    assert route.mode == "local" and "stale socket" in route.reason
    assert "as asked" in find_service(tmp_path, path, local=True).reason


def test_the_sdk_refuses_service_url_with_in_process_parts() -> None:
    with pytest.raises(ConfigurationError, match="service_url"):
        ResearchAssistant(service_url="http://127.0.0.1:8000", tools=[FakeTool("rag")])
    assistant = ResearchAssistant(service_url="http://127.0.0.1:8000")
    with pytest.raises(ConfigurationError, match="ask, ask_sync and stream"):
        _ = assistant.runtime
