"""The SDK's deep research: research → (answer) → decide → report, in a few calls; options checked up front."""

from __future__ import annotations

from pathlib import Path

import pytest

from researchcrew.assistant import ResearchAssistant
from researchcrew.contracts.deep import DeepProgressEvent, DeepRun, PlanDecision
from researchcrew.errors import ConfigurationError, DeepRunForbiddenError, DeepRunStateError
from researchcrew.settings import Settings
from tests.deep.corpus import CorpusTool


async def test_research_answer_decide_in_a_few_calls(tmp_path: Path) -> None:
    tool = CorpusTool(only_if="pooled")
    async with ResearchAssistant(Settings(data_dir=tmp_path), tools=[tool], remember=False) as assistant:
        run = await assistant.research("What is known about the screening method?", user_id="ada", max_subquestions=3)
        assert run.awaiting == "clarification"
        run = await assistant.answer_clarification(run.run_id, "pooled testing", user_id="ada")
        assert run.awaiting == "plan_approval" and run.plan is not None and len(run.plan.items) == 3
        run = await assistant.decide_plan(run.run_id, PlanDecision.edits(run.plan, cut=[3]), user_id="ada")
        assert run.status == "completed" and run.report is not None and len(run.report.plan.items) == 2
        assert (await assistant.get_research_run(run.run_id, user_id="ada")).report == run.report

        batch = await assistant.research("What is known about pooled testing?", approve=True, max_subquestions=2)
        assert batch.status == "completed"

        paused = await assistant.research("What is known about pooled testing?", max_subquestions=2)
        sent = await assistant.decide_plan(paused.run_id, resume=False)
        assert sent.status == "awaiting_human_feedback" and sent.feedback_received
        assert (await assistant.resume_research(paused.run_id)).status == "completed"

        streamed = [
            item
            async for item in assistant.research_stream(
                "What is known about pooled testing?", approve=True, max_subquestions=2
            )
        ]
        assert isinstance(streamed[-1], DeepRun) and streamed[-1].status == "completed"
        assert all(isinstance(item, DeepProgressEvent) for item in streamed[:-1])


async def test_bad_options_fail_fast_in_one_line(tmp_path: Path) -> None:
    async with ResearchAssistant(Settings(data_dir=tmp_path), tools=[CorpusTool()], remember=False) as assistant:
        with pytest.raises(ConfigurationError, match="max_subquestions"):
            await assistant.research("What is pooled testing?", max_subquestions=50)
        with pytest.raises(ConfigurationError, match="unknown option"):
            await assistant.research("What is pooled testing?", max_sub_questions=3)


async def test_a_finished_report_is_exported_in_every_format(tmp_path: Path) -> None:
    from tests.deep.export_support import docx_text, markers, pdf_text

    async with ResearchAssistant(Settings(data_dir=tmp_path), tools=[CorpusTool()], remember=False) as assistant:
        run = await assistant.research(
            "What is known about pooled testing?", user_id="ada", approve=True, length="brief", report_type="comparison"
        )
        assert run.report is not None and run.report.length == "brief" and run.report.report_type == "comparison"
        pdf = await assistant.export_report(run.run_id, path=tmp_path / "out" / "report.pdf", user_id="ada")
        assert pdf.format == "pdf" and (tmp_path / "out" / "report.pdf").read_bytes() == pdf.content
        docx = await assistant.export_report(run.run_id, "docx", user_id="ada")
        markdown = await assistant.export_report(run.run_id, user_id="ada")
        assert markdown.format == "md" and markdown.media_type.startswith("text/markdown")
        numbers = sorted(citation.number for citation in run.report.response.citations)
        for text in (markdown.content.decode(), pdf_text(pdf.content), docx_text(docx.content)):
            assert sorted(set(markers(text))) == numbers
            assert run.report.response.sections[0].claims[0].text in " ".join(text.split())

        paused = await assistant.research("What is known about pooled testing?", user_id="ada", max_subquestions=2)
        with pytest.raises(DeepRunStateError, match="only a completed run has a report"):
            await assistant.export_report(paused.run_id, "pdf", user_id="ada")
        with pytest.raises(DeepRunForbiddenError):
            await assistant.export_report(run.run_id, "pdf", user_id="bob")
        with pytest.raises(ConfigurationError, match="unknown report format"):
            await assistant.export_report(run.run_id, "odt", user_id="ada")
        with pytest.raises(ConfigurationError, match="cannot tell the report format"):
            await assistant.export_report(run.run_id, path=tmp_path / "report.txt", user_id="ada")
        with pytest.raises(ConfigurationError, match="length"):
            await assistant.research("What is pooled testing?", length="huge")  # type: ignore[arg-type]
