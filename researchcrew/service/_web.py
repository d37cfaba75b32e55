"""``GET /``: the web page — enter a key, see your sessions, ask, watch each source answer or fail, read the cited
answer. Static files shipped in the package (``researchcrew/service/static/``), no build step, no CDN; the one
library it uses (markdown-it) is vendored with its license in ``static/vendor/``.

The page talks to the same API as every other client (``/v1/sessions``, the server-sent events of
``POST /v1/sessions/{id}/messages``, ``/readyz``). It shows text that came from sources (web pages among them), so
it is served with a Content-Security-Policy that allows only its own scripts and styles and no inline code, no
framing and no referrer: a passage that slipped markup past the page's escaping still could not run.
"""

from __future__ import annotations

import os
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

STATIC_DIR = Path(__file__).resolve().parent / "static"
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",  # revalidated (ETag) on every load, so an upgrade is seen at once
}

router = APIRouter(include_in_schema=False)


@router.get("/")
async def index() -> Response:
    return FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)


class _StaticFiles(StaticFiles):
    """Starlette's static files with the page's security headers."""

    def file_response(
        self, full_path: str | os.PathLike[str], stat_result: os.stat_result, scope: Scope, status_code: int = 200
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers.update(SECURITY_HEADERS)
        return response


def install(app: FastAPI) -> None:
    """Serve the page at ``/`` and its files under ``/static/``."""
    app.include_router(router)
    app.mount("/static", _StaticFiles(directory=STATIC_DIR), name="static")
