"""The public API is exactly what ``researchcrew.__all__`` lists; changing it deliberately means editing this pin."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import researchcrew
from researchcrew import contracts, errors

PUBLIC_API = [
    "AggregatedContext",
    "ConfigurationError",
    "ContextChunk",
    "ContradictionRecord",
    "CoverageMetrics",
    "EvaluatorInput",
    "EvaluatorOutput",
    "FilteredContext",
    "FinalResponse",
    "IngestError",
    "Jobs",
    "KnowledgeBase",
    "KnowledgeBaseError",
    "MemoryInput",
    "MemoryOutput",
    "MemoryStoreError",
    "ModelUnavailableError",
    "ProgressEvent",
    "QualityStatistics",
    "Query",
    "RemovalReason",
    "ResearchAssistant",
    "ResearchCrewError",
    "ResearchRequest",
    "ResponseOptions",
    "Retriever",
    "RetrieverInput",
    "RetrieverOutput",
    "Runtime",
    "Settings",
    "SourceFailure",
    "SourceReport",
    "SynthesizerInput",
    "SynthesizerOutput",
    "Tool",
    "ToolError",
    "ToolResult",
    "UserPreferences",
    "open_runtime",
]


def test_all_is_pinned() -> None:
    assert researchcrew.__all__ == PUBLIC_API


@pytest.mark.parametrize("name", PUBLIC_API)
def test_every_public_name_resolves(name: str) -> None:
    value = getattr(researchcrew, name)
    assert value is not None
    assert getattr(value, "__name__", name) == name


def test_the_type_stub_and_the_runtime_names_are_one_list() -> None:
    # Type checkers read __init__.pyi; the runtime loads from it too, so the two cannot drift apart.
    stub = ast.parse((Path(researchcrew.__file__).parent / "__init__.pyi").read_text())
    imported = sorted(alias.name for node in stub.body if isinstance(node, ast.ImportFrom) for alias in node.names)
    assert imported == PUBLIC_API


def test_reexports_are_the_same_objects_as_their_home_modules() -> None:
    for name in contracts.__all__:
        if name in PUBLIC_API:
            assert getattr(researchcrew, name) is getattr(contracts, name)
    assert researchcrew.ToolError is errors.ToolError
    from researchcrew.pipeline.retrieve import Retriever

    assert researchcrew.Retriever is Retriever
    from researchcrew.jobs.api import Jobs

    assert researchcrew.Jobs is Jobs


def test_unknown_attributes_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        _ = researchcrew.NoSuchThing


def test_importing_the_package_stays_cheap() -> None:
    # A fresh interpreter: `import researchcrew` must not pull in the heavy parts (they load on first use).
    code = (
        "import json, sys; import researchcrew; "
        "print(json.dumps(sorted(m for m in ('crewai', 'torch', 'pymilvus', 'sentence_transformers', "
        "'researchcrew.pipeline.retrieve', 'pydantic', 'researchcrew.contracts') if m in sys.modules)))"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(completed.stdout) == []


DEEP_OPERATIONS = [
    "research",
    "get_research_run",
    "answer_clarification",
    "decide_plan",
    "resume_research",
    "cancel_research",
    "export_report",  # a completed run's report as Markdown, HTML, PDF or DOCX (issue 21)
]


def test_each_deep_research_operation_has_one_name_at_every_door() -> None:
    # The SDK, the runner the CLI uses, and the HTTP handlers (their paths stay /v1/deep-runs/...) say the same.
    from fastapi.routing import APIRoute

    from researchcrew.deep.runner import DeepResearch
    from researchcrew.service.routes import _deep_runs as deep_runs

    for name in DEEP_OPERATIONS:
        assert callable(getattr(researchcrew.ResearchAssistant, name)), name
        assert callable(getattr(DeepResearch, name)), name
    handlers = {route.endpoint.__name__ for route in deep_runs.router.routes if isinstance(route, APIRoute)}
    # A run starts as a session message with mode "deep", or outside a session with POST /v1/deep-runs (research).
    assert handlers == set(DEEP_OPERATIONS)
    for retired in ("deep_run", "deep_research"):
        assert not hasattr(researchcrew.ResearchAssistant, retired), retired
    for retired in ("start", "get", "resume", "stream", "stream_resume", "cancel", "awaiting_clarification"):
        assert not hasattr(DeepResearch, retired), retired
    assert not [name for name in dir(researchcrew.Runtime) if name.endswith("deep_run")]  # no shortcuts left


MCP_TOOLS = {"ask", "search_knowledge_base", "research", "list_sessions", "add_document"}


async def test_each_mcp_tool_is_named_as_its_operation_at_the_other_doors() -> None:
    # The MCP server's tools, the SDK, the runtime and the HTTP handlers say the same names.
    from fastapi.routing import APIRoute

    from researchcrew.deep.runner import DeepResearch
    from researchcrew.mcp_server import McpDoor, build_server
    from researchcrew.service.chat_sessions import ChatSessions
    from researchcrew.service.routes import _sessions as sessions

    def unused() -> object:
        raise AssertionError("listing tools touches nothing")

    server = build_server(McpDoor(runtime=unused, sessions=unused, user_of=unused))  # type: ignore[arg-type]
    assert {tool.name for tool in await server.list_tools()} == MCP_TOOLS
    for name in ("ask", "search_knowledge_base", "research"):
        assert callable(getattr(researchcrew.ResearchAssistant, name)), name
    assert callable(researchcrew.Runtime.ask) and callable(researchcrew.Runtime.search_knowledge_base)
    assert callable(DeepResearch.research) and callable(ChatSessions.list_sessions)
    assert "list_sessions" in {
        route.endpoint.__name__ for route in sessions.router.routes if isinstance(route, APIRoute)
    }
