"""A Firecrawl v2 ``/v2/search`` stand-in that replays real recorded results (for ``LoopbackServer``).

Data: ../shared/fixtures/firecrawl/real_mcp_captures — real /v2/search results (``*.data.json``: the ``data``
object) together with the arguments they were made with (``*.request_args.json``), and real /v2/scrape documents.
Wire format: ../shared/fixtures/firecrawl/SCHEMA.md.

What the fake does, as the real server does:
* checks ``Authorization: Bearer <key>`` (401 ``{"success": false, "error": ...}`` otherwise, when a key is set);
* answers the recorded results of a recorded query, and ``{"web": []}`` (a real empty answer) for any other query;
* honours ``limit`` and ``includeDomains``;
* with ``scrapeOptions.formats`` containing markdown, adds the page's ``markdown`` and ``metadata`` to each result
  whose URL has a recorded scrape. Results without one stay plain (as when Firecrawl could not scrape a page).

Faults are separate replies: ``error_reply(429, ...)``, ``Reply(status=500, ...)``, ``Reply(delay_s=...)``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.loopback.server import Reply, Request

SEARCH_PATH = "/v2/search"


def error_reply(status: int, message: str, **kwargs: Any) -> Reply:
    """Firecrawl's error envelope."""
    return Reply.json({"success": False, "error": message}, status=status, **kwargs)


class FirecrawlFake:
    """Route for ``LoopbackServer``: ``LoopbackServer(FirecrawlFake(fixtures_dir / "firecrawl"))``."""

    def __init__(self, firecrawl_fixtures: Path, *, api_key: str | None = "fc-test-key") -> None:
        self.api_key = api_key
        self._captures = captures = firecrawl_fixtures / "real_mcp_captures"
        self.searches: dict[str, list[dict[str, Any]]] = {}
        self.pages: dict[str, dict[str, Any]] = {}
        for data_file in sorted(captures.glob("*.data.json")):
            stem = data_file.name.removesuffix(".data.json")
            args = json.loads((captures / f"{stem}.request_args.json").read_text())
            data = json.loads(data_file.read_text())
            if stem.startswith("search_"):
                self.searches[args["query"]] = data["web"]
            elif stem.startswith("scrape_"):
                self.pages[args["url"]] = data

    def recorded_query(self, capture: str) -> str:
        """The query a search capture was made with, e.g. ``recorded_query("search_8_web_results")``."""
        args = json.loads((self._captures / f"{capture}.request_args.json").read_text())
        return str(args["query"])

    def recorded_results(self, capture: str) -> list[dict[str, Any]]:
        """The recorded web results of a search capture, as the server returned them."""
        return copy.deepcopy(self.searches[self.recorded_query(capture)])

    def __call__(self, request: Request) -> Reply:
        if request.method != "POST" or request.path != SEARCH_PATH:
            return error_reply(404, f"Cannot {request.method} {request.path}")
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return error_reply(401, "Unauthorized: Invalid token")
        try:
            body = request.json()
        except ValueError:
            return error_reply(400, "Bad Request: body is not JSON")
        query = body.get("query") if isinstance(body, dict) else None
        if not isinstance(query, str) or not query.strip():
            return error_reply(400, "Bad Request: query is required")

        web = copy.deepcopy(self.searches.get(query, []))
        include = body.get("includeDomains") or []
        if include:
            web = [item for item in web if _host_in(item["url"], include)]
        web = web[: int(body.get("limit", 5))]
        formats = (body.get("scrapeOptions") or {}).get("formats") or []
        if "markdown" in formats or {"type": "markdown"} in formats:
            for item in web:
                page = self.pages.get(item["url"])
                if page is not None:
                    item["markdown"] = page["markdown"]
                    item["metadata"] = page["metadata"]
        return Reply.json({"success": True, "data": {"web": web}, "creditsUsed": max(1, len(web))})


def _host_in(url: str, domains: list[str]) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return any(host == domain or host.endswith("." + domain) for domain in domains)
