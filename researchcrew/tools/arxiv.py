"""arXiv search through the ``arxiv`` package, paced and cached as arXiv's API terms ask.

arXiv's terms (info.arxiv.org/help/api/tou.html): "make no more than one request every three seconds, and limit
requests to a single connection at a time". This module enforces both *per process*, and the interval across
processes too when they share a Redis (``tools/limits.py``: the spacer asks the shared pacer for its turn as well):

* every arXiv API host has one ``RequestSpacer`` (``spacer_for``), shared by all ``ArxivTool`` instances;
* a spacer runs the blocking ``arxiv.Client`` calls on its own single worker thread — off the event loop, one at a
  time, in arrival order (callers queue; nobody is dropped) — and the tool's ``requests`` session asks the spacer
  for its turn before *every* HTTP request, so page 2 of a result set and retries are paced like first pages.

A dedicated worker rather than ``asyncio.to_thread``: requests waiting for their turn then sit in a queue instead
of each holding a thread of the shared default executor (which the embedder and pymilvus also use).

A call whose time runs out while it still waits for its turn (four questions at once queue 3 s apart, across every
worker) is reported as a timeout ``queued`` behind our own pacing (``tools/base.py``): arXiv was not asked, so it is
not backed off for it (``tools/health.py``); a request that was sent and then got no answer is arXiv's timeout.

Identical queries (query, num_results, sort_by) are answered from a bounded TTL cache, and concurrent identical
queries on one event loop share one request. Failures are not cached.

The ``arxiv`` package has two gaps we fill through its only seam, ``Client._session``: it sends requests without a
timeout (we set the source's timeout, ``settings.effective_timeout_s``), and on HTTP errors it keeps the status but
drops the body, where arXiv puts its error message (``incorrect id format for abc``); our session keeps the last
response so we can report it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import threading
import time
import xml.etree.ElementTree as ET
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar
from urllib.parse import urlsplit

import arxiv
import requests

from researchcrew.contracts.chunks import ContextChunk
from researchcrew.errors import ToolError
from researchcrew.net.response_limits import MEGABYTE, ResponseTooLargeError, read_capped
from researchcrew.settings import ArxivSettings
from researchcrew.tools.base import Tool, current_call, rank_relevance

if TYPE_CHECKING:
    from researchcrew.tools.limits import SharedPacer

logger = logging.getLogger(__name__)

T = TypeVar("T")
SortBy = Literal["relevance", "date"]

MAX_RESULTS = 100
MAX_QUERY_CHARS = 300  # arXiv's query parser fails on very long free text; a question never needs more
_ATOM = "{http://www.w3.org/2005/Atom}"
# A query made only of arXiv identifiers (new style 2104.12255v1, old style astro-ph/0601001) is an id lookup.
_ARXIV_ID = re.compile(r"(?:arxiv:)?(\d{4}\.\d{4,5}(?:v\d+)?|[a-z][a-z\-]*(?:\.[a-z]{2})?/\d{7}(?:v\d+)?)", re.I)
_SORT_CRITERIA = {"relevance": arxiv.SortCriterion.Relevance, "date": arxiv.SortCriterion.SubmittedDate}
_DATE_SORT_RELEVANCE = 0.5  # a date-sorted list says nothing about relevance: every hit gets the same neutral prior


class RequestSpacer:
    """Runs blocking calls one at a time on its own thread and spaces their HTTP requests ``min_interval_s`` apart.

    ``run(fn)`` queues ``fn`` (FIFO) on the single worker; code inside ``fn`` calls ``wait_turn()`` right before
    each HTTP request. ``clock``/``sleep`` are injectable so tests can check the pacing without waiting.
    """

    def __init__(
        self,
        min_interval_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.min_interval_s = min_interval_s
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._last_start: float | None = None
        self._executor: ThreadPoolExecutor | None = None
        self.request_starts: list[float] = []  # clock() at each request start (the most recent 1000)
        self.shared: SharedPacer | None = None  # the pacing shared with other processes (through Redis), if any

    async def run(self, fn: Callable[[], T]) -> T:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arxiv-api")
            executor = self._executor
        return await asyncio.get_running_loop().run_in_executor(executor, fn)

    def wait_turn(self) -> None:
        """Block (on the worker thread) until ``min_interval_s`` has passed since the previous request started."""
        with self._lock:
            if self._last_start is not None:
                wait = self._last_start + self.min_interval_s - self._clock()
                if wait > 0:
                    logger.debug("arXiv pacing: waiting %.3f s for the next request slot", wait)
                    self._sleep(wait)
            if self.shared is not None:  # after the local wait: other processes may have asked meanwhile
                self.shared.wait_turn()
            self._last_start = self._clock()
            self.request_starts.append(self._last_start)
            del self.request_starts[:-1000]

    def close(self) -> None:
        """Stop the worker thread; calls still queued are cancelled."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


_SPACERS: dict[str, RequestSpacer] = {}
_SPACERS_LOCK = threading.Lock()


def spacer_for(api_url: str, min_interval_s: float, *, shared: SharedPacer | None = None) -> RequestSpacer:
    """The process-wide spacer of an arXiv API host; the strictest interval asked for wins. ``shared`` makes it
    also wait for the pacing shared with other processes (the tool built last decides: one runtime per process)."""
    host = urlsplit(api_url).netloc.lower()
    with _SPACERS_LOCK:
        spacer = _SPACERS.get(host)
        if spacer is None:
            spacer = _SPACERS[host] = RequestSpacer(min_interval_s)
        else:
            spacer.min_interval_s = max(spacer.min_interval_s, min_interval_s)
        spacer.shared = shared
        return spacer


class _PacedSession(requests.Session):
    """The ``arxiv.Client``'s session: a default timeout, a turn from the spacer, and the last response kept."""

    def __init__(self, spacer: RequestSpacer, timeout_s: float, max_bytes: int = 32 * MEGABYTE) -> None:
        super().__init__()
        self.spacer = spacer
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self._local = threading.local()

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", self.timeout_s)
        kwargs["stream"] = True  # read through the size limit below, not all at once
        self._local.last_response = None
        self.spacer.wait_turn()
        sent: _Sent | None = getattr(self._local, "sent", None)
        if sent is not None:  # the call's turn came: from now on a timeout is arXiv's, not our queue's
            sent.at = time.monotonic()
        response = super().request(method, url, *args, **kwargs)
        read_capped(response, self.max_bytes)
        self._local.last_response = response
        return response

    def sending_for(self, sent: _Sent | None) -> None:
        """Requests this thread makes from now on are ``sent``'s (stamped when their turn comes)."""
        self._local.sent = sent

    @property
    def last_response(self) -> requests.Response | None:
        """The last response this thread received (requests run on the spacer's one worker thread)."""
        response: requests.Response | None = getattr(self._local, "last_response", None)
        return response


@dataclass(frozen=True)
class _Query:
    """What one search asks arXiv; also the cache key."""

    search_query: str
    id_list: tuple[str, ...]
    num_results: int
    sort_by: SortBy


class _TTLCache:
    """A small LRU cache whose entries expire ``ttl_s`` after they were stored. Thread-safe."""

    def __init__(self, ttl_s: float, max_size: int, clock: Callable[[], float]) -> None:
        self.ttl_s, self.max_size, self._clock = ttl_s, max_size, clock
        self._entries: OrderedDict[_Query, tuple[float, list[ContextChunk]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: _Query) -> list[ContextChunk] | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if self._clock() - entry[0] >= self.ttl_s:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return [chunk.model_copy(deep=True) for chunk in entry[1]]

    def put(self, key: _Query, chunks: list[ContextChunk]) -> None:
        if self.ttl_s <= 0 or self.max_size <= 0:
            return
        with self._lock:
            self._entries[key] = (self._clock(), [chunk.model_copy(deep=True) for chunk in chunks])
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


@dataclass
class _Sent:
    """When one fetch's latest request left for arXiv (``time.monotonic()``); None while it waits for its turn."""

    at: float | None = None


@dataclass
class _Flight:
    task: asyncio.Task[list[ContextChunk]]
    sent: _Sent
    waiters: int = 0


class ArxivTool(Tool):
    """Search arXiv; each hit is its abstract, with id, authors, categories and dates."""

    name: ClassVar[str] = "academic_search"
    description: ClassVar[str] = (
        "Search arXiv for scientific papers; returns abstracts with arXiv id, authors, categories and dates. "
        "A query made of arXiv ids (e.g. 2104.12255v1) looks those papers up. "
        "Options: num_results (1-100), sort_by ('relevance' or 'date', newest first)."
    )
    source_type: ClassVar[str] = "arxiv"

    def __init__(
        self,
        settings: ArxivSettings | None = None,
        *,
        spacer: RequestSpacer | None = None,
        shared_pacer: SharedPacer | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``spacer`` defaults to the process-wide one of the API host; ``shared_pacer`` paces it with other
        processes too (``tools/limits.py``); ``clock`` drives the cache's TTL."""
        self.settings = settings or ArxivSettings()
        self.timeout_s = self.settings.effective_timeout_s
        self.spacer = spacer or spacer_for(self.settings.api_url, self.settings.min_interval_s, shared=shared_pacer)
        self._session = _PacedSession(
            self.spacer, self.settings.effective_timeout_s, int(self.settings.max_response_mb * MEGABYTE)
        )
        # Pacing and retries are ours (the spacer, _fetch): the package's own per-client delay would only add a
        # second wait, and its retries would hold the worker instead of queueing behind other callers.
        self._client = arxiv.Client(page_size=MAX_RESULTS, delay_seconds=0.0, num_retries=0)
        self._client.query_url_format = _query_url_format(self.settings.api_url)
        self._client._session = self._session  # the package's only transport seam (see the module docstring)
        self._cache = _TTLCache(self.settings.cache_ttl_s, self.settings.cache_size, clock)
        self._inflight: dict[tuple[int, _Query], _Flight] = {}

    def close(self) -> None:
        """Close the HTTP session (the process-wide spacer stays for other instances)."""
        self._session.close()

    # The base declares **kwargs ("tool-specific options"); Tool.search checks calls against this signature.
    async def _search(  # type: ignore[override]
        self,
        query: str,
        *,
        num_results: int = 5,
        sort_by: SortBy = "relevance",
        user_id: str | None = None,
        session_id: str | None = None,
    ) -> list[ContextChunk]:
        # user_id/session_id: the Retriever passes them to every tool; arXiv search is not personalised.
        del user_id, session_id
        request = _parse_query(query, num_results, sort_by)
        cached = self._cache.get(request)
        if cached is not None:
            logger.debug("academic_search: cache hit for %s", request)
            return cached
        return await self._shared_fetch(request)

    async def _shared_fetch(self, request: _Query) -> list[ContextChunk]:
        """Identical concurrent queries on one event loop wait for one request; the last to leave cancels it."""
        loop = asyncio.get_running_loop()
        slot = (id(loop), request)
        flight = self._inflight.get(slot)
        if flight is None:
            sent = _Sent()
            flight = _Flight(loop.create_task(self._fetch(request, sent)), sent)
            self._inflight[slot] = flight
            flight.task.add_done_callback(functools.partial(self._forget, slot, flight))
        call = current_call()
        if call is not None:  # a timeout before the turn came is our pacing queue's, not arXiv's (tools/base.py)
            sent = flight.sent
            call.queued(lambda: sent.at)
        flight.waiters += 1
        try:
            chunks = await asyncio.shield(flight.task)
        finally:
            flight.waiters -= 1
            if flight.waiters == 0 and not flight.task.done():
                # Nobody waits any more (timeouts): drop the queued request rather than spend an arXiv slot on it.
                self._forget(slot, flight)
                flight.task.cancel()
        return [chunk.model_copy(deep=True) for chunk in chunks]

    def _forget(self, slot: tuple[int, _Query], flight: _Flight, _task: object = None) -> None:
        if self._inflight.get(slot) is flight:
            del self._inflight[slot]

    async def _fetch(self, request: _Query, sent: _Sent | None = None) -> list[ContextChunk]:
        attempts = 1 + self.settings.num_retries
        attempt = 1
        while True:
            try:
                results = await self.spacer.run(lambda: self._fetch_blocking(request, sent))
                break
            except ToolError as error:
                if attempt >= attempts or not _retryable(error):
                    raise
                logger.info("academic_search: %s; retry %d of %d", error.message, attempt, attempts - 1)
                attempt += 1
        chunks = self._to_chunks(results, request)
        self._cache.put(request, chunks)
        return chunks

    def _fetch_blocking(self, request: _Query, sent: _Sent | None = None) -> list[Any]:
        """One arXiv API call, on the spacer's worker thread. Raises ToolError for every failure it understands.
        ``sent`` is stamped when the request's turn comes and it leaves for arXiv."""
        self._session.sending_for(sent)
        search = arxiv.Search(
            query=request.search_query,
            id_list=list(request.id_list),
            max_results=request.num_results,
            sort_by=_SORT_CRITERIA[request.sort_by],
            sort_order=arxiv.SortOrder.Descending,
        )
        # One page of exactly what we want (max_results=num_results on the wire). Safe to set per call: this
        # client is only used on this spacer's single worker thread.
        self._client.page_size = request.num_results
        host = urlsplit(self.settings.api_url).netloc
        try:
            results = list(self._client.results(search))
        except arxiv.HTTPError as error:
            detail = _error_feed_message(self._session.last_response)
            message = f"arXiv answered HTTP {error.status}" + (f": {detail}" if detail else "")
            raise ToolError("http_error", message, status_code=error.status) from error
        except ResponseTooLargeError as error:
            raise ToolError("bad_response", f"arXiv sent too much: {error}") from error
        except requests.Timeout as error:
            limit_s = self.settings.effective_timeout_s
            raise ToolError("timeout", f"arXiv did not answer within {limit_s:g} s") from error
        except requests.ConnectionError as error:
            raise ToolError("unreachable", f"cannot reach arXiv at {host}: {type(error).__name__}") from error
        except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError) as error:
            raise ToolError("bad_response", f"arXiv sent a broken response: {error}") from error
        except requests.RequestException as error:
            raise ToolError("unreachable", f"cannot reach arXiv at {host}: {type(error).__name__}: {error}") from error
        except arxiv.UnexpectedEmptyPageError as error:
            raise ToolError("bad_response", "arXiv returned an unexpectedly empty page") from error
        except (ValueError, TypeError) as error:  # the feed parser on a body that is not what it expects
            raise ToolError("bad_response", f"arXiv sent a feed that could not be read: {error}") from error
        if not results:
            _check_is_feed(self._session.last_response)  # "no results" must be a real, empty Atom feed
        return results

    def _to_chunks(self, results: list[Any], request: _Query) -> list[ContextChunk]:
        chunks: list[ContextChunk] = []
        for position, result in enumerate(results, start=1):
            short_id = str(result.get_short_id())
            title = " ".join(str(result.title).split())
            abstract = " ".join(str(result.summary).split())  # arXiv abstracts carry hard line breaks
            content = abstract or title
            if not content:
                continue
            metadata: dict[str, Any] = {
                "position": position,
                "categories": list(result.categories),
                "primary_category": result.primary_category,
                "updated": result.updated.isoformat(),
            }
            for key in ("pdf_url", "doi", "journal_ref", "comment"):
                value = getattr(result, key, None)
                if value:
                    metadata[key] = value
            entry_id = str(result.entry_id)
            chunks.append(
                ContextChunk(
                    chunk_id=f"arxiv:{short_id}",
                    source_type=self.source_type,
                    content=content,
                    # arXiv returns no score, only an order: relevance is a prior from the rank (rank_relevance);
                    # a date-sorted list carries no relevance order at all, so every hit gets the same prior.
                    semantic_relevance=(
                        rank_relevance(position) if request.sort_by == "relevance" else _DATE_SORT_RELEVANCE
                    ),
                    title=title or None,
                    url=f"https://arxiv.org/abs/{short_id}" if "arxiv.org/abs/" in entry_id else entry_id,
                    source_id=short_id,
                    source_date=result.published,
                    authors=[author.name for author in result.authors if author.name],
                    metadata=metadata,
                    tool_name=self.name,
                )
            )
        return chunks


def _parse_query(query: str, num_results: int, sort_by: str) -> _Query:
    text = " ".join(query.split())
    if not text:
        raise ToolError("invalid_request", "academic search needs a non-empty query")
    if not 1 <= num_results <= MAX_RESULTS:
        raise ToolError("invalid_request", f"num_results must be between 1 and {MAX_RESULTS}, not {num_results}")
    if sort_by not in _SORT_CRITERIA:
        raise ToolError("invalid_request", f"sort_by must be 'relevance' or 'date', not {sort_by!r}")
    tokens = [token for token in re.split(r"[\s,;]+", text) if token]
    matches = [_ARXIV_ID.fullmatch(token) for token in tokens]
    if all(matches):
        ids = tuple(dict.fromkeys(match.group(1) for match in matches if match))
        return _Query(search_query="", id_list=ids, num_results=num_results, sort_by=sort_by)  # type: ignore[arg-type]
    if len(text) > MAX_QUERY_CHARS:
        text = text[:MAX_QUERY_CHARS].rsplit(" ", 1)[0]
    return _Query(search_query=text, id_list=(), num_results=num_results, sort_by=sort_by)  # type: ignore[arg-type]


def _query_url_format(api_url: str) -> str:
    """``arxiv.Client.query_url_format`` for a base URL: the package fills ``{}`` with the encoded parameters."""
    escaped = api_url.replace("{", "{{").replace("}", "}}")
    return escaped + ("&{}" if "?" in api_url else "?{}")


def _retryable(error: ToolError) -> bool:
    """Worth one more try: arXiv's frequent transient 5xx and dropped connections; never 4xx or timeouts."""
    if error.kind == "http_error":
        return (error.status_code or 0) >= 500
    return error.kind == "unreachable"


def _parse_xml(content: bytes) -> ET.Element | None:
    # The body comes from the configured arXiv endpoint. ElementTree never fetches external entities, and
    # expat >= 2.4.1 (bundled with Python 3.11) refuses entity-expansion bombs.
    try:
        return ET.fromstring(content)  # noqa: S314
    except ET.ParseError:
        return None


def _error_feed_message(response: requests.Response | None) -> str | None:
    """The message of an arXiv error feed (an entry titled "Error" whose summary says what was wrong)."""
    if response is None or not response.content:
        return None
    root = _parse_xml(response.content)
    if root is None:
        return None
    for entry in root.iter(f"{_ATOM}entry"):
        if (entry.findtext(f"{_ATOM}title") or "").strip() == "Error":
            summary = (entry.findtext(f"{_ATOM}summary") or "").strip()
            return summary or None
    return None


def _check_is_feed(response: requests.Response | None) -> None:
    if response is None:
        return
    root = _parse_xml(response.content)
    if root is None or root.tag != f"{_ATOM}feed":
        snippet = response.content[:80].decode("utf-8", "replace")
        raise ToolError("bad_response", f"arXiv answered with something that is not an Atom feed: {snippet!r}")
