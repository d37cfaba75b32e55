"""``/mcp`` of the service, end to end with the official MCP client over streamable HTTP: keys, tools, structured
results, progress notifications, elicitation of a deep run's pauses, tool errors, and the resources."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.shared.context import RequestContext
from mcp.shared.exceptions import McpError
from mcp.types import ElicitRequestParams, ElicitResult, TextContent

from researchcrew.mcp_server._server import OPERATION_MS
from researchcrew.testing import FakeTool
from tests.deep.corpus import CorpusTool
from tests.mcp.support import ProgressLog, http_session, mcp_service

pytestmark = pytest.mark.slow

TOOLS = {"ask", "search_knowledge_base", "research", "list_sessions", "add_document"}


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def test_a_request_without_a_valid_key_is_refused_with_401(tmp_path: Path) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    with mcp_service(tmp_path, [CorpusTool()]) as service:
        async with httpx.AsyncClient() as http:
            missing = await http.post(service.url, json=initialize, headers=headers)
            wrong = await http.post(service.url, json=initialize, headers={**headers, "Authorization": "Bearer nope"})
        assert missing.status_code == 401 and wrong.status_code == 401
        assert missing.headers["content-type"].startswith("application/problem+json")
        assert missing.headers["www-authenticate"].startswith("Bearer")
        assert "API key" in missing.json()["detail"] and "not valid" in wrong.json()["detail"]
        with pytest.raises(BaseExceptionGroup) as refused:  # the SDK's client sees the same refusal
            async with http_session(service.url):
                pass
        assert refused.group_contains(httpx.HTTPStatusError, match="401 Unauthorized")


async def test_tools_answer_with_text_structured_content_and_progress(tmp_path: Path) -> None:
    with mcp_service(tmp_path, [CorpusTool()]) as service:
        async with http_session(service.url, service.auth("ada")) as session:
            listed = await session.list_tools()
            assert {tool.name for tool in listed.tools} == TOOLS
            schemas = {tool.name: tool for tool in listed.tools}
            assert "citations" in schemas["ask"].outputSchema["properties"]  # type: ignore[index]
            assert schemas["search_knowledge_base"].annotations.readOnlyHint  # type: ignore[union-attr]

            progress = ProgressLog()
            answer = await session.call_tool(
                "ask",
                {"question": "How does pooled testing save tests?", "format": "concise"},
                progress_callback=progress,
            )
            assert not answer.isError, text_of(answer)
            structured = answer.structuredContent
            assert structured is not None and structured["citations"], structured
            assert structured["citations"][0]["source_type"] == "rag" and "[1]" in structured["answer"]
            assert answer.meta is not None and answer.meta[OPERATION_MS] > 0  # the runtime's own time, for benchmarks
            assert "Sources:" in text_of(answer) and structured["citations"][0]["title"] in text_of(answer)
            assert any("retrieve" in message for message in progress.messages), progress.updates
            assert [p for p, _, _ in progress.updates] == list(range(1, len(progress.updates) + 1))
            session_id = structured["session_id"]

            found = await session.call_tool("search_knowledge_base", {"query": "dilution of pools", "num_results": 2})
            assert not found.isError, text_of(found)
            passages = found.structuredContent["passages"]  # type: ignore[index]
            assert 1 <= len(passages) <= 2 and passages[0]["title"] == "Dilution in pools"
            assert "Dilution lowers the sensitivity" in text_of(found)

            sessions = await session.call_tool("list_sessions", {})
            listed_sessions = sessions.structuredContent["sessions"]  # type: ignore[index]
            assert [s["session_id"] for s in listed_sessions] == [session_id]
            assert listed_sessions[0]["title"].startswith("How does pooled testing")

            # The same session, continued: the conversation layer sees the history of the first answer.
            again = await session.call_tool(
                "ask", {"question": "And when is it a poor choice?", "session_id": session_id}
            )
            assert again.structuredContent["session_id"] == session_id  # type: ignore[index]
            service.flush_memory()
            history = await session.read_resource(f"researchcrew://sessions/{session_id}")  # type: ignore[arg-type]
            assert "How does pooled testing save tests?" in history.contents[0].text  # type: ignore[union-attr]

        async with http_session(service.url, service.auth("bob")) as bob:
            assert (await bob.call_tool("list_sessions", {})).structuredContent == {"sessions": []}
            with pytest.raises(McpError, match="no session"):
                await bob.read_resource(f"researchcrew://sessions/{session_id}")  # type: ignore[arg-type]


async def test_errors_are_tool_errors_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    broken = FakeTool("rag", fail_with=("unreachable", "Milvus at http://admin:hunter22@db:19530 refused"))
    with mcp_service(tmp_path, [broken]) as service:
        async with http_session(service.url, service.auth("ada")) as session:
            failed = await session.call_tool("search_knowledge_base", {"query": "pooled testing"})
            assert failed.isError
            message = text_of(failed)
            assert "unreachable" in message and "refused" in message
            assert "hunter22" not in message and "Traceback" not in message and "\n" not in message

            empty = await session.call_tool("ask", {"question": ""})
            assert empty.isError and "\n" not in text_of(empty) and "Traceback" not in text_of(empty)
            bad_format = await session.call_tool("ask", {"question": "What is pooling?", "format": "poem"})
            assert bad_format.isError and "format: Input should be 'concise'" in text_of(bad_format)
            unknown = await session.call_tool("research", {"question": "x", "max_subquestions": 99})
            assert unknown.isError


def _answers(*replies: dict[str, Any] | None) -> Any:
    """An elicitation callback giving ``replies`` in order (None: decline) and keeping what it was asked."""
    asked: list[ElicitRequestParams] = []
    queue = list(replies)

    async def elicit(context: RequestContext[ClientSession, Any], params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        reply = queue.pop(0)
        return ElicitResult(action="decline") if reply is None else ElicitResult(action="accept", content=reply)

    elicit.asked = asked  # type: ignore[attr-defined]
    return elicit


async def test_research_asks_for_the_plan_through_elicitation(tmp_path: Path) -> None:
    with mcp_service(tmp_path, [CorpusTool(only_if="pooled")]) as service:
        elicit = _answers({"answer": "pooled testing"}, {"approve": True, "leave_out": "3"})
        async with http_session(service.url, service.auth("ada"), elicit=elicit) as session:
            progress = ProgressLog()
            result = await session.call_tool(
                "research",
                {"question": "What is known about the screening method?", "max_subquestions": 3},
                progress_callback=progress,
            )
            assert not result.isError, text_of(result)
            run = result.structuredContent
            assert run is not None and run["status"] == "completed" and run["plan_approved_by"] == "user"
            assert len(run["plan"]) == 2 and run["citations"] and run["report"]
            asked = elicit.asked  # type: ignore[attr-defined]
            assert "Before researching" in asked[0].message and "Research plan" in asked[1].message
            assert "leave_out" in json.dumps(asked[1].requestedSchema)
            assert any(m.startswith("research") for m in progress.messages)
            assert any("resuming" in m for m in progress.messages)

            report = await session.read_resource(f"researchcrew://reports/{run['run_id']}")  # type: ignore[arg-type]
            assert run["report"] in report.contents[0].text  # type: ignore[union-attr]

        declined = _answers({"approve": False})
        async with http_session(service.url, service.auth("ada"), elicit=declined) as session:
            result = await session.call_tool("research", {"question": "What is known about pooled testing?"})
            assert result.structuredContent["status"] == "cancelled"  # type: ignore[index]
            with pytest.raises(McpError, match="no report"):
                await session.read_resource(f"researchcrew://reports/{result.structuredContent['run_id']}")  # type: ignore[arg-type,index]

        async with http_session(service.url, service.auth("bob")) as bob:
            with pytest.raises(McpError):  # ada's report is not bob's
                await bob.read_resource(f"researchcrew://reports/{run['run_id']}")  # type: ignore[arg-type]


async def test_research_approves_its_own_plan_when_the_client_cannot_elicit(tmp_path: Path) -> None:
    with mcp_service(tmp_path, [CorpusTool()]) as service:
        async with http_session(service.url, service.auth("ada")) as session:
            progress = ProgressLog()
            result = await session.call_tool(
                "research",
                {"question": "What is known about pooled testing?", "max_subquestions": 2},
                progress_callback=progress,
            )
            run = result.structuredContent
            assert run is not None and run["status"] == "completed" and run["plan_approved_by"] == "auto", run
            assert progress.updates and "[1]" in text_of(result)


async def test_each_mcp_message_counts_against_the_users_rate_limit(tmp_path: Path) -> None:
    with mcp_service(tmp_path, [CorpusTool()], rate_limit="5/minute") as service:
        with pytest.raises(BaseExceptionGroup) as limited:
            async with http_session(service.url, service.auth("ada")) as session:  # initialize, initialized: 2
                await session.list_tools()  # 3
                for _ in range(3):  # 4, 5, then past the limit
                    await session.call_tool("list_sessions", {})
        assert limited.group_contains(httpx.HTTPStatusError, match="429 Too Many Requests")
        async with http_session(service.url, service.auth("bob")) as bob:  # another user's budget is their own
            assert not (await bob.call_tool("list_sessions", {})).isError
