"""`researchcrew ask` sessions: a fresh session per ask (so a repeated question never cites the assistant's own
earlier answer), `--continue` for the user's last session with follow-ups understood, `--session ID` explicit."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from researchcrew.cli import cli
from researchcrew.contracts import FinalResponse
from researchcrew.embedding.embedder import Embedder
from researchcrew.knowledge.collection import KnowledgeBase
from tests.e2e.support import demo_documents, offline_environment, offline_settings

pytestmark = pytest.mark.slow  # the embedding model and Milvus Lite

_SESSION_LINE = re.compile(r"^Session: (cli-\d{8}-\d{6}-[0-9a-f]{6}|\S+) \(ask a follow-up with --continue\)$", re.M)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("cli_sessions")
    documents = demo_documents(("Flaky", "Flakiness", "Metamorphic Testing for"))
    with KnowledgeBase(offline_settings(directory), embedder=embedder) as knowledge_base:
        knowledge_base.add_documents(documents)
    yield directory


def run(data_dir: Path, *args: str, expect: int = 0) -> Result:
    result = CliRunner().invoke(cli, ["ask", *args], env=offline_environment(data_dir), catch_exceptions=False)
    assert result.exit_code == expect, result.output
    return result


def session_of(result: Result) -> str:
    found = _SESSION_LINE.findall(result.stdout)
    assert len(found) == 1, result.stdout
    return str(found[0])


def test_each_ask_starts_a_fresh_session_and_prints_it(data_dir: Path) -> None:
    first = run(data_dir, "What causes flaky tests?", "--user", "fresh")
    again = run(data_dir, "What causes flaky tests?", "--user", "fresh")
    one, two = session_of(first), session_of(again)
    assert one != two and one.startswith("cli-") and two.startswith("cli-")
    # The repeated question is not answered from the first answer: that one is in another session.
    assert "earlier in this conversation" not in again.stdout


def test_continue_understands_a_follow_up_from_the_last_session(data_dir: Path) -> None:
    first = run(data_dir, "What is metamorphic testing?", "--user", "ada")
    follow_up = run(data_dir, "What are its limitations?", "--user", "ada", "--continue")
    assert session_of(follow_up) == session_of(first)
    assert "Researched as: What are the limitations of metamorphic testing?" in follow_up.stdout
    as_json = run(data_dir, "And for compilers?", "--user", "ada", "--continue", "--json")
    response = FinalResponse.model_validate(json.loads(as_json.stdout))  # stdout is only the JSON document
    assert response.query.session_id == session_of(first) and response.query.text == "And for compilers?"
    assert response.rewrite is not None
    assert response.rewrite.standalone == "What are the limitations of metamorphic testing for compilers?"


def test_an_explicit_session_is_kept_and_continue_follows_it(data_dir: Path) -> None:
    named = run(data_dir, "What is metamorphic testing?", "--user", "bob", "--session", "reading-group")
    assert session_of(named) == "reading-group"
    follow_up = run(data_dir, "Who uses it?", "--user", "bob", "--continue")
    assert session_of(follow_up) == "reading-group"
    assert "Researched as: Who uses metamorphic testing?" in follow_up.stdout


def test_continue_without_an_earlier_session_or_with_session_is_a_one_line_error(data_dir: Path) -> None:
    nothing = run(data_dir, "What are its limitations?", "--user", "newcomer", "--continue", expect=1)
    assert nothing.stderr.strip() == (
        "Error: user 'newcomer' has no earlier session to continue; ask without --continue to start one"
    )
    both = run(data_dir, "What are its limitations?", "--continue", "--session", "s1", expect=2)
    assert "use either --continue (the last session) or --session ID, not both" in both.stderr
