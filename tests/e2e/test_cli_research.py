"""`researchcrew research` over a small pre-ingested knowledge base, offline: to the end with --yes; paused without
a terminal, then steered with --run in a later command (a new process, as far as the run can tell); one-line
errors; and the plan commands typed at the prompt."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from researchcrew.cli import cli
from researchcrew.cli._research import _Decision, parse_plan_commands
from researchcrew.contracts.deep import DeepRun, PlanChoice, PlanItem, ResearchPlan
from researchcrew.embedding.embedder import Embedder
from researchcrew.knowledge.collection import KnowledgeBase
from tests.e2e.support import demo_documents, offline_environment, offline_settings

pytestmark = pytest.mark.slow  # the embedding model and Milvus Lite

QUESTION = "What is known about flaky tests?"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("cli_research")
    documents = demo_documents(("Flaky", "Flakiness", "Metamorphic Testing for"))
    with KnowledgeBase(offline_settings(directory), embedder=embedder) as knowledge_base:
        knowledge_base.add_documents(documents)
    yield directory


def run(data_dir: Path, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, ["research", *args], env=offline_environment(data_dir), catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.stdout if code == 0 else result.output


def test_yes_runs_to_the_report(data_dir: Path) -> None:
    run_ = DeepRun.model_validate(json.loads(run(data_dir, QUESTION, "--yes", "--json", "--max-items", "3")))
    assert run_.status == "completed" and run_.report is not None
    # At most the three asked for: the plan is built from the facets the evidence shows (issue 21 item 1), and this
    # folder holds four documents, so it may find fewer.
    assert 2 <= len(run_.report.plan.items) <= 3 and run_.report.sub_questions[0].status == "answered"
    assert run_.report.response.citations and all(c.source_type == "rag" for c in run_.report.response.citations)


def test_without_a_terminal_the_run_pauses_and_a_later_command_steers_it(data_dir: Path) -> None:
    text = run(data_dir, QUESTION, "--user", "bob", "--max-items", "4")
    assert "— awaiting_human_feedback" in text and "Proposed plan for: What is known about flaky tests?" in text
    run_id = text.split()[3]
    assert f"Continue with: researchcrew research --run {run_id} --approve" in text

    shown = DeepRun.model_validate(json.loads(run(data_dir, "--run", run_id, "--user", "bob", "--json")))
    assert shown.status == "awaiting_human_feedback" and shown.plan is not None
    # The plan holds what the evidence's facets gave (at most 4 here, at least 2): cut the first, put the last first.
    items = shown.plan.items
    assert 2 <= len(items) <= 4
    first, last = items[0], items[-1]
    finished = DeepRun.model_validate(
        json.loads(run(data_dir, "--run", run_id, "--user", "bob", "--cut", "1", "--order", str(last.id), "--json"))
    )
    assert finished.status == "completed" and finished.report is not None
    assert [item.id for item in finished.report.plan.items] == [last.id] + [item.id for item in items[1:-1]]
    assert first.question not in [item.question for item in finished.report.plan.items]
    report_text = run(data_dir, "--run", run_id, "--user", "bob")
    assert "Quality: overall" in report_text and "Plan:" in report_text and "Sources:" in report_text


def test_mistakes_end_in_one_line(data_dir: Path) -> None:
    assert "give a QUESTION, or --run ID" in run(data_dir, code=2)
    assert "need --run ID" in run(data_dir, QUESTION, "--answer", "x", code=2)
    assert "Error: no deep run 'nope'" in run(data_dir, "--run", "nope", "--approve", code=1)
    text = run(data_dir, QUESTION, "--user", "carol", "--max-items", "2")
    run_id = text.split()[3]
    assert "belongs to another user" in run(data_dir, "--run", run_id, "--approve", code=1)
    out = run(data_dir, "--run", run_id, "--user", "carol", "--edit", "1=  ", code=2)
    assert "--edit '1=  ': write --edit N=new wording" in out
    assert "waits for a decision on its plan, not an answer" in run(
        data_dir, "--run", run_id, "--user", "carol", "--answer", "x", code=1
    )


PLAN = ResearchPlan(question="Q", items=[PlanItem(id=n, question=f"Question {n}?") for n in (1, 2, 3)], max_items=5)


def test_plan_commands_typed_at_the_prompt() -> None:
    assert parse_plan_commands("", PLAN).items is None  # Enter approves
    assert parse_plan_commands("cancel", PLAN).action == "cancel"
    decision = parse_plan_commands("cut 2; order 3,1; edit 1 What exactly? ; add Who else?", PLAN)
    assert decision.items == [
        PlanChoice(id=3),
        PlanChoice(id=1, question="What exactly?"),
        PlanChoice(question="Who else?"),
    ]
    for bad in ("cut two", "edit 2", "add", "shuffle 1,2"):
        with pytest.raises(_Decision):
            parse_plan_commands(bad, PLAN)


def test_a_real_run_over_the_demo_corpus_exports_every_format(data_dir: Path, tmp_path: Path) -> None:
    """The end-to-end export: a deep run over the demo corpus, offline, written as PDF by `-o`, then exported again
    as DOCX, Markdown and HTML (one by --format) from the stored run; each file opened and read."""
    import lxml.html

    from tests.deep.export_support import docx_text, markers, pdf_text

    pdf_path = tmp_path / "report.pdf"
    options = ("--max-items", "3", "--length", "brief", "--type", "literature_review")
    shown = run(data_dir, QUESTION, "--yes", "--json", *options, "-o", str(pdf_path))
    finished = DeepRun.model_validate(json.loads(shown))
    report = finished.report
    assert report is not None and report.response.citations
    assert (report.length, report.report_type) == ("brief", "literature_review") and report.themes
    paths = {"pdf": pdf_path, "docx": tmp_path / "report.docx", "md": tmp_path / "out.md"}
    run(data_dir, "--run", finished.run_id, "-o", str(paths["docx"]))
    run(data_dir, "--run", finished.run_id, "-o", str(paths["md"]))
    html_path = tmp_path / "page.txt"
    run(data_dir, "--run", finished.run_id, "-o", str(html_path), "--format", "html")
    texts = {
        "pdf": pdf_text(paths["pdf"].read_bytes()),
        "docx": docx_text(paths["docx"].read_bytes()),
        "md": re.sub(r"\\(.)", r"\1", paths["md"].read_text(encoding="utf-8")),  # Markdown's escapes undone
        "html": lxml.html.document_fromstring(html_path.read_bytes()).text_content(),
    }
    numbers = sorted(citation.number for citation in report.response.citations)
    first = report.response.sections[0].claims[0].text
    for fmt, text in texts.items():
        assert sorted(set(markers(text))) == numbers, fmt
        assert " ".join(first.split())[:60] in " ".join(text.split()), fmt
        references = text.rpartition("References")[2]
        for citation in report.response.citations:
            assert citation.file_name is None or citation.file_name in references, (fmt, citation.file_name)
    assert "cannot tell the report format" in run(data_dir, "--run", finished.run_id, "-o", "x.txt", code=2)
    assert "--format needs -o" in run(data_dir, "--run", finished.run_id, "--format", "pdf", code=2)
