"""The other direction of issue 24: a crewAI Agent uses researchcrew through crewai-tools' ``MCPServerAdapter``
against the service's ``/mcp`` (streamable HTTP, with an API key): the adapter lists researchcrew's tools as crewAI
tools, ``ask`` returns the cited answer, and an agent driven by the scripted ``FakeLLM`` reads it as the tool's
observation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from crewai import Agent
from crewai_tools import MCPServerAdapter

from researchcrew.testing import FakeLLM
from tests.deep.corpus import CorpusTool
from tests.mcp.support import mcp_service

pytestmark = pytest.mark.slow

QUESTION = "How does pooled testing save tests?"


def test_crewai_tools_mcp_adapter_gives_an_agent_researchcrew_s_tools(tmp_path: Path) -> None:
    source = CorpusTool()
    seen: list[str] = []

    def call_ask(messages: list[dict[str, Any]]) -> str:
        return f"Thought: researchcrew cites.\nAction: ask\nAction Input: {json.dumps({'question': QUESTION})}"

    def answer(messages: list[dict[str, Any]]) -> str:
        seen.append("\n".join(str(message.get("content", "")) for message in messages))
        return "Thought: I now know the final answer\nFinal Answer: " + seen[-1].rsplit("Observation:", 1)[-1][:500]

    with mcp_service(tmp_path, [source]) as service:
        server = {"url": service.url, "transport": "streamable-http", "headers": service.auth("ada")}
        with MCPServerAdapter(server, connect_timeout=60) as tools:
            names = [tool.name for tool in tools]
            direct = tools["search_knowledge_base"].run(query="pooled testing")
            agent = Agent(
                role="Research analyst",
                goal="Answer questions with cited sources",
                backstory="You use the researchcrew tools.",
                llm=FakeLLM([call_ask, answer]),
                tools=list(tools),
                max_iter=2,
            )
            output = agent.kickoff(QUESTION)

    assert {"ask", "search_knowledge_base", "research", "list_sessions"} <= set(names), names
    assert "pooled" in str(direct).lower()
    assert any(query.startswith("How does pooled testing") for query in source.queries), source.queries
    assert seen and "[1]" in seen[0].rsplit("Observation:", 1)[-1], seen  # the cited answer came back to the agent
    assert "[1]" in output.raw
