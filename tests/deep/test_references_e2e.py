"""References that matter, end to end (issue 21 item 3): deep runs over the bundled reference corpus, offline — the
knowledge base (Milvus Lite, the packaged embedding model) holds six notes that cite each other by DOI, numbered
reference list and quoted title, and four arXiv papers served by the loopback arXiv server through the real
``arxiv`` client. The user's own plan is approved, so the runs do not depend on how plans are proposed.

Following changes the report (new cited sources holding facts the first round lacked), references of references
are followed (depth 2), a round that adds no new source stops following (convergence), a spent token budget stops
it, and the report exports to every format with the new sources in its reference list."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import ExitStack, closing
from pathlib import Path
from typing import Any

import lxml.html
import pytest

from researchcrew.contracts.deep import DeepOptions, DeepReport, PlanChoice, PlanDecision
from researchcrew.contracts.request import ResearchRequest
from researchcrew.data import demo_corpus_path, reference_corpus_path
from researchcrew.deep._follow import PASSAGES_PER_DOCUMENT
from researchcrew.deep.export import FORMATS, export_report
from researchcrew.embedding.embedder import Embedder
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.runtime import open_runtime
from researchcrew.settings import ArxivSettings, DeepResearchSettings, Settings
from researchcrew.tools.arxiv import ArxivTool, RequestSpacer
from researchcrew.tools.rag import RAGTool
from tests.conftest import SHARED_DIR
from tests.deep.export_support import docx_text, pdf_text
from tests.e2e.support import offline_settings, shared_embedder
from tests.helpers.services import required_directory
from tests.loopback.arxiv import ArxivFake, recording_for
from tests.loopback.server import LoopbackServer, Request

CORPUS = reference_corpus_path()
SCRIPT = json.loads((CORPUS / "questions.json").read_text(encoding="utf-8"))
PYTHON_STUDY = "An Empirical Study of Flaky Tests in Python"


def test_the_shipped_arxiv_responses_are_the_demo_corpus_records_of_the_cited_papers() -> None:
    records = {}
    for line in demo_corpus_path().read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        records[re.sub(r"v\d+$", "", record["id"].rsplit("/abs/", 1)[-1])] = record
    shipped = sorted((CORPUS / "arxiv").glob("*.json"))
    assert [path.stem for path in shipped] == ["id_1906.00673", "id_2005.06826", "id_2101.09077", "id_2302.09330"]
    for path in shipped:
        assert json.loads(path.read_text(encoding="utf-8")) == recording_for(records[path.stem.removeprefix("id_")])
    cited = set(re.findall(r"arXiv:(\d{4}\.\d{5})", " ".join(p.read_text() for p in (CORPUS / "documents").iterdir())))
    assert cited == {path.stem.removeprefix("id_") for path in shipped}  # every cited paper is served, no other


def test_the_corpus_has_a_round_that_can_only_bring_passages_of_a_document_already_read() -> None:
    """The convergence the end-to-end run shows must not hang on scores (ATTRIBUTION): for the quarantine question
    the policy's first round reads the rerun report, whose only reference names the handbook, already in the
    evidence; its title look-up reads every passage of the handbook, so that round adds no new source whichever
    passages rank first, and the rerun report, silent on quarantine, is not in that question's first evidence."""
    documents = CORPUS / "documents"
    handbook = (documents / "flaky-tests-handbook.md").read_text(encoding="utf-8")
    rerun = (documents / "rerun-budgets.md").read_text(encoding="utf-8").split("---", 2)[2]
    policy = (documents / "quarantine-policy.md").read_text(encoding="utf-8")
    assert len(re.findall(r"^## ", handbook, re.MULTILINE)) <= PASSAGES_PER_DOCUMENT
    assert "quarantined" in SCRIPT["plan"][2] and "quarantin" not in rerun.lower()
    assert "“Rerun budgets for flaky test detection”" in policy
    assert re.findall(r"“([^”]+)”|doi:|arXiv:", rerun) == ["Flaky tests: the Harbor CI handbook"]


def test_the_loopback_arxiv_answers_an_id_list_from_each_ids_recording(fixtures_dir: Path) -> None:
    fake = ArxivFake(fixtures_dir / "arxiv", CORPUS / "arxiv")

    def ids(id_list: str) -> list[str]:
        reply = fake(Request("GET", "/api/query", {"id_list": [id_list], "start": ["0"]}, {}, b""))
        assert reply.status == 200
        return re.findall(r"<id>http://arxiv\.org/abs/([^<]+)</id>", reply.body.decode("utf-8"))

    assert ids("2101.09077") == ["2101.09077v1"]  # a corpus recording, as cited (no version)
    assert ids("2005.06826,2101.09077v1,9999.99999,2104.12255v1") == ["2005.06826v1", "2101.09077v1", "2104.12255v1"]
    assert ids("9999.99999,0000.00001") == []  # nobody recorded them: arXiv's real empty feed


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return shared_embedder()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[tuple[Settings, list[Any]]]:
    """Offline settings and the sources: the reference corpus' knowledge base and the loopback arXiv."""
    fixtures = required_directory(SHARED_DIR, "shared data (it sits beside the project in dev and CI)") / "fixtures"
    settings = offline_settings(tmp_path_factory.mktemp("reference_kb"))
    with ExitStack() as stack:
        knowledge_base = stack.enter_context(KnowledgeBase(settings, embedder=embedder))
        report = knowledge_base.ingest([CORPUS / "documents"], progress=False)
        assert report.documents_added == 6 and not report.errors, report.errors
        server = stack.enter_context(LoopbackServer(ArxivFake(fixtures / "arxiv", CORPUS / "arxiv")))
        spacer = stack.enter_context(closing(RequestSpacer(0)))
        arxiv_settings = ArxivSettings(api_url=f"{server.url}/api/query", min_interval_s=0, num_retries=0, timeout_s=10)
        arxiv = stack.enter_context(closing(ArxivTool(arxiv_settings, spacer=spacer)))
        yield settings, [RAGTool(knowledge_base), arxiv]


async def deep_run(runtime: Any, plan: list[str], *, follow: bool = True) -> DeepReport:
    """A run of the corpus question with ``plan`` approved as the user's own."""
    research = await runtime.deep_research()
    request = ResearchRequest(question=SCRIPT["question"], user_id="ada", session_id="refs")
    run = await research.research(request, DeepOptions(clarify=False, max_subquestions=5, follow_references=follow))
    assert (run.status, run.awaiting) == ("awaiting_human_feedback", "plan_approval"), run.error
    decision = PlanDecision(items=[PlanChoice(question=question) for question in plan])
    await research.decide_plan(run.run_id, user_id="ada", decision=decision)
    run = await research.resume_research(run.run_id, user_id="ada")
    assert run.status == "completed" and run.report is not None, run.error
    return run.report


def cited_titles(report: DeepReport) -> set[str]:
    return {citation.title or "" for citation in report.response.citations}


def report_text(report: DeepReport) -> str:
    return " ".join(claim.text for section in report.response.sections for claim in section.claims)


def coverage(report: DeepReport) -> float:
    text = report_text(report)
    return sum(phrase in text for phrase in SCRIPT["facts"].values()) / len(SCRIPT["facts"])


def exported_texts(report: DeepReport) -> dict[str, str]:
    exported = {fmt: export_report(report, fmt).content for fmt in FORMATS}
    return {
        "md": exported["md"].decode("utf-8"),
        "html": lxml.html.document_fromstring(exported["html"]).text_content(),
        "pdf": pdf_text(exported["pdf"]),
        "docx": docx_text(exported["docx"]),
    }


@pytest.mark.slow  # the embedding model and Milvus Lite
async def test_following_references_adds_cited_sources_two_deep_until_a_round_brings_nothing_new(
    corpus: tuple[Settings, list[Any]],
) -> None:
    settings, tools = corpus
    deep = settings.model_copy(update={"deep": DeepResearchSettings(follow_depth=3)})
    async with open_runtime(deep, tools=tools, remember=False) as runtime:
        without = await deep_run(runtime, SCRIPT["plan"], follow=False)
        report = await deep_run(runtime, SCRIPT["plan"])

    assert without.references == [] and all(c.source_type == "rag" for c in without.response.citations)
    kept = [record for record in report.references if record.outcome == "kept"]
    # A kept reference changed the report: a new cited source, and a fact only it holds.
    new_sources = cited_titles(report) - cited_titles(without)
    assert PYTHON_STUDY in new_sources
    python_study = next(c for c in report.response.citations if c.title == PYTHON_STUDY)
    assert any(python_study.chunk_id in record.resolved for record in kept)
    assert "59%" in report_text(report) and "59%" not in report_text(without)
    assert coverage(report) > coverage(without)
    # Depth 2: the quarantine policy, reached by its DOI, cites arXiv:1906.00673, which is kept in turn.
    assert {record.depth for record in kept} >= {1, 2}
    policy = next(r for r in kept if r.kind == "doi" and r.target == "10.5555/harbor.2024.017")
    second = [r for r in kept if r.depth == 2 and r.sub_question == policy.sub_question]
    assert any(r.target == "1906.00673" for r in second)
    assert "Empirical Analysis of Factors and their Effect on Test Flakiness" in " ".join(cited_titles(report))
    # Convergence: a round that only brought more of documents already read stopped following before the depth
    # limit (3) did (the quarantine question: policy → rerun report → the handbook it already had).
    converged = [r for r in report.references if r.reason.startswith("convergence: depth")]
    assert converged and all(r.outcome == "skipped" and r.depth <= 3 for r in converged)
    for position, sub in enumerate(report.sub_questions, start=1):
        assert sub.references_kept == sum(1 for r in kept if r.sub_question == position)

    # The report people keep carries the new source, in every format.
    for fmt, text in exported_texts(report).items():
        flat = " ".join(text.split())
        number = python_study.number
        assert re.search(rf"\[{number}\] {PYTHON_STUDY} — <?https://arxiv\.org/abs/2101\.09077", flat), fmt
        assert re.search(rf"59%[^\[]*\[{number}\]", flat), fmt  # the fact, with its citation


@pytest.mark.slow  # the embedding model and Milvus Lite
async def test_a_spent_token_budget_stops_following(corpus: tuple[Settings, list[Any]]) -> None:
    settings, tools = corpus
    plan = SCRIPT["plan"][1:2]  # how Harbor handles flaky tests: a DOI, then references of the policy it names
    frugal = settings.model_copy(update={"deep": DeepResearchSettings(reference_token_budget=300)})
    async with open_runtime(frugal, tools=tools, remember=False) as runtime:
        report = await deep_run(runtime, plan)
    spent = [r for r in report.references if "reference token budget (300 per sub-question) spent" in r.reason]
    assert spent and all(r.outcome == "skipped" for r in spent)
    looked_up = [r for r in report.references if r.outcome in ("kept", "rejected")]
    assert looked_up and max(r.depth for r in looked_up) == 1  # the first round is read, then following stops
    assert not any(r.target == "1906.00673" and r.outcome == "kept" for r in report.references)
