"""No secret in any reply (issue 17, items 1 and 7): every dependency down *with a password in its URL*, driven
through the real app, and the password is in no response body, header, server-sent event or log record.

The dependencies, each unreachable at a closed loopback port (or stopped after start): Redis (jobs, kickoff, rate
limits), PostgreSQL and SQLite (the memory store: API keys, sessions, messages, completions, jobs), Milvus (the
knowledge base), Zep (memory recall), Firecrawl (web search) and the LLM. Each scenario asks every route a user
hits: job runs, kickoff, session messages (JSON and SSE), chat completions (JSON and stream) and ``/readyz``.

A store that stops answering is a 503 with ``Retry-After`` on every route, whose detail names no SQL and no URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import shutil
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.llm import build_llm
from researchcrew.memory.zep import ZepMemory
from researchcrew.redaction import MASK, mask_url, redact
from researchcrew.settings import (
    FirecrawlSettings,
    JobsSettings,
    LLMSettings,
    MemorySettings,
    MilvusSettings,
    RedisSettings,
    RetrievalSettings,
    ServiceSettings,
    Settings,
    ZepSettings,
)
from researchcrew.testing import FakeTool, fake_chunk
from researchcrew.tools.base import Tool
from researchcrew.tools.memory_recall import MemoryTool
from researchcrew.tools.rag import RAGTool
from researchcrew.tools.web import WebSearchTool
from tests.helpers.services import fresh_postgres_database
from tests.loopback.server import closed_port
from tests.service.support import EVIDENCE, ServiceHarness, running_service

PASSWORD = "Pw7731-hunter2-BLUEFALCON"  # in every URL; must come back nowhere
API_KEY = "sk-key-5ecret-ZX81-do-not-echo"  # the configured API keys of Firecrawl, Zep and the LLM
SECRETS = (PASSWORD, API_KEY)
SQL_WORDS = ("SELECT ", "INSERT INTO", "UPDATE ", "[SQL:", "[parameters:")


def secret_url(scheme: str, port: int, path: str = "") -> str:
    return f"{scheme}://researcher:{PASSWORD}@127.0.0.1:{port}{path}"


def companion() -> FakeTool:
    """A healthy source, so that answers come back while the dependency under test is down."""
    return FakeTool("notes", chunks=[fake_chunk("notes", 1, content=EVIDENCE, semantic_relevance=0.9)])


def settings_for(data_dir: Path, **groups: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "service": ServiceSettings(rate_limit="100000/minute"),
        "retrieval": RetrievalSettings(timeout_per_source_s=2.0, run_deadline_s=8.0),
        "jobs": JobsSettings(retry_backoff_s=0.01, retry_backoff_max_s=0.05),
    }
    return Settings(**{**values, **groups})


# ---- what a user gets back ----------------------------------------------------------------------------------------
@dataclass
class Seen:
    """Every reply of one scenario, as text: status line, headers and body (the whole stream for SSE)."""

    replies: list[tuple[str, int, str]] = field(default_factory=list)

    def add(self, route: str, response: httpx.Response, body: str | None = None) -> httpx.Response:
        headers = "\n".join(f"{name}: {value}" for name, value in response.headers.items())
        self.replies.append((route, response.status_code, f"{headers}\n\n{response.text if body is None else body}"))
        return response

    def status(self, route: str) -> int:
        return next(status for name, status, _ in self.replies if name == route)

    def assert_no_secret(self, caplog: pytest.LogCaptureFixture) -> None:
        for route, status, text in self.replies:
            for secret in SECRETS:
                assert secret not in text, f"{route} ({status}) carries a secret:\n{text}"
        for record in caplog.records:
            rendered = record.getMessage() + "\n" + (record.exc_text or "")
            for secret in SECRETS:
                assert secret not in rendered, f"log record of {record.name} carries a secret: {rendered}"
        for secret in SECRETS:
            assert secret not in caplog.text


async def ask_every_route(client: httpx.AsyncClient, harness: ServiceHarness) -> Seen:
    """The routes a user hits, each once: readiness, a session and its messages, completions, a job run, kickoff."""
    seen = Seen()
    auth = harness.auth("ada")
    seen.add("readyz", await client.get("/readyz"))
    created = seen.add("session", await client.post("/v1/sessions", headers=auth, json={}))
    session_id = created.json().get("session_id", "s-1") if created.status_code == 201 else "s-1"
    question = {"question": "What is metamorphic testing?"}
    seen.add("message", await client.post(f"/v1/sessions/{session_id}/messages", headers=auth, json=question))
    stream_headers = {**auth, "Accept": "text/event-stream"}
    async with client.stream(
        "POST", f"/v1/sessions/{session_id}/messages", headers=stream_headers, json=question
    ) as response:
        seen.add("message-sse", response, (await response.aread()).decode())
    chat = {"model": "researchcrew", "messages": [{"role": "user", "content": "What is metamorphic testing?"}]}
    seen.add("completion", await client.post("/v1/chat/completions", headers=auth, json=chat))
    async with client.stream("POST", "/v1/chat/completions", headers=auth, json={**chat, "stream": True}) as response:
        seen.add("completion-stream", response, (await response.aread()).decode())
    job = {"name": "nightly", "questions": ["What is metamorphic testing?"]}
    seen.add("job", await client.post("/v1/jobs", headers=auth, json=job))
    seen.add("job-run", await client.post("/v1/jobs/nightly/runs", headers=auth))
    seen.add("kickoff", await client.post("/kickoff", headers=auth, json={"inputs": {"question": "What is MT?"}}))
    return seen


@contextlib.asynccontextmanager
async def app_and_client(settings: Settings, tools: Sequence[Tool], **options: Any) -> AsyncIterator[Any]:
    async with running_service(settings, tools=tools, **options) as harness, harness.client() as client:
        yield harness, client


# ---- redaction itself: one table ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("redis://:pw@h:6399/0", "redis://:***@h:6399/0"),
        ("redis://user:pw@h/0 and http://a:b@c", "redis://user:***@h/0 and http://a:***@c"),
        ("postgresql+asyncpg://rc:s3cr%40t@db:5432/rc", "postgresql+asyncpg://rc:***@db:5432/rc"),
        (
            "cannot reach Redis at rediss://default:p@ss:w0rd@cache:6380/1: refused",
            "cannot reach Redis at rediss://default:***@cache:6380/1: refused",
        ),
        ("http://h/x?api_key=abc&page=2", "http://h/x?api_key=***&page=2"),
        ("http://h/x?key=abc", "http://h/x?key=***"),
        ("http://h/x?page=1&token=abc", "http://h/x?page=1&token=***"),
        ("http://h/x?password=abc", "http://h/x?password=***"),
        ("retrying with key=abc123 now", "retrying with key=*** now"),
        ("password=hunter2 user=ada", "password=*** user=ada"),
        ("Authorization: Bearer sk-abcdefgh", "Authorization: Bearer ***"),
        ("headers={'Authorization': 'Api-Key zk-12345678'}", "headers={'Authorization': 'Api-Key ***'}"),
        ("no secret here: http://milvus:19530/db", "no secret here: http://milvus:19530/db"),
        ("keyboard=1 monkey business", "keyboard=1 monkey business"),
    ],
)
def test_redaction_masks_every_credential_shape(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_known_secrets_are_masked_wherever_they_appear() -> None:
    from researchcrew.redaction import forget_secrets, remember_secrets

    remember_secrets(["Zz-remembered-secret"])
    try:
        assert redact("the key Zz-remembered-secret was refused") == f"the key {MASK} was refused"
    finally:
        forget_secrets(["Zz-remembered-secret"])
    assert mask_url("http://milvus:19530") == "http://milvus:19530"


def test_settings_secrets_are_remembered(tmp_path: Path) -> None:
    from researchcrew.redaction import forget_secrets, known_secrets, remember_settings_secrets

    settings = settings_for(
        tmp_path,
        redis=RedisSettings(url=secret_url("redis", 6399, "/0")),
        firecrawl=FirecrawlSettings(api_key=API_KEY),
    )
    remember_settings_secrets(settings)
    try:
        assert {PASSWORD, API_KEY} <= known_secrets()
    finally:
        forget_secrets([PASSWORD, API_KEY])


def test_stored_job_errors_are_shown_without_secret_or_sql() -> None:
    from researchcrew.jobs.contracts import ItemFailure

    statement = "[SQL: SELECT jobs.webhook_secret FROM jobs WHERE jobs.id = $1]"
    parameters = "[parameters: ('" + API_KEY + "',)]"
    background = "(Background on this error at: https://sqlalche.me/e/21/e3q8)"
    driver = "\n".join(["MemoryStoreError: (asyncpg.exceptions.X) boom", statement, parameters, background])
    driver += f" at {secret_url('redis', 6399, '/0')}"
    message = ItemFailure(kind="error", message=driver).message
    assert PASSWORD not in message and API_KEY not in message and "SELECT" not in message
    assert "boom" in message and "redis://researcher:***@127.0.0.1:6399/0" in message


def test_log_records_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    from researchcrew.redaction import install_log_redaction

    install_log_redaction()
    caplog.set_level(logging.INFO)
    logger = logging.getLogger("researchcrew.test_redaction")
    logger.warning("cannot reach %s", secret_url("redis", 1, "/0"))
    try:
        raise ConnectionError(f"refused: {secret_url('postgresql', 2)}")
    except ConnectionError:
        logger.exception("store down")
    logging.getLogger("uvicorn.error").error("Bearer %s", API_KEY + "x" * 3)
    assert PASSWORD not in caplog.text and API_KEY not in caplog.text
    assert all(PASSWORD not in record.getMessage() for record in caplog.records)


# ---- Redis -----------------------------------------------------------------------------------------------------------
async def test_redis_down_with_a_password(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    settings = settings_for(tmp_path, redis=RedisSettings(url=secret_url("redis", closed_port(), "/0"), timeout_s=1))
    async with app_and_client(settings, [companion()]) as (harness, client):
        seen = await ask_every_route(client, harness)
    seen.assert_no_secret(caplog)
    assert seen.status("readyz") == 503
    for route in ("job-run", "kickoff"):
        assert seen.status(route) == 503
    assert seen.status("message") == 200  # the limits degrade; the answer does not need Redis


# ---- the memory store: PostgreSQL through a proxy that is stopped, and SQLite whose file goes away ----------------
class TcpProxy:
    """A loopback TCP proxy to PostgreSQL that can be stopped: the server is gone, as far as the app can tell."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self.writers += [writer, upstream_writer]
        await asyncio.gather(
            self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer), return_exceptions=True
        )

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.transport.abort()

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.transport.abort()
        await asyncio.sleep(0.05)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    with fresh_postgres_database("rc_nosecret") as url:
        yield url


def assert_store_outage(seen: Seen, routes: Sequence[str]) -> None:
    """Every route that needs the store: 503 with Retry-After, and no SQL in the reply."""
    for route, status, text in seen.replies:
        for word in SQL_WORDS:
            assert word not in text, f"{route} ({status}) carries SQL:\n{text}"
    for route in routes:
        reply = next(text for name, _, text in seen.replies if name == route)
        assert seen.status(route) == 503, reply
        assert "retry-after:" in reply.lower(), reply


STORE_ROUTES = ("readyz", "session", "message", "message-sse", "completion", "completion-stream", "job", "kickoff")


async def test_postgres_memory_store_stops(tmp_path: Path, postgres_url: str, caplog: pytest.LogCaptureFixture) -> None:
    from sqlalchemy.engine import make_url

    caplog.set_level(logging.INFO)
    real = make_url(postgres_url)
    proxy = TcpProxy(int(real.port or 5432))
    port = await proxy.start()
    url = real.set(password=PASSWORD, port=port).render_as_string(hide_password=False)
    settings = settings_for(tmp_path, memory=MemorySettings(database_url=url, connect_timeout_s=5))
    async with app_and_client(settings, [companion()]) as (harness, client):
        await proxy.stop()
        seen = await ask_every_route(client, harness)
    seen.assert_no_secret(caplog)
    assert_store_outage(seen, [route for route in STORE_ROUTES if route != "readyz"] + ["readyz"])


async def test_postgres_memory_store_unreachable_at_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from researchcrew.errors import MemoryStoreError

    caplog.set_level(logging.INFO)
    url = secret_url("postgresql+asyncpg", closed_port(), "/rc")
    settings = settings_for(tmp_path, memory=MemorySettings(database_url=url, connect_timeout_s=2))
    with pytest.raises(MemoryStoreError) as raised:
        async with app_and_client(settings, [companion()]):
            pass
    assert PASSWORD not in str(raised.value)
    Seen().assert_no_secret(caplog)


def take_the_file_away(database: Path) -> None:
    """A directory where the SQLite file was: every new connection fails with "unable to open database file"."""
    shutil.move(database, database.with_name("moved.db"))
    for suffix in ("-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    database.mkdir()


async def test_sqlite_memory_store_goes_away(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    settings = settings_for(tmp_path)
    async with app_and_client(settings, [companion()]) as (harness, client):
        store = await harness.runtime.memory_store()
        await store.dispose_connections()
        take_the_file_away(tmp_path / "memory.db")
        seen = await ask_every_route(client, harness)
    assert_store_outage(seen, STORE_ROUTES)
    seen.assert_no_secret(caplog)


# ---- the sources: Milvus, Zep, Firecrawl, the LLM ------------------------------------------------------------------
class HashEmbedder:
    """A tiny deterministic embedder (the query vector is never used: Milvus does not answer)."""

    dimension = 384
    model_name = "hash-embedder"

    def embed_documents(self, texts: list[str]) -> Any:
        return np.stack([self.embed_query(text) for text in texts])

    def embed_query(self, text: str) -> Any:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")
        vector = np.random.default_rng(seed).standard_normal(self.dimension).astype(np.float32)
        return vector / np.linalg.norm(vector)


async def test_sources_down_with_passwords(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    settings = settings_for(
        tmp_path,
        milvus=MilvusSettings(uri=secret_url("http", closed_port()), timeout_s=1.0),
        zep=ZepSettings(api_url=secret_url("http", closed_port()), api_key=API_KEY, timeout_s=1.0),
        firecrawl=FirecrawlSettings(api_url=secret_url("http", closed_port()), api_key=API_KEY, timeout_s=1.0),
        llm=LLMSettings(
            model="openai/gpt-4o-mini",
            base_url=secret_url("http", closed_port(), "/v1?api_key=" + API_KEY),
            api_key=API_KEY,
            timeout_s=2.0,
            max_retries=0,
            stream=False,
        ),
    )
    knowledge_base = KnowledgeBase(settings, embedder=HashEmbedder())
    zep = ZepMemory(settings.zep)
    tools: list[Tool] = [RAGTool(knowledge_base), WebSearchTool(settings.firecrawl), MemoryTool(zep), companion()]
    try:
        async with app_and_client(settings, tools, llm=build_llm(settings.llm)) as (harness, client):
            seen = await ask_every_route(client, harness)
            answer = next(text for route, _, text in seen.replies if route == "message")
    finally:
        await zep.aclose()
        knowledge_base.close()
    seen.assert_no_secret(caplog)
    assert seen.status("message") == 200, answer
    assert seen.status("readyz") == 503  # the knowledge base does not answer
    for source in ("rag", "web", "memory"):
        assert f'"source_type":"{source}"' in answer.replace(" ", "")


def test_a_worker_process_redacts_its_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    from researchcrew.jobs.queue import worker_broker
    from researchcrew.redaction import forget_secrets, known_secrets

    monkeypatch.setenv("RESEARCHCREW_REDIS__URL", secret_url("redis", closed_port(), "/0"))
    forget_secrets([PASSWORD])
    worker_broker()  # what taskiq calls in each worker process (no connection is made yet)
    try:
        assert PASSWORD in known_secrets()
        record = logging.getLogRecordFactory()("w", logging.WARNING, __file__, 1, "at %s", (PASSWORD,), None)
        assert PASSWORD not in record.getMessage()
    finally:
        forget_secrets([PASSWORD])
