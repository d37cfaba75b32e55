"""A ceiling on how much a source may send: an oversized response is a reported failure, not a memory blow-up.

A broken or hostile server (or a proxy gone wrong) can answer a search with hundreds of megabytes; the SDKs read
every byte into memory before parsing it. Each HTTP-backed source reads through a limit instead:

* ``CappedTransport`` wraps an ``httpx`` async transport (firecrawl-py's client, the Zep client): a declared
  ``Content-Length`` over the limit is refused before the body is read, and a body that streams past it is cut off
  there; both raise ``ResponseTooLargeError``;
* ``read_capped`` does the same for a streamed ``requests`` response (the ``arxiv`` package's session).

The tools map ``ResponseTooLargeError`` to the failure kind ``bad_response`` ("sent more than N MB").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    import requests

MEGABYTE = 1024 * 1024
_READ_CHUNK = 64 * 1024


class ResponseTooLargeError(httpx.TransportError):
    """A response larger than the source's limit (an ``httpx`` transport error, so SDKs pass it through)."""

    def __init__(self, size: int | None, limit: int, *, request: httpx.Request | None = None) -> None:
        what = f"{size / MEGABYTE:.1f} MB" if size is not None else "more"
        super().__init__(f"the response ({what}) exceeds the {limit / MEGABYTE:g} MB limit", request=request)
        self.size = size
        self.limit = limit


class CappedTransport(httpx.AsyncBaseTransport):
    """Reads each response body through a ceiling of ``max_bytes`` (see the module docstring)."""

    def __init__(self, inner: httpx.AsyncBaseTransport | None, max_bytes: int) -> None:
        self._inner = inner or httpx.AsyncHTTPTransport()
        self.max_bytes = max_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await response.aclose()
            raise ResponseTooLargeError(int(declared), self.max_bytes, request=request)
        body = bytearray()
        try:
            async for chunk in response.aiter_raw():
                body += chunk
                if len(body) > self.max_bytes:
                    raise ResponseTooLargeError(None, self.max_bytes, request=request)
        finally:
            await response.aclose()
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            content=bytes(body),
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def read_capped(response: requests.Response, max_bytes: int) -> None:
    """Read a streamed ``requests`` response into ``response.content``, raising ``ResponseTooLargeError`` (and
    closing the connection) when it is larger than ``max_bytes``."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        response.close()
        raise ResponseTooLargeError(int(declared), max_bytes)
    body = bytearray()
    for chunk in response.iter_content(chunk_size=_READ_CHUNK):
        body += chunk
        if len(body) > max_bytes:
            response.close()
            raise ResponseTooLargeError(None, max_bytes)
    # What requests itself does after reading a body: later .content / .text use these bytes.
    response._content = bytes(body)
    response._content_consumed = True  # type: ignore[attr-defined]


__all__ = ["MEGABYTE", "CappedTransport", "ResponseTooLargeError", "read_capped"]
