"""The runtime is the one place that opens stores and clients, it opens only what is asked for, and the request
model is what every door sends."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import researchcrew
from researchcrew.contracts import UserPreferences
from researchcrew.contracts.request import ResearchRequest, ResponseOptions, keyword_names
from researchcrew.runtime import open_runtime
from researchcrew.settings import Settings
from researchcrew.testing import FakeTool, fake_chunk

PACKAGE = Path(researchcrew.__file__).parent

# Constructors that open a resource, and the modules allowed to call them: the runtime, and each class's own home.
OPENERS = {
    r"\bKnowledgeBase\(": {"runtime.py", "knowledge/collection.py"},
    r"\bMemoryStore\.(open|from_settings)\(": {"runtime.py", "memory/store.py"},
    r"\bZepMemory\(": {"runtime.py", "memory/zep.py"},
    r"\bOutboxWorker\(": {"runtime.py", "memory/outbox.py"},
}


@pytest.mark.parametrize("pattern", sorted(OPENERS))
def test_only_the_runtime_opens_stores_and_clients(pattern: str) -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in OPENERS[pattern]:
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            code = line.split("#", 1)[0]
            if re.search(pattern, code) and not code.lstrip().startswith(('"', "'", "``")):
                offenders.append(f"{relative}:{number}: {line.strip()}")
    assert offenders == []


def test_opening_a_runtime_opens_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    runtime = open_runtime(Settings(data_dir=data_dir))
    assert runtime.settings.data_dir == data_dir
    assert not data_dir.exists()  # no Milvus Lite file, no SQLite file, not even the directory


async def test_a_closed_runtime_refuses_new_work(tmp_path: Path) -> None:
    runtime = open_runtime(Settings(data_dir=tmp_path), tools=[FakeTool("rag")], remember=False)
    answer = await runtime.ask(ResearchRequest(question="What is evidence 1?"))
    assert answer.query.text == "What is evidence 1?"
    await runtime.aclose()
    await runtime.aclose()  # idempotent
    from researchcrew.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="closed"):
        await runtime.stages()


async def test_the_request_travels_unchanged_to_the_sources(tmp_path: Path) -> None:
    tool = FakeTool("web", chunks=[fake_chunk("web", 1, semantic_relevance=0.9)])
    request = ResearchRequest(
        question="What is evidence 1?",
        user_id="ada",
        session_id="s9",
        tool_options={"web": {"domains": ["example.org"]}},
        response=ResponseOptions(response_format="concise"),
    )
    async with open_runtime(Settings(data_dir=tmp_path), tools=[tool], remember=False) as runtime:
        await runtime.ask(request)
    query, options = tool.calls[0]
    assert query == "What is evidence 1?"
    assert options["user_id"] == "ada" and options["session_id"] == "s9"
    assert options["domains"] == ["example.org"]


def test_kb_stats_opens_neither_crewai_nor_the_memory_store(tmp_path: Path) -> None:
    code = (
        "import json, sys\n"
        "from researchcrew.cli import main\n"
        "try:\n    main(['kb', 'stats', '--json'])\nexcept SystemExit:\n    pass\n"
        "heavy = ('crewai', 'researchcrew.memory.store', 'sqlalchemy', 'researchcrew.pipeline.flow')\n"
        "print(json.dumps(sorted(m for m in heavy if m in sys.modules)), file=sys.stderr)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**_environment(), "RESEARCHCREW_DATA_DIR": str(tmp_path)},
    )
    assert json.loads(completed.stdout)["documents"] == 0
    assert json.loads(completed.stderr.strip().splitlines()[-1]) == []


def test_ask_keywords_are_listed_once_and_misspellings_get_a_suggestion() -> None:
    names = keyword_names()
    assert len(names) == len(set(names))
    assert {"preferred_sources", "exclude_sources", "deadline_s", "response_format", "tool_options"} <= set(names)
    with pytest.raises(ValueError, match=r"'excluded_sources' → did you mean 'exclude_sources'\?") as error:
        ResearchRequest.from_keywords("q", user_id="u", session_id="s", excluded_sources=["web"])
    listed = str(error.value).split("valid options: ")[1].split(", ")
    assert listed == names


def test_response_options_override_only_what_was_given() -> None:
    learned = UserPreferences(response_format="technical", max_response_length=900, include_sections=False)
    request = ResearchRequest.from_keywords("q", user_id="u", session_id="s", max_response_length=300)
    merged = request.response.applied_to(learned)
    assert merged.response_format == "technical" and merged.include_sections is False
    assert merged.max_response_length == 300
    assert request.explicit_choices() == {}  # a length is not a learned preference signal


def test_a_request_survives_json_unchanged() -> None:
    request = ResearchRequest(
        question="q",
        preferred_sources=["arxiv"],
        deadline_s=12.5,
        response=ResponseOptions(response_format="concise", source_reputation={"web": 0.2}),
    )
    assert ResearchRequest.model_validate_json(request.model_dump_json()) == request


def _environment() -> dict[str, str]:
    import os

    return {key: value for key, value in os.environ.items() if not key.startswith("RESEARCHCREW_")}


async def test_the_shipped_fake_tool_fails_and_hangs_as_told(tmp_path: Path) -> None:
    down = FakeTool("arxiv", fail_with=("http_error", "HTTP 503 from the fake"))
    stuck = FakeTool("web", hang=True)
    found = FakeTool("rag", chunks=[fake_chunk("rag", 1, semantic_relevance=0.9)])
    settings = Settings(data_dir=tmp_path)
    async with open_runtime(settings, tools=[down, stuck, found], remember=False) as runtime:
        answer = await runtime.ask(ResearchRequest(question="What is evidence 1?", deadline_s=3))
    reports = {report.source_type: report for report in answer.source_reports}
    assert reports["arxiv"].failure is not None and reports["arxiv"].failure.kind == "http_error"
    assert reports["web"].failure is not None and reports["web"].failure.kind == "timeout" and stuck.cancelled
    assert reports["rag"].status == "success"


SERVICE_WITHOUT_A_DEEP_RUN = """
import asyncio, json, sys
from datetime import UTC, datetime, timedelta
from researchcrew.deep.store import DeepRunStore
from researchcrew.runtime import open_runtime
from researchcrew.service._app import create_app
from researchcrew.settings import Settings

create_app(Settings())  # every route imported, as `researchcrew serve` does at its start

async def main():
    async with open_runtime(Settings()) as runtime:
        runs = DeepRunStore((await runtime.memory_store()).engine)  # a run paused by another process
        later = datetime.now(UTC) + timedelta(hours=1)
        await runs.create(run_id="r1", user_id="ada", session_id="s1", question="pooled testing", lease_until=later)
        await runs.pause("r1", state={}, pending={}, awaiting="clarification", expires_at=later)
        waiting = await runtime.conversation.waiting_run("ada", "s1")
        elsewhere = await runtime.conversation.waiting_run("ada", "s2")
        return waiting.run_id if waiting else None, elsewhere

waiting, elsewhere = asyncio.run(main())
print(json.dumps({"waiting": waiting, "elsewhere": elsewhere, "crewai": "crewai" in sys.modules}))
"""


def test_the_service_starts_and_finds_a_waiting_deep_run_without_importing_crewai(tmp_path: Path) -> None:
    """crewAI (the deep run's Flow, seconds to import) comes in with the first deep run, not with the service's
    routes nor with an ordinary message's "is this the answer a waiting run asked for?", which reads the run store."""
    completed = subprocess.run(
        [sys.executable, "-c", SERVICE_WITHOUT_A_DEEP_RUN],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**_environment(), "RESEARCHCREW_DATA_DIR": str(tmp_path)},
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    found = json.loads(completed.stdout.strip().splitlines()[-1])
    assert found == {"waiting": "r1", "elsewhere": None, "crewai": False}
