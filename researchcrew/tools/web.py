"""Web search through Firecrawl (cloud or self-hosted), with firecrawl-py's async client.

One call is one ``POST /v2/search``: the web results of the query and — when ``settings.scrape_content`` is on —
each page's main content as markdown, scraped by Firecrawl in the same request. A result becomes one chunk: the
page markdown (cut at a paragraph or sentence boundary) or, when no page content came back, the search snippet.

Without an API key and without a self-hosted ``api_url`` the tool is *not configured*: it fails at once with
``not_configured`` (no client is built, nothing is sent, nobody waits for a timeout).

Time budget: the SDK is built with ``timeout=settings.effective_timeout_s`` per HTTP request and a single attempt (its
retries would resend a timed-out search and double the wait, which never fits in the Retriever's per-source
budget); the same budget goes to Firecrawl as the server-side search ``timeout`` so that it stops scraping when we
stop waiting. ``Tool.search(timeout=...)`` still cuts the whole call.

firecrawl-py is imported only when a client is built or a search runs (about 0.45 s of CPU at import): a process
in which web search is not configured never loads it.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

import httpx

from researchcrew.contracts.chunks import ContextChunk
from researchcrew.errors import ToolError
from researchcrew.net.response_limits import MEGABYTE, CappedTransport, ResponseTooLargeError
from researchcrew.settings import FirecrawlSettings
from researchcrew.tools.base import Tool, rank_relevance

if TYPE_CHECKING:
    from firecrawl import AsyncFirecrawl

    from researchcrew.tools.limits import ConcurrencyCap

logger = logging.getLogger(__name__)

FIRECRAWL_CLOUD_URL = "https://api.firecrawl.dev"
MAX_RESULTS = 100  # Firecrawl's own limit per search (the SDK rejects more)

# Page metadata keys that can carry a publication date, best first (snake_case as the SDK normalises them, and
# the raw meta-tag names Firecrawl passes through).
_DATE_KEYS = (
    "published_time",
    "article:published_time",
    "dc_terms_created",
    "dc_date_created",
    "dc_date",
    "date",
    "modified_time",
    "article:modified_time",
)
_SENTENCE_END = re.compile(r"[.!?。！？](?=\s)")


class WebSearchTool(Tool):
    """Search the web with Firecrawl; page content as markdown where available."""

    name: ClassVar[str] = "web_search"
    description: ClassVar[str] = (
        "Search the web (Firecrawl) for current pages on a topic; returns page content as markdown with its URL. "
        "Options: num_results (1-100), domains (restrict to these hostnames)."
    )
    source_type: ClassVar[str] = "web"

    def __init__(
        self,
        settings: FirecrawlSettings | None = None,
        *,
        client: AsyncFirecrawl | None = None,
        cap: ConcurrencyCap | None = None,
    ) -> None:
        """``client`` overrides the one built from ``settings`` (tests, SDK users with their own client); ``cap``
        bounds concurrent searches (``settings.max_concurrent``, shared through Redis: ``tools/limits.py``)."""
        self.settings = settings or FirecrawlSettings()
        self.timeout_s = self.settings.effective_timeout_s
        self._client = client if client is not None else _build_client(self.settings)
        self._cap = cap

    @property
    def configured(self) -> bool:
        """Whether the tool can search at all (a key, a self-hosted URL, or an injected client)."""
        return self._client is not None

    # The base declares **kwargs ("tool-specific options"); Tool.search checks calls against this signature.
    async def _search(  # type: ignore[override]
        self,
        query: str,
        *,
        num_results: int = 5,
        domains: Sequence[str] | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
    ) -> list[ContextChunk]:
        # user_id/session_id: the Retriever passes them to every tool; web search is not personalised.
        del user_id, session_id
        if self._client is None:
            raise ToolError(
                "not_configured",
                "web search is off: set a Firecrawl API key (FIRECRAWL_API_KEY or RESEARCHCREW_FIRECRAWL__API_KEY) "
                "or the URL of a self-hosted Firecrawl (FIRECRAWL_API_URL)",
            )
        query = query.strip()
        if not query:
            raise ToolError("invalid_request", "web search needs a non-empty query")
        if not 1 <= num_results <= MAX_RESULTS:
            raise ToolError("invalid_request", f"num_results must be between 1 and {MAX_RESULTS}, not {num_results}")
        # Here a client exists, so firecrawl-py is loaded already (or an injected client brought it in).
        from firecrawl.v2.types import ScrapeOptions
        from firecrawl.v2.utils.error_handler import FirecrawlError

        options: dict[str, Any] = {
            "limit": num_results,
            "sources": ["web"],
            "timeout": int(self.settings.effective_timeout_s * 1000),  # server-side budget, in ms
        }
        include_domains = normalise_domains(domains)
        if include_domains:
            options["include_domains"] = include_domains  # sent as includeDomains (firecrawl-py >= 4.5x)
        if self.settings.scrape_content:
            options["scrape_options"] = ScrapeOptions(formats=["markdown"], only_main_content=True)

        try:
            if self._cap is None:
                data = await self._client.search(query, **options)
            else:
                async with self._cap.slot():
                    data = await self._client.search(query, **options)
        except (FirecrawlError, httpx.HTTPError, ValueError, TypeError, AttributeError, KeyError) as error:
            raise _tool_error(error) from error
        return self._to_chunks(data)

    # Mapping -------------------------------------------------------------------------------------------------
    def _to_chunks(self, data: Any) -> list[ContextChunk]:
        if not hasattr(data, "web"):
            raise ToolError("bad_response", f"Firecrawl search returned {type(data).__name__}, not search data")
        chunks: dict[str, ContextChunk] = {}
        for index, item in enumerate(data.web or [], start=1):
            chunk = self._to_chunk(item, index)
            if chunk is not None and chunk.chunk_id not in chunks:  # the same page twice: keep the better rank
                chunks[chunk.chunk_id] = chunk
        return list(chunks.values())

    def _to_chunk(self, item: Any, index: int) -> ContextChunk | None:
        """One search result as a chunk, or None when it carries no text at all."""
        from firecrawl.v2.types import Document, SearchResultWeb

        metadata: dict[str, Any] = {}
        source_date: datetime | None = None
        if isinstance(item, Document):
            # With scrapeOptions the SDK turns a result into a Document and drops its wire-level url, title,
            # description and position (Document has no such fields); the page metadata still has them, and the
            # result's place in the list is its rank.
            page = item.metadata_dict
            url = page.get("url") or page.get("source_url")
            title = page.get("title") or page.get("og_title")
            description = page.get("description") or page.get("og_description")
            position = index
            body = item.markdown or ""
            source_date = _first_date(page)
            if page.get("status_code") is not None:
                metadata["status_code"] = page["status_code"]
            if page.get("error"):
                metadata["scrape_error"] = page["error"]
        elif isinstance(item, SearchResultWeb):
            url, title, description = item.url, item.title, item.description
            position = item.position or index
            body = ""
            if item.category:
                metadata["category"] = item.category
        else:
            logger.debug("web_search: ignoring a %s result", type(item).__name__)
            return None

        description = _as_text(description)
        if body.strip():
            content, truncated = cut_text(body, self.settings.max_content_chars)
            metadata["content_from"] = "markdown"
            metadata["truncated"] = truncated
        elif description.strip():
            content = description.strip()
            metadata["content_from"] = "description"
        else:
            logger.debug("web_search: result %s (%s) has no text; skipped", index, url)
            return None
        url = _as_text(url) or None
        metadata["position"] = position
        if description:
            metadata["description"] = description
        if url:
            metadata["domain"] = urlsplit(url).hostname or ""
        return ContextChunk(
            chunk_id=_chunk_id(url or content),
            source_type=self.source_type,
            content=content,
            # Firecrawl returns no score, only an order: relevance is a prior from the rank (see rank_relevance).
            semantic_relevance=rank_relevance(position),
            title=_as_text(title) or None,
            url=url,
            source_date=source_date,
            metadata=metadata,
            tool_name=self.name,
        )


def _build_client(settings: FirecrawlSettings) -> AsyncFirecrawl | None:
    key = settings.api_key.get_secret_value() if settings.api_key else ""
    if not key and not settings.api_url:
        return None
    from firecrawl import AsyncFirecrawl

    client = AsyncFirecrawl(
        # "" rather than None: with None the SDK reads FIRECRAWL_API_KEY itself; settings.py already did.
        api_key=key,
        api_url=(settings.api_url or FIRECRAWL_CLOUD_URL).rstrip("/"),
        timeout=settings.effective_timeout_s,
        max_retries=1,  # the SDK counts attempts: 1 = no retry (see the module docstring)
        backoff_factor=0.0,
    )
    _cap_responses(client, int(settings.max_response_mb * MEGABYTE))
    return client


def _cap_responses(client: AsyncFirecrawl, max_bytes: int) -> None:
    """Read firecrawl-py's responses through ``CappedTransport``. The SDK builds its ``httpx.AsyncClient`` itself and
    offers no transport option; its v2 client's ``async_http_client._client`` is that client (firecrawl-py 4.x).
    Where a version lays it out otherwise, responses stay uncapped and that is logged once."""
    http = getattr(getattr(getattr(client, "_v2_client", None), "async_http_client", None), "_client", None)
    transport = getattr(http, "_transport", None)
    if not isinstance(http, httpx.AsyncClient) or not isinstance(transport, httpx.AsyncBaseTransport):
        logger.warning("firecrawl-py's HTTP client was not found; Firecrawl responses are not size-capped")
        return
    http._transport = CappedTransport(transport, max_bytes)


def _tool_error(error: Exception) -> ToolError:
    """Map what firecrawl-py raises to a failure kind."""
    from firecrawl.v2.utils.error_handler import FirecrawlError, RequestTimeoutError

    if isinstance(error, FirecrawlError):
        status = error.status_code
        if isinstance(error, RequestTimeoutError) or status == 408:
            return ToolError("timeout", f"Firecrawl timed out the search: {error}", status_code=408)
        if status is None or status < 400:
            # e.g. HTTP 200 with {"success": false}: an answer we cannot use.
            return ToolError("bad_response", f"Firecrawl answered without results: {error}")
        return ToolError("http_error", f"Firecrawl answered HTTP {status}: {error}", status_code=status)
    if isinstance(error, ResponseTooLargeError):
        return ToolError("bad_response", f"Firecrawl sent too much: {error}")
    if isinstance(error, httpx.TimeoutException):
        return ToolError("timeout", f"Firecrawl did not answer in time ({type(error).__name__})")
    if isinstance(error, httpx.RemoteProtocolError):
        return ToolError("bad_response", f"Firecrawl closed the connection without a valid response: {error}")
    if isinstance(error, httpx.HTTPError):
        return ToolError("unreachable", f"cannot reach Firecrawl: {type(error).__name__}: {error}")
    # ValueError (invalid JSON, a result that fails the SDK's models), TypeError/AttributeError/KeyError (a body
    # of the wrong shape): the service answered something we cannot read.
    return ToolError("bad_response", f"Firecrawl sent an unreadable response: {type(error).__name__}: {error}")


def normalise_domains(domains: Sequence[str] | None) -> list[str]:
    """Hostnames for Firecrawl's includeDomains: accepts ``example.org``, ``https://example.org/path``, ``*.x``."""
    if domains is None:
        return []
    if isinstance(domains, str):
        domains = [domains]
    hosts: list[str] = []
    for raw in domains:
        text = str(raw).strip().lower()
        if not text:
            continue
        host = urlsplit(text if "//" in text else f"//{text}").hostname or ""
        host = host.removeprefix("*.").removeprefix("www.")
        if not host or "." not in host:
            raise ToolError("invalid_request", f"not a domain name: {raw!r}")
        if host not in hosts:
            hosts.append(host)
    return hosts


def cut_text(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to at most ``limit`` characters at a paragraph, sentence or word boundary; and whether it was cut.

    A boundary is only used if it keeps at least half of the allowed length; otherwise the cut is hard.
    """
    text = text.strip()
    if len(text) <= limit:
        return text, False
    window = text[:limit]
    floor = limit // 2
    paragraph = window.rfind("\n\n")
    if paragraph >= floor:
        return window[:paragraph].rstrip(), True
    sentence_ends = [match.end() for match in _SENTENCE_END.finditer(window)]
    if sentence_ends and sentence_ends[-1] >= floor:
        return window[: sentence_ends[-1]], True
    space = max(window.rfind(" "), window.rfind("\n"))
    if space >= floor:
        return window[:space].rstrip(), True
    return window, True


def _first_date(page: dict[str, Any]) -> datetime | None:
    for key in _DATE_KEYS:
        value = page.get(key)
        if isinstance(value, list):
            value = next((v for v in value if isinstance(v, str)), None)
        if not isinstance(value, str) or not value.strip():
            continue
        try:
            return datetime.fromisoformat(value.strip())
        except ValueError:
            logger.debug("web_search: unparsable date %r in %s", value, key)
    return None


def _as_text(value: Any) -> str:
    if isinstance(value, list):  # meta tags repeated on a page come back as lists
        value = next((v for v in value if isinstance(v, str)), "")
    return value if isinstance(value, str) else ""


def _chunk_id(key: str) -> str:
    return "web:" + hashlib.sha256(key.encode()).hexdigest()[:16]
