"""Pieces of the OpenAI-compatible route tests and the browser test: the service app over a runtime with chosen
sources and keys for two users, the official ``openai`` SDK pointed at it (in process through ``ASGITransport``),
and uvicorn serving it on a loopback port in a thread (for a real browser)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import openai

from researchcrew.settings import ServiceSettings, Settings
from researchcrew.testing import FakeTool, fake_chunk
from researchcrew.tools.base import Tool
from tests.service import support as service_support
from tests.service.support import ServiceHarness

QUESTION = "What is metamorphic testing?"
EVIDENCE = (
    "Metamorphic testing checks relations between the outputs of related inputs. "
    "It addresses the oracle problem when expected outputs are unknown."
)


def service_settings(data_dir: Path, **service: Any) -> Settings:
    return Settings(data_dir=data_dir, service=ServiceSettings(**service))


def evidence_tools() -> list[Tool]:
    """A knowledge base that answers with one cited passage, and a web search that fails."""
    chunk = fake_chunk(
        "rag",
        1,
        content=EVIDENCE,
        semantic_relevance=0.9,
        title="Metamorphic Testing: A Review",
        url="https://example.org/metamorphic",
        authors=["T. Y. Chen"],
    )
    return [FakeTool("rag", chunks=[chunk]), FakeTool("web", fail_with=("http_error", "Firecrawl answered HTTP 429"))]


class Harness(ServiceHarness):
    """The service harness (an app with its lifespan running, its runtime, keys for ada and bob), with the official
    OpenAI SDK as a client."""

    def http(self) -> httpx.AsyncClient:
        return self.client()

    @asynccontextmanager
    async def openai(self, user: str = "ada", **options: Any) -> AsyncIterator[openai.AsyncOpenAI]:
        """The official SDK as a user of this app (no retries unless asked: a test sees the first answer)."""
        async with self.http() as http:
            options.setdefault("max_retries", 0)
            yield openai.AsyncOpenAI(
                base_url="http://service.test/v1", api_key=self.keys.get(user, "none"), http_client=http, **options
            )


@asynccontextmanager
async def running_service(
    settings: Settings, *, tools: Sequence[Tool] | None = None, **runtime_options: Any
) -> AsyncIterator[Harness]:
    tools = list(tools) if tools is not None else evidence_tools()
    async with service_support.running_service(
        settings, tools=tools, harness_class=Harness, **runtime_options
    ) as harness:
        yield harness
