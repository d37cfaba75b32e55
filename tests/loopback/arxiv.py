"""An arXiv ``/api/query`` stand-in that replays real recorded Atom feeds (for ``LoopbackServer``).

Data: ../shared/fixtures/arxiv/recorded_json — real responses of export.arxiv.org with the URL that produced each
(``{"url", "status_code", "body"}``, body as latin-1 of the UTF-8 bytes; see the fixtures' SOURCE.txt). A request
is answered with the recording whose ``search_query``, ``id_list`` and ``start`` match, the way arXiv would:

* ``max_results`` smaller than the recording's keeps only the first entries;
* ``sortBy=submittedDate``/``lastUpdatedDate`` reorders the recorded entries by that date (``sortOrder`` honoured);
* a query nobody recorded gets the recorded zero-results feed (a real empty answer);
* ``id_list=abc`` gets the recorded HTTP 400 error feed ("incorrect id format for abc").

Every request is kept with its arrival time (``time.monotonic()``) in ``arrivals`` so tests can check pacing.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from tests.loopback.server import Reply, Request

QUERY_PATH = "/api/query"
ATOM = "application/atom+xml; charset=utf-8"
_ENTRY = re.compile(rb"[ \t]*<entry>.*?</entry>\s*", re.S)
_DATE = {"submittedDate": rb"<published>([^<]+)</published>", "lastUpdatedDate": rb"<updated>([^<]+)</updated>"}

Key = tuple[str, str, str]  # (search_query, id_list, start)


class ArxivFake:
    """Route for ``LoopbackServer``: ``LoopbackServer(ArxivFake(fixtures_dir / "arxiv"))``."""

    def __init__(self, arxiv_fixtures: Path) -> None:
        self.recordings: dict[Key, tuple[int, bytes, int]] = {}  # key -> (status, body, recorded max_results)
        for path in sorted((arxiv_fixtures / "recorded_json").glob("*.json")):
            recording = json.loads(path.read_text())
            params = _params(urlsplit(recording["url"]).query)
            body = recording["body"].encode("latin-1")  # back to the UTF-8 bytes arXiv sent
            self.recordings[_key(params)] = (recording["status_code"], body, int(params.get("max_results", "10")))
        self.zero_results = self.recordings[("", "0000.0000", "0")][1]
        self.arrivals: list[tuple[float, Request]] = []
        self._lock = threading.Lock()

    def times(self) -> list[float]:
        with self._lock:
            return [arrived for arrived, _ in self.arrivals]

    def __call__(self, request: Request) -> Reply:
        with self._lock:
            self.arrivals.append((time.monotonic(), request))
        if request.method != "GET" or request.path != QUERY_PATH:
            return Reply.text("Not Found", status=404)
        params = {name: values[0] for name, values in request.query.items()}
        status, body, _ = self.recordings.get(_key(params), (200, self.zero_results, 0))
        if status == 200:
            body = _reshape(body, params)
        return Reply.text(body, status=status, content_type=ATOM)


def _params(query: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(query, keep_blank_values=True).items()}


def _key(params: dict[str, str]) -> Key:
    return (params.get("search_query", ""), params.get("id_list", ""), params.get("start", "0"))


def _reshape(feed: bytes, params: dict[str, str]) -> bytes:
    """Apply sortBy/sortOrder and max_results to a recorded feed, leaving every byte of each entry as recorded."""
    entries = _ENTRY.findall(feed)
    if not entries:
        return feed
    sort_by = params.get("sortBy", "relevance")
    if sort_by in _DATE:
        pattern = re.compile(_DATE[sort_by])
        entries.sort(key=lambda entry: _first(pattern, entry), reverse=params.get("sortOrder") != "ascending")
    limit = int(params.get("max_results", "10"))
    head = feed[: feed.index(b"<entry>")]
    return head.rstrip(b" \t") + b"".join(entries[:limit]) + b"</feed>\n"


def _first(pattern: re.Pattern[bytes], entry: bytes) -> bytes:
    match = pattern.search(entry)
    return match.group(1) if match else b""
