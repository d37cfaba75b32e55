"""The loopback server the contract tests rely on behaves as documented."""

from __future__ import annotations

import httpx
import pytest

from tests.loopback.server import LoopbackServer, Reply, Request, closed_port


def test_records_requests_and_replies_json() -> None:
    def route(request: Request) -> Reply:
        return Reply.json({"path": request.path, "got": request.json()}, status=201)

    with LoopbackServer(route) as server:
        response = httpx.post(f"{server.url}/v2/search?x=1", json={"q": "a"}, headers={"Authorization": "Bearer k"})
    assert response.status_code == 201
    assert response.json() == {"path": "/v2/search", "got": {"q": "a"}}
    (request,) = server.requests
    assert request.query == {"x": ["1"]}
    assert request.headers["authorization"] == "Bearer k"


def test_slow_reply_times_out_client_and_stop_does_not_wait_for_it() -> None:
    with LoopbackServer(lambda _: Reply.json({}, delay_s=30)) as server, pytest.raises(httpx.ReadTimeout):
        httpx.get(server.url, timeout=0.2)


def test_closed_port_refuses() -> None:
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{closed_port()}/", timeout=2)


def test_dropped_connection_is_a_protocol_error() -> None:
    with LoopbackServer(lambda _: Reply(drop_connection=True)) as server, pytest.raises(httpx.RemoteProtocolError):
        httpx.get(server.url, timeout=2)
