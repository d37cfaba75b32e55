"""Deep runs through the runtime's API: to the end when approved automatically; paused at the plan (or at
clarifying questions) until the user's decision arrives; every misuse a named error with one line; the shared
deadline and token budget; streaming; cancelling; and a pause that outlives the runtime that made it."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from researchcrew.contracts import FinalResponse
from researchcrew.contracts.deep import DeepOptions, DeepProgressEvent, DeepRun, PlanChoice, PlanDecision
from researchcrew.contracts.request import ResearchRequest
from researchcrew.errors import (
    DeepRunExpiredError,
    DeepRunForbiddenError,
    DeepRunNotFoundError,
    DeepRunStateError,
    PlanDecisionError,
)
from researchcrew.memory.store import MemoryStore
from researchcrew.runtime import open_runtime
from researchcrew.settings import DeepResearchSettings, Settings
from researchcrew.testing import FakeLLM
from tests.deep.corpus import CorpusTool
from tests.e2e.support import assert_every_claim_cited

QUESTION = "What is known about pooled testing?"


def settings(tmp_path: Path, **deep: Any) -> Settings:
    # The six-passage corpus answers nearly every query with the same passages: checked against it, a plan keeps one
    # sub-question (tests/deep/test_plan_checks.py). These tests cut, reorder and time a plan of several, judged in
    # the probe.
    deep.setdefault("plan_checks", 0)
    return Settings(data_dir=tmp_path, deep=DeepResearchSettings(**deep))


def request(question: str = QUESTION, user_id: str = "ada") -> ResearchRequest:
    return ResearchRequest(question=question, user_id=user_id, session_id="s1")


async def test_an_approved_run_goes_from_probe_to_checked_report(tmp_path: Path) -> None:
    events: list[DeepProgressEvent] = []
    async with open_runtime(settings(tmp_path), tools=[CorpusTool()], remember=False) as runtime:
        run = await (await runtime.deep_research()).research(
            request(), DeepOptions(auto_approve=True, max_subquestions=4), on_event=events.append
        )

    assert run.status == "completed" and run.awaiting is None and run.error is None
    report = run.report
    assert report is not None and report.plan == run.plan and len(report.plan.items) == 4
    assert report.response.answer_kind == "extractive" and report.response.query.text == QUESTION
    assert_every_claim_cited(report.response)
    headings = [section.heading for section in report.response.sections if section.heading[:1].isdigit()]
    assert headings[0] == f"1. {report.plan.items[0].question}"
    assert [sub.status for sub in report.sub_questions].count("answered") >= 3
    assert report.quality[0].attempt == 1 and 0 < report.quality[0].overall <= 1
    assert report.budget.deadline_s == 300 and 0 < report.budget.elapsed_s < 60 and report.budget.token_budget is None
    assert not report.partial and report.not_done == []
    phases = [(event.phase, event.status) for event in events if event.stage_event is None]
    assert phases[0] == ("clarify", "started") and phases[-1] == ("respond", "finished")
    assert ("plan", "finished") in phases and ("quality", "finished") in phases
    research = [event for event in events if event.phase == "research" and event.stage_event is not None]
    assert {event.sub_question for event in research} == {1, 2, 3, 4}
    assert {event.stage_event.stage for event in research} >= {"retrieve", "evaluate", "synthesize", "validate"}  # type: ignore[union-attr]


async def test_a_run_pauses_at_its_plan_until_the_users_decision_arrives(tmp_path: Path) -> None:
    async with open_runtime(settings(tmp_path), tools=[CorpusTool()], remember=False) as runtime:
        run = await (await runtime.deep_research()).research(request(), DeepOptions(max_subquestions=5))
        assert (run.status, run.awaiting, run.feedback_received) == ("awaiting_human_feedback", "plan_approval", False)
        assert run.plan is not None and 1 <= len(run.plan.items) <= 5 and run.report is None
        assert run.expires_at is not None
        proposed = run.plan.items

        with pytest.raises(DeepRunStateError, match="still waits for a decision on its plan"):
            await (await runtime.deep_research()).resume_research(run.run_id, user_id="ada")
        with pytest.raises(DeepRunStateError, match="waits for a decision on its plan, not an answer"):
            await (await runtime.deep_research()).answer_clarification(run.run_id, user_id="ada", answer="pooling")
        with pytest.raises(DeepRunForbiddenError, match="belongs to another user"):
            await (await runtime.deep_research()).decide_plan(run.run_id, user_id="eve", decision=PlanDecision())
        with pytest.raises(DeepRunNotFoundError, match="no deep run 'nope'"):
            await (await runtime.deep_research()).get_research_run("nope", user_id="ada")
        for bad, message in [
            (PlanDecision(items=[]), "leaves no sub-question"),
            (PlanDecision(items=[PlanChoice(id=1, question=" ")]), "empties it"),
            (PlanDecision(items=[PlanChoice(question=f"Extra {n}?") for n in range(6)]), "at most 5"),
        ]:
            with pytest.raises(PlanDecisionError, match=message):
                await (await runtime.deep_research()).decide_plan(run.run_id, user_id="ada", decision=bad)
        assert not (
            await (await runtime.deep_research()).get_research_run(run.run_id, user_id="ada")
        ).feedback_received  # nothing stored

        last, first = proposed[-1], proposed[0]
        decision = PlanDecision(
            items=[PlanChoice(id=last.id), PlanChoice(id=first.id, question="How does pooled testing save reagents?")]
        )
        run = await (await runtime.deep_research()).decide_plan(run.run_id, user_id="ada", decision=decision)
        assert run.status == "awaiting_human_feedback" and run.feedback_received
        run = await (await runtime.deep_research()).resume_research(run.run_id, user_id="ada")

        assert run.status == "completed" and run.report is not None
        assert [item.question for item in run.report.plan.items] == [
            last.question,
            "How does pooled testing save reagents?",
        ]
        assert [sub.item.id for sub in run.report.sub_questions] == [last.id, first.id]
        with pytest.raises(DeepRunStateError, match="is completed; it waits for nothing"):
            await (await runtime.deep_research()).decide_plan(run.run_id, user_id="ada", decision=PlanDecision())


async def test_clarifying_questions_come_first_when_nothing_is_found_and_the_reply_narrows_the_question(
    tmp_path: Path,
) -> None:
    tool = CorpusTool(only_if="pooled")  # nothing for the vague question, plenty once it names pooled testing
    async with open_runtime(settings(tmp_path), tools=[tool], remember=False) as runtime:
        run = await (await runtime.deep_research()).research(request("What is known about the screening method?"))
        assert (run.status, run.awaiting) == ("awaiting_human_feedback", "clarification")
        assert run.clarification is not None and run.clarification.reason == "no_evidence"
        assert run.plan is None and "just answer" in run.clarification.message

        await (await runtime.deep_research()).answer_clarification(
            run.run_id, user_id="ada", answer="pooled testing of samples"
        )
        run = await (await runtime.deep_research()).resume_research(run.run_id, user_id="ada")
        assert (run.status, run.awaiting) == ("awaiting_human_feedback", "plan_approval")
        assert run.plan is not None and run.plan.question.endswith("(pooled testing of samples)")
        assert all(item.question.endswith("(pooled testing of samples)?") for item in run.plan.items)
        await (await runtime.deep_research()).decide_plan(
            run.run_id, user_id="ada", decision=PlanDecision.edits(run.plan, cut=[2, 3])
        )
        run = await (await runtime.deep_research()).resume_research(run.run_id, user_id="ada")

    assert run.status == "completed" and run.report is not None
    assert run.report.clarification_answer == "pooled testing of samples"
    assert run.report.original_question == "What is known about the screening method?"
    assert any(sub.status == "answered" for sub in run.report.sub_questions)


async def test_just_answer_keeps_the_question_as_asked(tmp_path: Path) -> None:
    tool = CorpusTool(only_if="pooled")
    async with open_runtime(settings(tmp_path), tools=[tool], remember=False) as runtime:
        run = await (await runtime.deep_research()).research(request("What is known about the screening method?"))
        await (await runtime.deep_research()).answer_clarification(run.run_id, user_id="ada", answer="just answer")
        run = await (await runtime.deep_research()).resume_research(run.run_id, user_id="ada")
        assert run.awaiting == "plan_approval" and run.plan is not None
        assert run.plan.question == "What is known about the screening method?"


async def test_a_paused_run_outlives_its_runtime(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}"
    store = await MemoryStore.open(url)
    try:
        async with open_runtime(settings(tmp_path), tools=[CorpusTool()], memory_store=store, remember=False) as first:
            run = await (await first.deep_research()).research(request())
    finally:
        await store.close()
    store = await MemoryStore.open(url)  # a new process, as far as the run can tell
    try:
        async with open_runtime(settings(tmp_path), tools=[CorpusTool()], memory_store=store, remember=False) as second:
            again = await (await second.deep_research()).get_research_run(run.run_id, user_id="ada")
            assert again.status == "awaiting_human_feedback" and again.plan == run.plan
            await (await second.deep_research()).decide_plan(
                run.run_id, user_id="ada", decision=PlanDecision.edits(run.plan, cut=[1])
            )  # type: ignore[arg-type]
            done = await (await second.deep_research()).resume_research(run.run_id, user_id="ada")
    finally:
        await store.close()
    assert done.status == "completed" and done.report is not None
    assert len(done.report.plan.items) == len(run.plan.items) - 1  # type: ignore[union-attr]


async def test_an_expired_pause_cannot_be_decided_or_resumed(tmp_path: Path) -> None:
    async with open_runtime(settings(tmp_path, pause_ttl_s=0.2), tools=[CorpusTool()], remember=False) as runtime:
        run = await (await runtime.deep_research()).research(request())
        await asyncio.sleep(0.3)
        assert (await (await runtime.deep_research()).get_research_run(run.run_id, user_id="ada")).status == "expired"
        with pytest.raises(DeepRunExpiredError, match="expired: start a new run"):
            await (await runtime.deep_research()).decide_plan(run.run_id, user_id="ada", decision=PlanDecision())
        with pytest.raises(DeepRunExpiredError):
            await (await runtime.deep_research()).resume_research(run.run_id, user_id="ada")


async def test_two_resumes_of_one_run_one_wins(tmp_path: Path) -> None:
    async with open_runtime(settings(tmp_path), tools=[CorpusTool(delay_s=0.05)], remember=False) as runtime:
        run = await (await runtime.deep_research()).research(request(), DeepOptions(max_subquestions=2))
        await (await runtime.deep_research()).decide_plan(run.run_id, user_id="ada", decision=PlanDecision())
        outcomes = await asyncio.gather(
            (await runtime.deep_research()).resume_research(run.run_id, user_id="ada"),
            (await runtime.deep_research()).resume_research(run.run_id, user_id="ada"),
            return_exceptions=True,
        )
    done = [outcome for outcome in outcomes if isinstance(outcome, DeepRun)]
    refused = [outcome for outcome in outcomes if isinstance(outcome, DeepRunStateError)]
    assert len(done) == 1 and done[0].status == "completed" and len(refused) == 1


async def test_the_deadline_returns_the_report_so_far_marked_partial(tmp_path: Path) -> None:
    async with open_runtime(settings(tmp_path), tools=[CorpusTool(delay_s=0.5)], remember=False) as runtime:
        run = await (await runtime.deep_research()).research(
            request(), DeepOptions(auto_approve=True, max_subquestions=6, deadline_s=3.0)
        )
    report = run.report
    assert run.status == "completed" and report is not None
    assert report.partial and report.response.partial and report.budget.exhausted == "deadline"
    statuses = [sub.status for sub in report.sub_questions]
    assert "not_researched" in statuses and statuses[0] != "not_researched"
    assert report.not_done and all(
        "was not researched: the run's deadline was reached" in note for note in report.not_done
    )
    assert report.budget.elapsed_s < 4.5
    assert set(report.not_done) <= set(report.response.caveats)


def _scripted(messages: list[dict[str, Any]]) -> str:
    """The fake model: a plan when asked for one, otherwise an answer citing the first evidence block."""
    if "sub_questions" in messages[0]["content"]:
        return json.dumps(
            {
                "sub_questions": [
                    {"question": q}
                    for q in ("What is pooled testing?", "What limits pooled testing?", "Who proposed group testing?")
                ]
            }
        )
    return json.dumps(
        {
            "sections": [
                {"heading": "", "perspective": None, "claims": [{"text": "Pooling mixes samples.", "citations": [1]}]}
            ]
        }
    )


async def test_the_token_budget_stops_research_and_says_so(tmp_path: Path) -> None:
    llm = FakeLLM([_scripted] * 20)
    async with open_runtime(settings(tmp_path), tools=[CorpusTool()], llm=llm, remember=False) as runtime:
        run = await (await runtime.deep_research()).research(
            request(), DeepOptions(auto_approve=True, token_budget=1000)
        )
    report = run.report
    assert report is not None and report.budget.exhausted == "tokens" and report.partial
    assert report.budget.token_budget == 1000 and report.budget.tokens_used >= 1000
    assert report.sub_questions[0].status == "answered" and report.sub_questions[0].tokens > 0
    assert report.sub_questions[-1].status == "not_researched"
    assert "the run's token budget was spent" in report.not_done[-1]


async def test_a_run_says_what_it_cost_in_total_and_per_sub_question(tmp_path: Path) -> None:
    llm = FakeLLM([_scripted] * 40, model="openai/gpt-4o-mini")
    async with open_runtime(settings(tmp_path), tools=[CorpusTool()], llm=llm, remember=False) as runtime:
        run = await (await runtime.deep_research()).research(request(), DeepOptions(auto_approve=True))
    report = run.report
    assert report is not None
    cost = report.budget.cost
    prompt = sum(call.usage["prompt_tokens"] for call in llm.calls if call.usage)
    completion = sum(call.usage["completion_tokens"] for call in llm.calls if call.usage)
    assert cost.priced and cost.model == "gpt-4o-mini"
    assert cost.usd == pytest.approx(prompt * 0.15e-6 + completion * 0.6e-6)  # every call of the run, priced
    answered = [sub for sub in report.sub_questions if sub.status == "answered"]
    assert answered and all(sub.cost_usd is not None and sub.cost_usd > 0 for sub in answered)
    assert sum(sub.cost_usd or 0.0 for sub in report.sub_questions) <= cost.usd  # planning and report cost too


async def test_a_run_without_an_llm_costs_nothing(tmp_path: Path) -> None:
    async with open_runtime(settings(tmp_path), tools=[CorpusTool()], remember=False) as runtime:
        run = await (await runtime.deep_research()).research(request(), DeepOptions(auto_approve=True))
    assert run.report is not None and run.report.budget.cost.usd == 0.0
    assert all(sub.cost_usd == 0.0 for sub in run.report.sub_questions)


async def test_streaming_yields_the_events_then_the_run(tmp_path: Path) -> None:
    async with open_runtime(settings(tmp_path), tools=[CorpusTool()], remember=False) as runtime:
        items = [
            item
            async for item in (await runtime.deep_research()).research_stream(
                request(), DeepOptions(max_subquestions=2)
            )
        ]
        assert isinstance(items[-1], DeepRun) and items[-1].status == "awaiting_human_feedback"
        assert all(isinstance(item, DeepProgressEvent) for item in items[:-1])
        assert any(item.phase == "plan" and item.status == "paused" for item in items[:-1])  # type: ignore[union-attr]
        await (await runtime.deep_research()).decide_plan(items[-1].run_id, user_id="ada", decision=PlanDecision())
        resumed = [
            item
            async for item in (await runtime.deep_research()).resume_research_stream(items[-1].run_id, user_id="ada")
        ]
    assert isinstance(resumed[-1], DeepRun) and resumed[-1].status == "completed"
    assert any(isinstance(item, DeepProgressEvent) and item.phase == "research" for item in resumed)


async def test_cancelling_a_run(tmp_path: Path) -> None:
    async with open_runtime(settings(tmp_path), tools=[CorpusTool()], remember=False) as runtime:
        first = await (await runtime.deep_research()).research(request())
        await (await runtime.deep_research()).decide_plan(
            first.run_id, user_id="ada", decision=PlanDecision(action="cancel")
        )
        assert (
            await (await runtime.deep_research()).resume_research(first.run_id, user_id="ada")
        ).status == "cancelled"
        second = await (await runtime.deep_research()).research(request())
        assert (
            await (await runtime.deep_research()).cancel_research(second.run_id, user_id="ada")
        ).status == "cancelled"
        with pytest.raises(DeepRunStateError, match="is cancelled"):
            await (await runtime.deep_research()).cancel_research(second.run_id, user_id="ada")


async def test_a_finished_deep_run_is_remembered_as_one_exchange(tmp_path: Path, embedder_available: None) -> None:
    async with open_runtime(settings(tmp_path), tools=[CorpusTool()]) as runtime:
        run = await (await runtime.deep_research()).research(
            request(), DeepOptions(auto_approve=True, max_subquestions=2)
        )
        assert await runtime.flush_memory(30)
        [exchange] = (await runtime.export_user("ada"))["exchanges"]
    assert exchange["question"] == QUESTION and exchange["context"] == {"deep_run": run.run_id}
    assert isinstance(run.report.response, FinalResponse)  # type: ignore[union-attr]


async def test_a_finished_run_is_in_the_usage_ledger_with_its_tokens_and_cost(tmp_path: Path) -> None:
    llm = FakeLLM([_scripted] * 40, model="openai/gpt-4o-mini")
    async with open_runtime(settings(tmp_path), tools=[CorpusTool()], llm=llm) as runtime:
        run = await (await runtime.deep_research()).research(request(), DeepOptions(auto_approve=True))
        ledger = await runtime.usage_ledger()
        assert ledger is not None and run.report is not None
        [today] = await ledger.by_day("ada", since=datetime.now(UTC) - timedelta(days=1))
    budget = run.report.budget
    assert today.questions == 1
    assert (today.prompt_tokens, today.completion_tokens) == (budget.prompt_tokens, budget.completion_tokens)
    assert budget.prompt_tokens + budget.completion_tokens == budget.tokens_used
    assert today.cost_usd == pytest.approx(budget.cost.usd)
