"""Any crewAI tool (crewai-tools' 80-odd, or your own ``crewai.tools.BaseTool``) as a researchcrew source.

``from_crewai(TavilySearchTool(), source_type="tavily")`` gives a ``Tool`` the Retriever fans out to like Firecrawl
or arXiv: under the per-source timeout and the run's budget, its failures reported as data, its results parsed into
passages (``crewai_results``) that are scored, deduplicated, cross-checked and cited like every other source's.

* **Calling.** A tool with a real async path (its class overrides ``_arun``) is awaited; any other runs its sync
  ``run`` on a ``BlockingPool`` of its own, so a tool that blocks past its time does not hold the answer: the
  Retriever stops waiting at the timeout and the call is abandoned on its thread (``researchcrew.blocking``).
* **Arguments.** The query goes into the tool's query argument (``search_query``, ``query``, ``q``, ... from its
  ``args_schema``, or ``query_argument=``); a tool whose schema takes no argument (a scraper built for one URL, a
  document search built for one file) is called without one and its output is ranked against the query. The
  number of results goes into ``max_results``/``n_results``/``count``/``limit`` when the schema has one, and the
  passages are cut to it anyway.
* **Failures**, as data with a kind: a required key the tool reads from the environment and that is unset →
  ``not_configured`` naming the variable (checked before the call); connection refused → ``unreachable``; an HTTP
  error status → ``http_error`` with the status (429: rate-limited; 401/403: the key was refused); a timeout →
  ``timeout``; output none of the parsers read, or an error the tool returned as text → ``bad_response``.
  Exceptions nobody mapped stay bugs: ``Tool.search`` reports them as ``internal_error`` and logs the traceback.

Importing this module does not import crewAI: the tool object is only duck-typed.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from researchcrew.blocking import BlockingPool
from researchcrew.contracts.chunks import ContextChunk
from researchcrew.errors import ToolError
from researchcrew.settings import environment_variable
from researchcrew.tools._crewai_results import Parser, Passage, UnreadableResult, parse_result
from researchcrew.tools.base import Tool, rank_relevance

logger = logging.getLogger(__name__)

QUERY_ARGUMENTS = ("search_query", "query", "q", "question", "search", "topic", "prompt")
COUNT_ARGUMENTS = ("max_results", "n_results", "num_results", "count", "limit", "top_k", "number_of_results")
MAX_PASSAGE_CHARS = 8_000  # one record's text (Tavily's raw_content can be a whole page)
# An error a tool returned as its answer instead of raising (several crewai-tools do: "Error: ...").
_ERROR_TEXT = re.compile(r"^\s*(error\b|an error occurred|failed to\b|exception\b)", re.IGNORECASE)


class CrewAISource(Tool):
    """A crewAI tool as a retrieval source (see the module docstring; build it with ``from_crewai``)."""

    name: ClassVar[str] = "crewai_tool"
    description: ClassVar[str] = "A crewAI tool used as a retrieval source."
    source_type: ClassVar[str] = "crewai"

    def __init__(
        self,
        tool: Any,
        *,
        source_type: str,
        name: str | None = None,
        description: str | None = None,
        query_argument: str | None = None,
        arguments: dict[str, Any] | None = None,
        parser: Parser | str | None = None,
        timeout_s: float | None = None,
        max_threads: int = 4,
    ) -> None:
        if not callable(getattr(tool, "run", None)):
            raise TypeError(f"{type(tool).__name__} is not a crewAI tool (it has no run method)")
        # Instance attributes shadow the class attributes: one class stands in for any crewAI tool.
        self.source_type = source_type  # type: ignore[misc]
        self.name = name or _snake(getattr(tool, "name", "") or type(tool).__name__)  # type: ignore[misc]
        self.description = description or str(getattr(tool, "description", "") or self.description)  # type: ignore[misc]
        self.timeout_s = timeout_s
        self.tool = tool
        self.parser = parser
        self.arguments = dict(arguments or {})
        fields = _schema_fields(tool)
        self.query_argument = query_argument if query_argument is not None else _query_argument(fields)
        if self.query_argument is not None and fields and self.query_argument not in fields:
            raise ValueError(f"{type(tool).__name__} takes no argument {self.query_argument!r} (it takes {fields})")
        self.count_argument = next((name for name in COUNT_ARGUMENTS if name in fields), None)
        self.is_async = _has_own_arun(tool)
        self._pool = BlockingPool(f"crewai-{self.name}", max_workers=max_threads)

    async def _search(  # type: ignore[override]
        self,
        query: str,
        *,
        num_results: int = 5,
        user_id: str | None = None,
        session_id: str | None = None,
    ) -> list[ContextChunk]:
        # user_id/session_id: the Retriever passes them to every tool; a crewAI tool is not personalised.
        del user_id, session_id
        if not query.strip():
            raise ToolError("invalid_request", f"{self.name} needs a non-empty query")
        if num_results < 1:
            raise ToolError("invalid_request", f"num_results must be at least 1, not {num_results}")
        self._check_keys()
        kwargs = dict(self.arguments)
        if self.query_argument is not None:
            kwargs[self.query_argument] = query
        if self.count_argument is not None and self.count_argument not in self.arguments:
            kwargs[self.count_argument] = num_results
        output = await self._call(kwargs)
        if _is_failure(output):
            raise ToolError("http_error", f"{self.name}: {getattr(output, 'message', output)}", status_code=429)
        if isinstance(output, str) and _ERROR_TEXT.match(output[:200]):
            raise _failure_from_text(self.name, output)
        try:
            passages = parse_result(output, query, self.parser)
        except UnreadableResult as error:
            raise ToolError("bad_response", f"{self.name} returned output researchcrew cannot read: {error}") from error
        return self._chunks(passages[:num_results])

    async def _call(self, kwargs: dict[str, Any]) -> Any:
        try:
            if self.is_async:
                return await self.tool.arun(**kwargs)
            return await self._pool.run(self.tool.run, **kwargs)
        except ToolError:
            raise
        except Exception as error:
            mapped = failure_from_exception(self.name, error, self._required_keys())
            if mapped is None:
                raise  # a bug in the tool: Tool.search reports it as internal_error with the traceback logged
            raise mapped from error

    def _required_keys(self) -> list[str]:
        keys = []
        for variable in getattr(self.tool, "env_vars", None) or []:
            if getattr(variable, "required", False) and getattr(variable, "default", None) in (None, ""):
                keys.append(str(variable.name))
        return keys

    def _check_keys(self) -> None:
        """A required key the tool reads from the environment is unset: ``not_configured`` naming it. A tool built
        with its key passed in (``api_key=``) needs none."""
        if getattr(self.tool, "api_key", None):
            return
        missing = [key for key in self._required_keys() if not environment_variable(key)]
        if missing:
            raise ToolError("not_configured", f"{self.name} needs {' and '.join(missing)} set in the environment")

    def _chunks(self, passages: Sequence[Passage]) -> list[ContextChunk]:
        fixed_url = _string_attribute(self.tool, ("website_url", "url", "base_url_of_page"))
        fixed_file = _string_attribute(self.tool, ("pdf", "txt", "docx", "csv", "json", "file_path", "directory"))
        chunks: dict[str, ContextChunk] = {}
        for position, passage in enumerate(passages, start=1):
            text = passage.text.strip()[:MAX_PASSAGE_CHARS]
            url = passage.url or fixed_url
            key = f"{url or ''}#{hashlib.sha256(text.encode()).hexdigest()}" if not passage.url else passage.url
            chunk_id = f"{self.source_type}:{hashlib.sha256(key.encode()).hexdigest()[:16]}"
            if chunk_id in chunks:
                continue
            relevance = passage.score if passage.score is not None else rank_relevance(position)
            title = passage.title or (fixed_file.rsplit("/", 1)[-1] if fixed_file else None) or url or self.name
            chunks[chunk_id] = ContextChunk(
                chunk_id=chunk_id,
                source_type=self.source_type,
                content=text,
                semantic_relevance=relevance,
                title=title[:2_000],
                url=url[:4_000] if url else None,
                source_id=url or fixed_file,
                source_date=passage.date,
                metadata={**passage.metadata, "crewai_tool": type(self.tool).__name__},
                tool_name=self.name,
            )
        return list(chunks.values())

    def close(self) -> None:
        """Stop the tool's threads once their calls end (never blocks)."""
        self._pool.close()


def from_crewai(
    tool: Any,
    *,
    source_type: str,
    name: str | None = None,
    description: str | None = None,
    query_argument: str | None = None,
    arguments: dict[str, Any] | None = None,
    parser: Parser | str | None = None,
    timeout_s: float | None = None,
) -> CrewAISource:
    """``tool`` (a crewai-tools or crewAI ``BaseTool`` instance) as a researchcrew source of ``source_type``.

    ``parser``: ``"search_results"``, ``"document_search"``, ``"page_text"`` or a function ``(output, query) ->
    list[Passage]`` (default: chosen from the output's shape). ``arguments``: fixed arguments for every call.
    ``timeout_s``: this source's own timeout (default ``retrieval.timeout_per_source_s``)."""
    return CrewAISource(
        tool,
        source_type=source_type,
        name=name,
        description=description,
        query_argument=query_argument,
        arguments=arguments,
        parser=parser,
        timeout_s=timeout_s,
    )


# Failures --------------------------------------------------------------------------------------------------
def failure_from_exception(tool_name: str, error: BaseException, keys: Sequence[str] = ()) -> ToolError | None:
    """The ``ToolError`` for an exception a crewAI tool raised, or None when it is not one a source raises for a
    known reason (then it is a bug). Reads the exception's type and the HTTP status it carries; imports no SDK."""
    kind_name = type(error).__name__
    status = _status_of(error)
    text = f"{tool_name}: {kind_name}: {error}"
    if isinstance(error, KeyError) and error.args and error.args[0] in keys:
        return ToolError("not_configured", f"{tool_name} needs {error.args[0]} set in the environment")
    if isinstance(error, ImportError):
        missing = getattr(error, "name", None) or str(error)
        return ToolError("not_configured", f"{tool_name} needs the Python package {missing!r} installed")
    if status is not None:
        if status == 429:
            return ToolError("http_error", f"{tool_name} is rate-limited (HTTP 429)", status_code=429)
        if status in (401, 403):
            return ToolError("http_error", f"{tool_name}: the key was refused (HTTP {status})", status_code=status)
        return ToolError("http_error", f"{tool_name} answered HTTP {status}", status_code=status)
    names = " ".join(cls.__name__ for cls in type(error).__mro__).lower()
    if isinstance(error, TimeoutError) or "timeout" in names:
        return ToolError("timeout", f"{tool_name} timed out ({kind_name})")
    if isinstance(error, ConnectionError) or "connect" in names or "network" in names:
        return ToolError("unreachable", f"{tool_name} could not connect ({kind_name})")
    if "ratelimit" in names or "usagelimit" in names:
        return ToolError("http_error", f"{tool_name} is rate-limited ({kind_name})", status_code=429)
    if any(word in names for word in ("apikey", "authentication", "unauthorized", "forbidden", "invalidkey")):
        return ToolError("http_error", f"{tool_name}: the key was refused ({kind_name})", status_code=401)
    if isinstance(error, ValueError | LookupError | TypeError) or "json" in names:
        return ToolError("bad_response", text)
    return None


def _failure_from_text(tool_name: str, text: str) -> ToolError:
    """An error a tool returned as its answer ("Error: 429 Too Many Requests ...")."""
    line = " ".join(text.split())[:300]
    status = next((int(code) for code in re.findall(r"\b([45]\d\d)\b", line)), None)
    lowered = line.lower()
    if status == 429 or "rate limit" in lowered or "too many requests" in lowered:
        return ToolError("http_error", f"{tool_name} is rate-limited: {line}", status_code=429)
    if "timed out" in lowered or "timeout" in lowered:
        return ToolError("timeout", f"{tool_name}: {line}")
    if "connection" in lowered or "resolve" in lowered:
        return ToolError("unreachable", f"{tool_name}: {line}")
    if status is not None:
        return ToolError("http_error", f"{tool_name}: {line}", status_code=status)
    return ToolError("bad_response", f"{tool_name} returned an error: {line}")


def _status_of(error: BaseException) -> int | None:
    for holder in (error, getattr(error, "response", None)):
        for attribute in ("status_code", "status"):
            value = getattr(holder, attribute, None)
            if isinstance(value, int) and not isinstance(value, bool) and 400 <= value <= 599:
                return value
    return None


def _is_failure(output: Any) -> bool:
    """crewAI's ``ToolFailure`` (a spent usage limit), recognised without importing crewAI."""
    return type(output).__name__ == "ToolFailure" and hasattr(output, "message")


# The tool's shape ------------------------------------------------------------------------------------------
def _schema_fields(tool: Any) -> dict[str, bool]:
    """The tool's argument names → whether each is required (from its pydantic ``args_schema``)."""
    schema = getattr(tool, "args_schema", None)
    fields = getattr(schema, "model_fields", None)
    if not isinstance(fields, dict):
        return {}
    return {name: bool(info.is_required()) for name, info in fields.items()}


def _query_argument(fields: dict[str, bool]) -> str | None:
    for name in QUERY_ARGUMENTS:
        if name in fields:
            return name
    required = [name for name, is_required in fields.items() if is_required]
    return required[0] if len(required) == 1 else None


def _has_own_arun(tool: Any) -> bool:
    """Whether the tool's class implements ``_arun`` itself (crewAI's ``BaseTool._arun`` only raises)."""
    for cls in type(tool).__mro__:
        if "_arun" in cls.__dict__:
            return cls.__module__.split(".")[0] != "crewai" and inspect.iscoroutinefunction(cls.__dict__["_arun"])
    return False


def _string_attribute(tool: Any, names: Sequence[str]) -> str | None:
    for name in names:
        value = getattr(tool, name, None)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _snake(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:64] or "crewai_tool"
