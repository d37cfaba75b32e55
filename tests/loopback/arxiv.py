"""An arXiv ``/api/query`` stand-in that replays real recorded Atom feeds (for ``LoopbackServer``).

Data: ../shared/fixtures/arxiv/recorded_json — real responses of export.arxiv.org with the URL that produced each
(``{"url", "status_code", "body"}``, body as latin-1 of the UTF-8 bytes; see the fixtures' SOURCE.txt). A request
is answered with the recording whose ``search_query``, ``id_list`` and ``start`` match, the way arXiv would:

* ``max_results`` smaller than the recording's keeps only the first entries;
* ``sortBy=submittedDate``/``lastUpdatedDate`` reorders the recorded entries by that date (``sortOrder`` honoured);
* a query nobody recorded gets the recorded zero-results feed (a real empty answer);
* ``id_list=abc`` gets the recorded HTTP 400 error feed ("incorrect id format for abc");
* an ``id_list`` of several ids nobody recorded together gets the entries of each id's own recording (an id without
  a version matches a recording of any version of it), as arXiv answers a list with the papers it has.

More recordings in the same format can be given as extra folders (the reference corpus ships its cited papers' feeds,
``researchcrew/data/reference_corpus/arxiv``; ``recording_for`` writes one from a demo-corpus record).

Every request is kept with its arrival time (``time.monotonic()``) in ``arrivals`` so tests can check pacing.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit
from xml.sax.saxutils import escape

from tests.loopback.server import Reply, Request

QUERY_PATH = "/api/query"
ATOM = "application/atom+xml; charset=utf-8"
_ENTRY = re.compile(rb"[ \t]*<entry>.*?</entry>\s*", re.S)
_DATE = {"submittedDate": rb"<published>([^<]+)</published>", "lastUpdatedDate": rb"<updated>([^<]+)</updated>"}

_VERSION = re.compile(r"v\d+$")
Key = tuple[str, str, str]  # (search_query, id_list, start)


class ArxivFake:
    """Route for ``LoopbackServer``: ``LoopbackServer(ArxivFake(fixtures_dir / "arxiv"))``."""

    def __init__(self, arxiv_fixtures: Path, *extra: Path) -> None:
        self.recordings: dict[Key, tuple[int, bytes, int]] = {}  # key -> (status, body, recorded max_results)
        paths = [*sorted((arxiv_fixtures / "recorded_json").glob("*.json"))]
        paths += [path for folder in extra for path in sorted(folder.glob("*.json"))]
        for path in paths:
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
        recorded = self.recordings.get(_key(params))
        status, body, _ = recorded or (200, self._by_parts(params.get("id_list", "")) or self.zero_results, 0)
        if status == 200:
            body = _reshape(body, params)
        return Reply.text(body, status=status, content_type=ATOM)

    def _by_parts(self, id_list: str) -> bytes | None:
        """A feed of the entries recorded for each id of a list that was not recorded as a whole (None: none)."""
        ids = [part for part in id_list.split(",") if part]
        if len(ids) < 2:
            return None
        singles: dict[str, bytes] = {}
        for (query, recorded_ids, start), (status, body, _) in self.recordings.items():
            if not query and start == "0" and status == 200 and "," not in recorded_ids:
                singles.setdefault(recorded_ids, body)
                singles.setdefault(_VERSION.sub("", recorded_ids), body)
        bodies = [singles.get(arxiv_id) or singles.get(_VERSION.sub("", arxiv_id)) for arxiv_id in ids]
        entries = [entry for body in bodies if body for entry in _ENTRY.findall(body)]
        if not entries:
            return None
        head = self.zero_results[: self.zero_results.index(b"</feed>")]
        head = re.sub(rb"<opensearch:totalResults>0<", b"<opensearch:totalResults>%d<" % len(entries), head)
        return head.rstrip(b" \t") + b"".join(entries) + b"</feed>\n"


def recording_for(record: dict[str, Any]) -> dict[str, Any]:
    """A recorded-format response (``{"url", "status_code", "body"}``) for an ``id_list`` request of one paper,
    written from a demo-corpus record (real arXiv metadata, CC0) in the Atom format of arXiv's recorded feeds."""
    short_id = str(record["id"]).rsplit("/abs/", 1)[-1]
    id_list = _VERSION.sub("", short_id)
    query = f"search_query=&id_list={id_list}&sortBy=relevance&sortOrder=descending&start=0&max_results=100"
    authors = "".join(f"    <author>\n      <name>{escape(name)}</name>\n    </author>\n" for name in record["authors"])
    categories = "".join(
        f'    <category term="{escape(term)}" scheme="http://arxiv.org/schemas/atom"/>\n'
        for term in record["categories"]
    )
    body = (
        "<?xml version='1.0' encoding='UTF-8'?>\n"
        '<feed xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/" xmlns:arxiv="http://arxiv.org/schemas/atom" '
        'xmlns="http://www.w3.org/2005/Atom">\n'
        f"  <id>https://arxiv.org/api/reference-corpus/{id_list}</id>\n"
        f"  <title>arXiv Query: {escape(query)}</title>\n"
        f"  <updated>{record['updated']}</updated>\n"
        f'  <link href="https://arxiv.org/api/query?{escape(query)}" type="application/atom+xml"/>\n'
        "  <opensearch:itemsPerPage>100</opensearch:itemsPerPage>\n"
        "  <opensearch:totalResults>1</opensearch:totalResults>\n"
        "  <opensearch:startIndex>0</opensearch:startIndex>\n"
        "  <entry>\n"
        f"    <id>http://arxiv.org/abs/{short_id}</id>\n"
        f"    <title>{escape(record['title'])}</title>\n"
        f"    <updated>{record['updated']}</updated>\n"
        f'    <link href="https://arxiv.org/abs/{short_id}" rel="alternate" type="text/html"/>\n'
        f'    <link href="https://arxiv.org/pdf/{short_id}" rel="related" type="application/pdf" title="pdf"/>\n'
        f"    <summary>{escape(record['abstract'])}</summary>\n"
        f"{categories}"
        f"    <published>{record['published']}</published>\n"
        f'    <arxiv:primary_category term="{escape(record["primary_category"])}"/>\n'
        f"{authors}"
        "  </entry>\n"
        "</feed>\n"
    )
    return {
        "url": f"https://export.arxiv.org/api/query?{query}",
        "status_code": 200,
        "body": body.encode("utf-8").decode("latin-1"),
    }


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
