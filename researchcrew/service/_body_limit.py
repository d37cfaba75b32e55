"""Refuse request bodies over ``service.max_body_bytes`` with 413, before any route parses them.

Pure ASGI: a declared ``Content-Length`` over the limit is refused at once; otherwise the body is read (it is
small by construction) and counted, refused when it grows past the limit (chunked uploads have no length), and
handed to the app as one message. Later ``receive`` calls go to the server, so disconnects still arrive.

``routes`` gives some paths a limit of their own (document uploads: ``documents.max_file_bytes`` and a form's
overhead).
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from researchcrew.service._problems import problem_response


class BodyLimit:
    def __init__(self, app: ASGIApp, *, max_bytes: int, routes: Mapping[str, int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.routes = dict(routes or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS", "DELETE"):
            await self.app(scope, receive, send)
            return
        limit = self.routes.get(scope.get("path", ""), self.max_bytes)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await self._refuse(scope, receive, send, limit)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > limit:
                await self._refuse(scope, receive, send, limit)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        response = problem_response(413, f"The request body is larger than {limit} bytes.", kind="payload-too-large")
        await response(scope, receive, send)
