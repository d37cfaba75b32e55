"""Issue 13, items 7, 8 and 9 through the real CLI: each mistake or conflict is one clear line, never a traceback.

* item 7 — a Milvus Lite knowledge base held by another process: ``kb stats`` refuses naming the process; ``ask``
  answers with rag reported ``unreachable`` for that reason, never "the sources may not cover this topic";
* item 8 — configuration mistakes: one line naming the setting, the problem and a valid example, exit code 2;
* item 9 — a Milvus URI's password never appears in ``kb stats`` errors or ``ask --json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from researchcrew.cli import cli
from tests.e2e.support import offline_environment
from tests.loopback.server import closed_port

PROJECT = Path(__file__).resolve().parents[2]
QUESTION = "What is metamorphic testing?"
_HOLDER = """
import sys, time
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.settings import Settings
base = KnowledgeBase(Settings())
base.store.open()
print("holding", flush=True)
sys.stdin.read()  # until the test closes our stdin
base.close()
"""


@pytest.fixture
def environment(tmp_path: Path) -> dict[str, str]:
    return {**offline_environment(tmp_path / "data"), "RESEARCHCREW_ENABLED_SOURCES": "rag,memory"}


@pytest.fixture(scope="module")
def held_environment(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return {
        **offline_environment(tmp_path_factory.mktemp("held") / "data"),
        "RESEARCHCREW_ENABLED_SOURCES": "rag,memory",
    }


@pytest.fixture(scope="module")
def held_knowledge_base(held_environment: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """Another process with the knowledge base open (as a running `ask`, `ingest` or `serve` has it); one for the
    module's tests of it (each only reads what the holder does: it starts in seconds, not instantly)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER],
        env={**os.environ, **held_environment, "PYTHONPATH": str(PROJECT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
    yield holder
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(timeout=30)
    holder.stdout.close()


def test_kb_stats_on_a_held_knowledge_base_names_the_holder(
    held_environment: dict[str, str], held_knowledge_base: subprocess.Popen[str]
) -> None:
    result = CliRunner().invoke(cli, ["kb", "stats"], env=held_environment)

    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # one line: no milvus-lite traceback
    assert f"is in use by process {held_knowledge_base.pid}" in lines[0]
    assert "RESEARCHCREW_MILVUS__URI" in lines[0]  # what to do
    assert "Traceback" not in result.output


def test_ask_on_a_held_knowledge_base_says_why_rag_failed(
    held_environment: dict[str, str], held_knowledge_base: subprocess.Popen[str]
) -> None:
    result = CliRunner().invoke(cli, ["ask", QUESTION, "--json"], env=held_environment)

    assert result.exit_code == 0, result.output
    response = json.loads(result.stdout)
    rag = next(report for report in response["source_reports"] if report["source_type"] == "rag")
    assert rag["status"] == "failed" and rag["error_kind"] == "unreachable"
    assert f"in use by process {held_knowledge_base.pid}" in rag["error_message"]
    assert (
        "may not cover this topic" not in response["answer"].split("(")[0]
        or "rag could not be searched" in (response["answer"])
    )
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("RESEARCHCREW_ENABLED_SOURCES", "rag,wbe", "unknown source type(s) 'wbe'; choose from rag, web, arxiv"),
        ("RESEARCHCREW_ENABLED_SOURCES", "", "no source is enabled"),
        ("RESEARCHCREW_ENABLED_SOURCES", "[]", "no source is enabled"),
        ("RESEARCHCREW_MEMORY__DATABASE_URL", "postgresql://", "names no driver; the memory store needs the async"),
        ("RESEARCHCREW_MEMORY__DATABASE_URL", "sqlite:///", "sqlite+aiosqlite:////path/to/memory.db"),
        ("RESEARCHCREW_MEMORY__DATABASE_URL", "mysql+aiomysql://u:pw@h/db", "supports SQLite and PostgreSQL, not"),
        ("RESEARCHCREW_EVALUATION__SOURCE_REPUTATION", "{not json", "invalid setting"),
    ],
)
def test_a_configuration_mistake_is_one_line_with_exit_code_2(
    environment: dict[str, str], variable: str, value: str, expected: str
) -> None:
    result = CliRunner().invoke(cli, ["ask", QUESTION], env={**environment, variable: value})

    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert expected in result.stderr
    assert "pw@" not in result.stderr
    assert "Traceback" not in result.output


def test_a_data_dir_that_is_a_file_is_one_line(environment: dict[str, str], tmp_path: Path) -> None:
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    for command in (["ask", QUESTION], ["kb", "stats"], ["ingest", "--demo"]):
        result = CliRunner().invoke(cli, command, env={**environment, "RESEARCHCREW_DATA_DIR": str(a_file)})
        assert result.exit_code == 2, result.output
        assert "RESEARCHCREW_DATA_DIR" in result.stderr and "is a file, not a folder" in result.stderr


def test_a_comma_separated_source_list_is_accepted(environment: dict[str, str]) -> None:
    result = CliRunner().invoke(
        cli, ["ask", QUESTION, "--json"], env={**environment, "RESEARCHCREW_ENABLED_SOURCES": "rag, memory"}
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    searched = {report["source_type"] for report in payload["source_reports"]}
    assert searched == {"rag", "memory"}
    # What the pipeline computed reaches scripts too (issue 13, item 3).
    assert payload["retrieval_status"] == "success"
    assert payload["final_reason"].split(":", 1)[0] in ("confidence_too_low_clarify", "confidence_high")
    assert {"coverage", "quality", "removals", "memory_status"} <= payload.keys()


def test_a_milvus_password_never_reaches_the_output(environment: dict[str, str]) -> None:
    uri = f"http://root:Sup3rSecret@127.0.0.1:{closed_port()}"
    env = {**environment, "RESEARCHCREW_MILVUS__URI": uri, "RESEARCHCREW_MILVUS__TIMEOUT_S": "2"}

    stats = CliRunner().invoke(cli, ["kb", "stats"], env=env)
    answer = CliRunner().invoke(cli, ["ask", QUESTION, "--json", "--deadline", "10"], env=env)

    assert stats.exit_code == 1 and "root:***@127.0.0.1" in stats.stderr
    assert "Sup3rSecret" not in stats.output
    assert answer.exit_code == 0, answer.output
    assert "Sup3rSecret" not in answer.output
    rag = next(r for r in json.loads(answer.stdout)["source_reports"] if r["source_type"] == "rag")
    assert rag["status"] == "failed"
