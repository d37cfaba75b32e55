"""The deep report's quality check can fail (issue 21 item 2): on the labelled set (tests/deep/quality_set.py, real
offline deep runs over the demo corpus and named flaw transformations) its score separates sound from flawed
reports, and it names what is wrong per section; a flawed section is remediated once and the report says so; and
the assistant's own earlier answers are never one side of an "Across sub-questions" disagreement."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchmarks.deep_quality import auroc
from researchcrew.contracts import ContextChunk
from researchcrew.contracts.deep import DeepOptions, DeepProgressEvent
from researchcrew.contracts.request import ResearchRequest
from researchcrew.deep._quality import echoes_an_answer, garbled, report_findings, score_report
from researchcrew.deep._remediate import reformulate
from researchcrew.deep._report import CROSS_HEADING, assemble_report
from researchcrew.runtime import open_runtime
from researchcrew.settings import EvaluationSettings, Settings
from tests.deep.builders import plan_of, result, scored
from tests.deep.corpus import PASSAGES, CorpusTool
from tests.deep.quality_set import FLAWS, cases, runs
from tests.e2e.support import assert_every_claim_cited


def test_the_labelled_set_holds_at_least_thirty_sound_and_thirty_flawed_reports_split_by_run() -> None:
    everything = cases()
    assert sum(not case.flawed for case in everything) >= 30 and sum(case.flawed for case in everything) >= 30
    assert len(runs()) >= 30
    tune = {case.question for case in everything if case.split == "tune"}
    report = {case.question for case in everything if case.split == "report"}
    assert tune and report and not tune & report
    assert {case.flaw for case in everything if case.flawed} == set(FLAWS)


def test_the_score_separates_sound_from_flawed_reports_it_was_not_tuned_on() -> None:
    sound: list[float] = []
    flawed: list[float] = []
    missed: list[str] = []
    for case in cases("report"):
        scores = score_report(case.response, case.plan, case.question, attempt=1, threshold=0.7, evidence=case.evidence)
        (flawed if case.flawed else sound).append(scores.overall)
        if case.flawed and case.kind not in {finding.kind for finding in scores.findings}:
            missed.append(case.name)
    assert auroc(sound, flawed) >= 0.9
    assert len(missed) <= 0.1 * len(flawed), missed


def test_findings_name_the_section_and_the_kind() -> None:
    case = next(case for case in cases("report") if case.flaw == "memory_echo")
    position = int(case.name.rsplit("@", 1)[1])
    findings = report_findings(case.response, case.plan, case.question, case.evidence)
    echo = [finding for finding in findings if finding.kind == "memory_echo"]
    assert echo and echo[0].section == position and echo[0].heading.startswith(f"{position}. ")
    across = next(case for case in cases("report") if case.flaw == "memory_echo_across")
    findings = report_findings(across.response, across.plan, across.question, across.evidence)
    assert any(finding.kind == "memory_echo" and finding.section is None for finding in findings)


def test_the_text_rules_read_sentences_not_keywords() -> None:
    assert garbled("Sources disagree: answer extractive sentences below quoted sources cited language model wrote")
    assert garbled("Metamorphic testing checks relations between outputs of machine learning systems.") is None
    assert echoes_an_answer("_Extractive answer: the sentences below are quoted from the sources cited._")
    assert not echoes_an_answer("Pooled testing screens many samples with few tests.")
    assert reformulate("What limits it?", "What is known about pooled testing?") == "What limits it, in pooled testing?"


def test_an_earlier_answer_is_never_a_side_of_a_disagreement_across_sub_questions() -> None:
    """The garbled "Across sub-questions: sources disagree: answer extractive ..." section users saw: a passage
    that is the assistant's own earlier answer (recalled from memory, or an exported report found again in a
    source) is neither compared nor cited."""
    source = scored("rag-1", "Dorfman pooling saves 80 percent of the tests when prevalence is low.")
    echoes: Sequence[ContextChunk] = [
        ContextChunk(
            chunk_id="memory:earlier",
            source_type="memory",
            content="Dorfman pooling saves 20 percent of the tests when prevalence is low.",
            semantic_relevance=0.9,
            metadata={"speaker": "user", "recalled_as": "conversation"},
        ),
        ContextChunk(
            chunk_id="web-9",
            source_type="web",
            content="_Extractive answer: the sentences below are quoted from the sources cited; no language model "
            "wrote them._ Dorfman pooling saves 20 percent of the tests when prevalence is low.",
            semantic_relevance=0.9,
        ),
    ]
    control = ContextChunk(
        chunk_id="rag-3",
        source_type="rag",
        content="Dorfman pooling saves 20 percent of the tests when prevalence is low.",
        semantic_relevance=0.9,
    )
    for echo in [control, *echoes]:
        echoed = scored("rag-2", "x").model_copy(update={"chunk": echo})
        first = result(1, "How many tests does Dorfman pooling save?", [source], [(source.chunk.content, [0])])
        second = result(2, "When is Dorfman pooling worth it?", [echoed], [(echo.content, [0])])
        draft = assemble_report(_query(), plan_of(first, second), [first, second], EvaluationSettings())
        response = draft.response
        across = [section for section in response.sections if section.heading.startswith(CROSS_HEADING)]
        if echo is control:  # a real source that disagrees is shown side by side
            assert across and draft.contradictions
            continue
        assert not across
        assert echo.chunk_id not in {chunk_id for citation in response.citations for chunk_id in citation.chunk_ids}
        assert not draft.contradictions


def _query():  # type: ignore[no-untyped-def]
    from researchcrew.contracts import Query

    return Query(text="What is known about Dorfman screening?", user_id="u", session_id="s")


class GarblingCorpus(CorpusTool):
    """The corpus, its passages garbled (function words gone) until ``garble`` is switched off."""

    garble = True

    async def _search(self, query: str, **kwargs):  # type: ignore[no-untyped-def,override]
        hits = await super()._search(query, **kwargs)
        if not self.garble:
            return hits
        stop = {"the", "of", "in", "to", "by", "with", "when", "for", "a", "many", "few", "before", "is", "are"}
        return [
            hit.model_copy(update={"content": " ".join(w for w in hit.content.split() if w.lower() not in stop)})
            for hit in hits
        ]


async def test_a_deep_run_with_a_flawed_section_is_remediated_and_the_report_says_so(tmp_path: Path) -> None:
    corpus = GarblingCorpus(PASSAGES)
    events: list[DeepProgressEvent] = []

    def on_event(event: DeepProgressEvent) -> None:
        events.append(event)
        if event.phase == "quality" and event.detail.get("retry"):
            corpus.garble = False  # what the sources say when asked again

    async with open_runtime(Settings(data_dir=tmp_path), tools=[corpus], remember=False) as runtime:
        run = await (await runtime.deep_research()).research(
            ResearchRequest(question="What is known about pooled testing?", user_id="ada", session_id="s"),
            DeepOptions(auto_approve=True, max_subquestions=3, follow_references=False, clarify=False),
            on_event=on_event,
        )
    report = run.report
    assert report is not None and run.status == "completed"
    first = report.quality[0]
    assert any(finding.kind == "garbled" for finding in first.findings)
    assert report.remediated and len(report.quality) == 2
    assert report.quality[1].overall > first.overall
    assert not any(finding.kind == "garbled" for finding in report.quality[1].findings)
    garbled_sections = {finding.section for finding in first.findings if finding.kind == "garbled"}
    revised = {revision.section: revision for revision in report.revisions}
    assert garbled_sections <= set(revised)
    assert any(revision.action == "researched_again" and revision.question for revision in report.revisions)
    assert any(caveat.startswith("Revisions after the quality check:") for caveat in report.response.caveats)
    assert_every_claim_cited(report.response)
    retry = [event for event in events if event.phase == "research" and event.detail.get("remediation")]
    assert retry and {event.sub_question for event in retry} == {r.section for r in report.revisions if r.section}


async def test_a_section_researched_again_without_an_answer_is_dropped_with_its_reason() -> None:
    from researchcrew.contracts.deep import PlanItem, QualityFinding
    from researchcrew.deep._remediate import remediate, revision_note

    source = scored("rag-1", "Pooled testing screens many samples with few tests.")
    first = result(1, "What is pooled testing?", [source], [(source.chunk.content, [0])])
    second = result(2, "What limits pooled testing?", [source], [(source.chunk.content, [0])])
    plan = plan_of(first, second)
    findings = [
        QualityFinding(section=1, heading="1. What is pooled testing?", kind="single_source"),
        QualityFinding(section=2, heading="2. What limits pooled testing?", kind="garbled"),
        QualityFinding(section=None, heading="Across sub-questions: sources disagree", kind="memory_echo"),
    ]
    asked: list[tuple[int, str]] = []

    async def again(position: int, item: PlanItem):  # type: ignore[no-untyped-def]
        asked.append((position, item.question))
        return None if position == 1 else result(2, item.question, [], None)

    updated, revisions = await remediate("What is known about pooled testing?", plan, [first, second], findings, again)
    assert [position for position, _ in asked] == [1, 2]  # each flawed plan section once; none outside the plan
    assert [(r.section, r.action) for r in revisions] == [(2, "dropped"), (None, "dropped")]  # 1: no time, kept
    assert "found no cited answer" in revisions[0].outcome
    assert updated[0] == first and updated[1].status == "not_researched"
    assert updated[1].note and updated[1].note.startswith("dropped by the quality check (garbled)")
    note = revision_note(revisions)
    assert note.startswith("Revisions after the quality check: section 2 dropped (garbled)")
    _, mild = await remediate(
        "What is known about pooled testing?", plan, [first, second], findings[:1], again, failed=False
    )
    assert mild == []  # one source alone is remedied only when the report fails
