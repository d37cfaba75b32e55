"""`researchcrew mcp` as a real subprocess, driven over stdio by the official MCP client, offline, over the
pre-ingested demo knowledge base: every tool, progress notifications, a tool error, and the session resource."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import TextContent

from researchcrew.data import demo_corpus_path
from tests.e2e.support import offline_environment
from tests.helpers.demo_folder import copy_of_the_demo_folder
from tests.mcp.support import ProgressLog

pytestmark = pytest.mark.slow  # a subprocess, the embedding model and Milvus Lite

TOPICS = ("Flaky", "Flakiness", "Mutation", "Metamorphic")
# What the subprocess needs of this environment besides the offline settings (it gets nothing else).
PASSED_ON = ("PYTHONPATH", "CREWAI_DISABLE_TELEMETRY", "OTEL_SDK_DISABLED", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory whose knowledge base holds the demo abstracts (among them those on flaky, mutation and
    metamorphic testing): a copy of the run's one `researchcrew ingest --demo` (tests/helpers/demo_folder.py)."""
    folder = copy_of_the_demo_folder(tmp_path_factory, tmp_path_factory.mktemp("mcp_stdio") / "d")
    titles = [json.loads(line)["title"] for line in demo_corpus_path().read_text(encoding="utf-8").splitlines()]
    assert sum(any(word in title for word in TOPICS) for title in titles) >= 6
    return folder


def environment(data_dir: Path) -> dict[str, str]:
    return {**{name: os.environ[name] for name in PASSED_ON if name in os.environ}, **offline_environment(data_dir)}


def server_parameters(data_dir: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "researchcrew", "mcp", *args], env=environment(data_dir)
    )


@asynccontextmanager
async def stdio_session(data_dir: Path, *args: str) -> AsyncIterator[tuple[ClientSession, Any]]:
    with (data_dir / "server.log").open("a") as errlog:
        async with (
            stdio_client(server_parameters(data_dir, *args), errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            initialized = await asyncio.wait_for(session.initialize(), 120)
            yield session, initialized


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def test_every_tool_over_stdio(data_dir: Path) -> None:
    async with stdio_session(data_dir, "--user", "ada") as (session, initialized):
        assert initialized.serverInfo.name == "researchcrew"
        assert initialized.capabilities.tools is not None and initialized.capabilities.resources is not None
        tools = {tool.name for tool in (await session.list_tools()).tools}
        assert tools == {"ask", "search_knowledge_base", "research", "list_sessions", "add_document"}

        progress = ProgressLog()
        answer = await session.call_tool("ask", {"question": "What causes flaky tests?"}, progress_callback=progress)
        assert not answer.isError, text_of(answer)
        structured = answer.structuredContent
        assert structured is not None and structured["citations"], (structured, (data_dir / "server.log").read_text())
        assert any("flak" in (c["title"] or "").lower() for c in structured["citations"])
        assert "[1]" in text_of(answer) and "Sources:" in text_of(answer)
        assert any(message.startswith("retrieve") for message in progress.messages), progress.updates

        found = await session.call_tool("search_knowledge_base", {"query": "flaky tests", "num_results": 3})
        passages = found.structuredContent["passages"]  # type: ignore[index]
        assert not found.isError and 1 <= len(passages) <= 3
        assert all(passage["title"] and passage["source_id"] for passage in passages)
        assert any("flak" in passage["text"].lower() for passage in passages)

        sessions = (await session.call_tool("list_sessions", {})).structuredContent["sessions"]  # type: ignore[index]
        assert structured["session_id"] in [s["session_id"] for s in sessions]

        failed = await session.call_tool("search_knowledge_base", {"query": "flaky", "num_results": 0})
        assert failed.isError and "num_results" in text_of(failed) and "\n" not in text_of(failed)

        history = ""
        for _ in range(50):  # the exchange is remembered just after the answer goes out
            try:
                read = await session.read_resource(f"researchcrew://sessions/{structured['session_id']}")  # type: ignore[arg-type]
            except Exception:
                await asyncio.sleep(0.2)
                continue
            history = read.contents[0].text  # type: ignore[union-attr]
            break
        assert "What causes flaky tests?" in history

        research = await session.call_tool(
            "research", {"question": "What causes flaky tests?", "max_subquestions": 2}, progress_callback=progress
        )
        run = research.structuredContent
        assert not research.isError and run is not None, text_of(research)
        assert run["status"] == "completed" and run["plan_approved_by"] == "auto" and run["report"], run


async def test_another_user_sees_nothing_of_ada(data_dir: Path) -> None:
    async with stdio_session(data_dir, "--user", "bob") as (session, _):
        sessions = (await session.call_tool("list_sessions", {})).structuredContent
        assert sessions == {"sessions": []}
