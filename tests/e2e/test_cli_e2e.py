"""`researchcrew ask` over a small pre-ingested knowledge base, offline: the answer, its numbered sources and a line
per source (used, or failed and why), as text for people and as JSON for scripts."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from researchcrew.cli import cli
from researchcrew.contracts import FinalResponse
from researchcrew.embedding.embedder import Embedder
from researchcrew.knowledge.collection import KnowledgeBase
from tests.e2e.support import demo_documents, offline_environment, offline_settings

pytestmark = pytest.mark.slow  # the embedding model and Milvus Lite

QUESTION = "What causes flaky tests?"


@pytest.fixture(scope="module")
def cli_data_dir(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[Path]:
    """A data directory whose knowledge base holds six demo abstracts (three on flaky tests), closed again so the
    CLI opens it itself."""
    data_dir = tmp_path_factory.mktemp("cli_data")
    documents = demo_documents(("Flaky", "Flakiness", "Property-Based Mutation", "Metamorphic Testing for"))
    assert len(documents) == 6  # three on flaky tests, one on mutation testing, two on metamorphic testing
    with KnowledgeBase(offline_settings(data_dir), embedder=embedder) as knowledge_base:
        report = knowledge_base.add_documents(documents)
    assert report.documents_added == len(documents)
    yield data_dir


def run_ask(data_dir: Path, *args: str) -> tuple[str, str]:
    result = CliRunner().invoke(
        cli, ["ask", QUESTION, *args], env=offline_environment(data_dir), catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return result.stdout, result.stderr


def test_ask_json_prints_one_final_response(cli_data_dir: Path) -> None:
    stdout, _ = run_ask(cli_data_dir, "--json", "--user", "ada", "--session", "cli-json")
    response = FinalResponse.model_validate(json.loads(stdout))  # stdout is the JSON document and nothing else

    assert response.answer_kind == "extractive"
    assert (response.query.user_id, response.query.session_id) == ("ada", "cli-json")
    assert response.citations and response.citation_stats.removed == 0
    assert all(citation.source_type == "rag" and citation.url for citation in response.citations)
    kinds = {r.source_type: (r.status, r.failure.kind if r.failure else None) for r in response.source_reports}
    assert kinds == {
        "rag": ("success", None),
        "web": ("failed", "not_configured"),
        "arxiv": ("failed", "unreachable"),
        "memory": ("empty", None),
    }


def test_ask_prints_answer_numbered_sources_and_what_each_source_did(cli_data_dir: Path) -> None:
    stdout, _ = run_ask(cli_data_dir, "--user", "bob")
    header, _, rest = stdout.partition("\n\n")
    assert header.startswith("Confidence: ") and "extractive answer" in header
    answer, _, listing = rest.partition("\nSources:\n")
    assert "flaky" in answer.lower() and re.search(r"\[1\]", answer)
    sources, _, searched = listing.partition("\nSources searched:\n")
    lines = sources.strip().splitlines()
    assert lines
    for number, line in enumerate(lines, start=1):
        # "[n] Title — http://arxiv.org/abs/..., 2021-01-22 (rag)", with ", passage 2 of 3" for a longer abstract, or
        # ", passages 1 and 2 of 2" when the answer quotes several passages of it (one source, one citation)
        date = r"\d{4}-\d{2}-\d{2}"
        where = r"(, passage \d+ of \d+|, passages [\d, ]+ and \d+ of \d+)?"
        source_line = rf"\s*\[{number}\] .+ — http://arxiv\.org/abs/\S+, {date}{where} \(rag\)"
        assert re.fullmatch(source_line, line), line
        assert f"[{number}]" in answer
    # One paper is one numbered source, however many of its passages the answer quotes (issue 20).
    assert len({line.split("] ", 1)[1].split(" — ")[1].split(",")[0] for line in lines}) == len(lines), lines
    searched_lines = {line.split()[0]: line for line in searched.strip().splitlines()[:4]}
    assert set(searched_lines) == {"rag", "web", "arxiv", "memory"}
    assert re.search(r"rag\s+used, \d+ result\(s\) in \d+ ms", searched_lines["rag"])
    assert "failed: not_configured — web search is off" in searched_lines["web"]
    assert "failed: unreachable — cannot reach arXiv" in searched_lines["arxiv"]
    assert re.search(r"memory\s+used, 0 result\(s\)", searched_lines["memory"])


def test_ask_with_an_invalid_setting_ends_with_one_clear_line(tmp_path: Path) -> None:
    env = {**offline_environment(tmp_path), "RESEARCHCREW_RETRIEVAL__NUM_RESULTS": "zero"}
    result = CliRunner().invoke(cli, ["ask", QUESTION], env=env)
    assert result.exit_code == 2  # a configuration error
    assert result.stderr.startswith("Error: invalid setting RESEARCHCREW_RETRIEVAL__NUM_RESULTS:")
    assert "Traceback" not in result.output
