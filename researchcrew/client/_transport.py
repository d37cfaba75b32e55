"""``ServiceClient``: one researchcrew service's routes as Python calls, over its Unix socket or HTTP.

    async with ServiceClient("unix:///home/ada/.local/share/researchcrew/service.sock") as client:
        answer = await client.ask(ResearchRequest(question="...", user_id="ada"))
    async with ServiceClient("http://127.0.0.1:8000", api_key="rc_...") as client:
        async for item in client.stream(request):   # ProgressEvents, then the FinalResponse
            ...

The CLI's commands and the SDK's ``ResearchAssistant(service_url=...)`` both stand on it, so a question answered
through the service is the same ``FinalResponse`` an in-process runtime gives. Over the Unix socket the request
runs as ``request.user_id`` (the socket is its owner's: ``researchcrew.service._local_socket``); over HTTP as the
API key's user. A problem+json answer is raised as ``ServiceError`` with its status and detail; no answer at all
(connection refused, reset) as ``ServiceError`` without a status.

Only httpx and the pydantic contracts are imported here: a command that goes through the service starts in a
fraction of a second (no crewAI, pymilvus, torch, SQLAlchemy or FastAPI).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

# ``import httpx`` also imports httpx's own command-line tool (rich, pygments, click: about 45 ms of CPU), which this
# client never uses; without it httpx falls back to a stub ``main`` (its ``except ImportError``). Only when httpx is
# not imported yet: a process that has it keeps it as it is.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

import httpx  # after the line above, on purpose

from researchcrew.contracts.deep import DeepOptions, DeepProgressEvent, DeepRun, PlanDecision
from researchcrew.contracts.progress import ProgressEvent
from researchcrew.contracts.request import ResearchRequest
from researchcrew.contracts.synthesizer import FinalResponse
from researchcrew.errors import ConfigurationError, ServiceError

USER_HEADER = (
    "X-Researchcrew-User"  # researchcrew.service._local_socket.LOCAL_USER_HEADER (honoured on the socket only)
)
UNIX_SCHEME = "unix://"
_CONNECT_TIMEOUT_S = 5.0
_ANSWER_MARGIN_S = 60.0  # an answer may take its deadline; the client waits that long and this much more
_SEGMENT_SILENCE_S = 300.0  # a deep run's stream sends keep-alives every few seconds: this long silent, it is gone


def transport_for(url: str) -> tuple[str, httpx.AsyncBaseTransport | None]:
    """``(base_url, transport)`` for ``unix:///path/to/sock`` or ``http(s)://host:port``; anything else is a
    ``ConfigurationError`` saying what is accepted. A Unix socket and plain HTTP carry no TLS: their transports are
    built without loading the CA bundle (httpx loads it for every transport by default, ~50 ms of CPU each)."""
    if url.startswith(UNIX_SCHEME):
        path = url.removeprefix(UNIX_SCHEME)
        if not path.startswith("/"):
            raise ConfigurationError(f"service_url {url!r}: a Unix socket URL is unix:///absolute/path/service.sock")
        return "http://researchcrew.local", httpx.AsyncHTTPTransport(uds=path, verify=False)
    if url.startswith("http://"):
        return url.rstrip("/"), httpx.AsyncHTTPTransport(verify=False)
    if url.startswith("https://"):
        return url.rstrip("/"), None  # TLS: the CA bundle is loaded and the server's certificate verified
    raise ConfigurationError(
        f"service_url {url!r} is neither unix:///path/to/service.sock nor http(s)://host:port (e.g. "
        "http://127.0.0.1:8000)"
    )


class ServiceClient:
    """The routes of a researchcrew service (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        user_id: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        base_url, derived = transport_for(url)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        if user_id:
            headers[USER_HEADER] = user_id
        self.url = url
        self._http = httpx.AsyncClient(
            base_url=base_url,
            transport=transport or derived,
            headers=headers,
            timeout=httpx.Timeout(30.0, connect=_CONNECT_TIMEOUT_S),
        )

    async def __aenter__(self) -> ServiceClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # Requests ----------------------------------------------------------------------------------------------
    async def request(
        self, method: str, path: str, *, user_id: str | None = None, timeout_s: float | None = 30.0, **kwargs: Any
    ) -> Any:
        """One request; its JSON body, or ``ServiceError``."""
        headers = {USER_HEADER: user_id} if user_id else {}
        try:
            response = await self._http.request(
                method, path, headers=headers, timeout=httpx.Timeout(timeout_s, connect=_CONNECT_TIMEOUT_S), **kwargs
            )
        except httpx.HTTPError as error:
            raise ServiceError(f"the service at {self.url} did not answer: {error or type(error).__name__}") from error
        if response.status_code >= 400:
            raise problem_of(response.status_code, response.text)
        return response.json() if response.content else None

    async def identity(self, *, timeout_s: float = 2.0) -> dict[str, Any]:
        """Which data folder the service owns (``GET /v1/service``)."""
        found: dict[str, Any] = await self.request("GET", "/v1/service", timeout_s=timeout_s)
        return found

    async def ask(self, request: ResearchRequest, *, continue_session: bool = False) -> FinalResponse:
        """``Runtime.ask(request)`` in the service (``continue_session``: in the user's latest session)."""
        payload = await self.request(
            "POST",
            "/v1/ask",
            user_id=request.user_id,
            timeout_s=_answer_timeout(request),
            json=_question_body(request, continue_session),
        )
        return FinalResponse.model_validate(payload)

    async def stream(
        self, request: ResearchRequest, *, continue_session: bool = False
    ) -> AsyncIterator[ProgressEvent | FinalResponse]:
        """The question's progress events as the service streams them, then its answer (always last)."""
        headers = {USER_HEADER: request.user_id, "Accept": "text/event-stream"}
        body = _question_body(request, continue_session)
        timeout = httpx.Timeout(_answer_timeout(request), connect=_CONNECT_TIMEOUT_S)
        try:
            async with self._http.stream("POST", "/v1/ask", headers=headers, json=body, timeout=timeout) as response:
                if response.status_code >= 400:
                    raise problem_of(response.status_code, (await response.aread()).decode(errors="replace"))
                async for event, data in _server_sent_events(response):
                    if event == "response":
                        yield FinalResponse.model_validate_json(data)
                    elif event == "error":
                        raise problem_of(500, data)
                    elif event == "done":
                        return
                    else:
                        yield ProgressEvent.model_validate_json(data)
        except httpx.HTTPError as error:
            raise ServiceError(f"the service at {self.url} did not answer: {error or type(error).__name__}") from error

    # The other doors' operations: JSON as the service answers it; the caller validates into its contract.
    async def kb_stats(self) -> dict[str, Any]:
        """`researchcrew kb stats` (``GET /v1/kb/stats``)."""
        found: dict[str, Any] = await self.request("GET", "/v1/kb/stats", timeout_s=None)
        return found

    async def ingest(self, paths: list[str], **options: Any) -> dict[str, Any]:
        """`researchcrew ingest` of absolute paths on the service's machine (Unix socket only)."""
        body = {"paths": paths, **options}
        report: dict[str, Any] = await self.request("POST", "/v1/kb/ingest", json=body, timeout_s=None)
        return report

    async def kb_documents(self) -> dict[str, str]:
        """Every stored source key and its document id (Unix socket only)."""
        index: dict[str, str] = await self.request("GET", "/v1/kb/documents", timeout_s=None)
        return index

    async def kb_remove(self, source_keys: list[str], doc_ids: list[str]) -> int:
        """Remove documents by source key or id; the number of chunks removed (Unix socket only)."""
        body = {"source_keys": source_keys, "doc_ids": doc_ids}
        removed = await self.request("POST", "/v1/kb/remove", json=body, timeout_s=None)
        return int(removed["chunks_removed"])

    async def kb_reindex(self) -> dict[str, Any]:
        """`researchcrew kb reindex` (Unix socket only)."""
        report: dict[str, Any] = await self.request("POST", "/v1/kb/reindex", timeout_s=None)
        return report

    async def table(
        self, user_id: str, session_id: str, table_id: str, *, offset: int = 0, limit: int = 50
    ) -> dict[str, Any]:
        """A page of a structured answer's table (``GET /v1/sessions/{id}/tables/{table_id}``)."""
        path = f"/v1/sessions/{_segment(session_id)}/tables/{_segment(table_id)}"
        page: dict[str, Any] = await self.request(
            "GET", path, user_id=user_id, params={"offset": offset, "limit": limit}
        )
        return page

    async def table_csv(self, user_id: str, session_id: str, table_id: str) -> str:
        """All rows of a structured answer's table as CSV (``?format=csv``)."""
        path = f"/v1/sessions/{_segment(session_id)}/tables/{_segment(table_id)}"
        try:
            response = await self._http.get(path, headers={USER_HEADER: user_id}, params={"format": "csv"})
        except httpx.HTTPError as error:
            raise ServiceError(f"the service at {self.url} did not answer: {error or type(error).__name__}") from error
        if response.status_code >= 400:
            raise problem_of(response.status_code, response.text)
        return response.text

    async def export_memory(self, user_id: str) -> dict[str, Any]:
        """Everything stored about ``user_id`` (over HTTP: the key's user)."""
        data: dict[str, Any] = await self.request("GET", "/v1/memory", user_id=user_id, timeout_s=None)
        return data

    async def forget_memory(self, user_id: str) -> dict[str, Any]:
        """Delete everything stored about ``user_id``: ``{"user_id", "deleted": {table: rows}, "zep"}``."""
        outcome: dict[str, Any] = await self.request("DELETE", "/v1/memory", user_id=user_id, timeout_s=None)
        return outcome

    async def start_run(self, user_id: str, job: str) -> dict[str, Any]:
        """Start a run of ``job`` now, in the service (or on its workers when it has a queue)."""
        run: dict[str, Any] = await self.request("POST", f"/v1/jobs/{_segment(job)}/runs", user_id=user_id)
        return run

    async def resume_run(self, user_id: str, run_id: str) -> dict[str, Any]:
        """Continue a stopped run in the service (or on its workers)."""
        run: dict[str, Any] = await self.request("POST", f"/v1/runs/{_segment(run_id)}/resume", user_id=user_id)
        return run

    async def run_status(self, user_id: str, run_id: str) -> dict[str, Any]:
        run: dict[str, Any] = await self.request("GET", f"/v1/runs/{_segment(run_id)}", user_id=user_id)
        return run

    # Deep research (``/v1/deep-runs``): each working segment streams its events, then the run (paused or done).
    def deep_research(
        self, request: ResearchRequest, options: DeepOptions
    ) -> AsyncIterator[DeepProgressEvent | DeepRun]:
        """``DeepResearch.research`` in the service: its progress events, then the run at its first pause or end."""
        body = {
            **request.model_dump(mode="json", exclude={"user_id"}, exclude_none=True),
            "deep": options.model_dump(mode="json", exclude_none=True),
        }
        return self._deep_segment("/v1/deep-runs", request.user_id, body)

    def answer_clarification(
        self, user_id: str, run_id: str, answer: str
    ) -> AsyncIterator[DeepProgressEvent | DeepRun]:
        """Store the reply to a paused run's clarifying questions; the run resumes in the service (its events)."""
        path = f"/v1/deep-runs/{_segment(run_id)}/clarification"
        return self._deep_segment(path, user_id, {"answer": answer})

    def decide_plan(
        self, user_id: str, run_id: str, decision: PlanDecision
    ) -> AsyncIterator[DeepProgressEvent | DeepRun]:
        """Store the decision on a paused run's plan; the run resumes in the service (its events)."""
        path = f"/v1/deep-runs/{_segment(run_id)}/plan"
        return self._deep_segment(path, user_id, decision.model_dump(mode="json", exclude_none=True))

    async def deep_run(self, user_id: str, run_id: str) -> DeepRun:
        found = await self.request("GET", f"/v1/deep-runs/{_segment(run_id)}", user_id=user_id)
        return DeepRun.model_validate(found)

    async def cancel_deep_run(self, user_id: str, run_id: str) -> DeepRun:
        found = await self.request("POST", f"/v1/deep-runs/{_segment(run_id)}/cancel", user_id=user_id)
        return DeepRun.model_validate(found)

    async def deep_report(self, user_id: str, run_id: str, format: str) -> bytes:
        """A completed run's report file (md, html, pdf or docx), as the service renders it."""
        path = f"/v1/deep-runs/{_segment(run_id)}/report"
        try:
            response = await self._http.get(
                path, params={"format": format}, headers={USER_HEADER: user_id}, timeout=httpx.Timeout(None)
            )
        except httpx.HTTPError as error:
            raise ServiceError(f"the service at {self.url} did not answer: {error or type(error).__name__}") from error
        if response.status_code >= 400:
            raise problem_of(response.status_code, response.text)
        return response.content

    async def _deep_segment(
        self, path: str, user_id: str, body: dict[str, Any]
    ) -> AsyncIterator[DeepProgressEvent | DeepRun]:
        headers = {USER_HEADER: user_id, "Accept": "text/event-stream"}
        # No overall limit: a segment works up to its run's deadline; the service sends keep-alives meanwhile.
        timeout = httpx.Timeout(None, connect=_CONNECT_TIMEOUT_S, read=_SEGMENT_SILENCE_S)
        try:
            async with self._http.stream("POST", path, headers=headers, json=body, timeout=timeout) as response:
                if response.status_code >= 400:
                    raise problem_of(response.status_code, (await response.aread()).decode(errors="replace"))
                async for event, data in _server_sent_events(response):
                    if event == "run":
                        yield DeepRun.model_validate_json(data)
                    elif event == "error":
                        raise problem_of(500, data)
                    elif event == "done":
                        return
                    else:
                        yield DeepProgressEvent.model_validate_json(data)
        except httpx.HTTPError as error:
            raise ServiceError(f"the service at {self.url} did not answer: {error or type(error).__name__}") from error


def _segment(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")


def problem_of(status: int, body: str) -> ServiceError:
    """A problem+json answer as ``ServiceError`` (its detail; the body itself when it is not a problem)."""
    try:
        problem = json.loads(body)
    except ValueError:
        problem = None
    if isinstance(problem, dict) and isinstance(problem.get("detail"), str):
        kind = problem.get("type")
        return ServiceError(problem["detail"], status=problem.get("status", status), kind=str(kind) if kind else None)
    return ServiceError(f"the service answered HTTP {status}: {body[:200]}", status=status)


def _question_body(request: ResearchRequest, continue_session: bool) -> dict[str, Any]:
    body = request.model_dump(mode="json", exclude={"user_id"}, exclude_none=True)
    return {**body, "continue_session": continue_session}


def _answer_timeout(request: ResearchRequest) -> float:
    from researchcrew.contracts.request import MAX_DEADLINE_S

    return (request.deadline_s or MAX_DEADLINE_S) + _ANSWER_MARGIN_S


async def _server_sent_events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """``(event, data)`` of each server-sent event (comments and ids skipped)."""
    event, data = "message", list[str]()
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", list[str]()
        elif line.startswith("event:"):
            event = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data.append(line.removeprefix("data:").strip())
