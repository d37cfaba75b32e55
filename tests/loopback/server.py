"""A small threaded HTTP server on 127.0.0.1 for contract tests.

Each service's fake (Firecrawl, arXiv, Zep, an OpenAI-compatible LLM) is a ``route`` function that turns a recorded
``Request`` into a ``Reply``; the server records every request so tests can assert on paths, headers and bodies.
Faults are replies too: ``Reply(delay_s=...)`` for a slow or hung service, ``Reply(status=429)``, a malformed body,
or ``Reply(drop_connection=True)`` to close the socket without answering. ``closed_port()`` gives a port where
nothing listens (connection refused).

    def route(request: Request) -> Reply:
        return Reply.json({"success": True, "data": {"web": []}})

    with LoopbackServer(route) as server:
        client = SomeSDK(api_url=server.url)
        ...
        assert server.requests[0].path == "/v2/search"
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # without the query string
    query: dict[str, list[str]]
    headers: dict[str, str]  # header names lower-cased
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # sleep before answering (a hang is a delay longer than the client's timeout)
    drop_connection: bool = False  # close the socket without sending a response

    @classmethod
    def json(cls, payload: Any, status: int = 200, **kwargs: Any) -> Reply:
        return cls(status, json.dumps(payload).encode(), {"Content-Type": "application/json"}, **kwargs)

    @classmethod
    def text(cls, text: str | bytes, status: int = 200, content_type: str = "text/plain", **kwargs: Any) -> Reply:
        body = text.encode() if isinstance(text, str) else text
        return cls(status, body, {"Content-Type": content_type}, **kwargs)


Route = Callable[[Request], Reply]


class LoopbackServer:
    """Serve ``route`` on 127.0.0.1 (a free port) in a background thread; use as a context manager."""

    def __init__(self, route: Route, *, port: int = 0) -> None:
        """``port=0`` picks a free port; a fixed port lets a test bring a service back where it was (after
        ``closed_port()``, for "down, then back")."""
        self.route = route
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out as two writes; with Nagle on, the body waits for the client's delayed ACK
            # (~40 ms per request on Linux). Keep-alive clients would see every request take that long.
            disable_nagle_algorithm = True

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                request = Request(
                    method=self.command,
                    path=parts.path,
                    query=parse_qs(parts.query),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
                with server._lock:
                    server.requests.append(request)
                reply = server.route(request)
                if reply.delay_s:
                    # Wake early when the server stops so that a "hung" reply never outlives its test.
                    server._stopping.wait(reply.delay_s)
                if reply.drop_connection or server._stopping.is_set():
                    self.close_connection = True
                    return
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                return

        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._httpd.daemon_threads = True
        # A short poll interval: shutdown() waits for the serve loop's next poll (0.5 s by default, per server).
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="loopback-server", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LoopbackServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def requests_to(self, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def closed_port() -> int:
    """A loopback port with nothing listening on it: connecting is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    return port


def wait_until(predicate: Callable[[], bool], timeout_s: float = 5.0, interval_s: float = 0.01) -> bool:
    """Poll ``predicate`` until it holds or ``timeout_s`` passes; returns whether it held."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return predicate()
