"""Runs in process (the embedded default), through the one Jobs API: results, retries, failures for good, cancel,
resume without repeating stored answers, exports, and the SDK door."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from researchcrew import ResearchAssistant
from researchcrew.errors import JobInputError, JobNotFoundError
from researchcrew.jobs.api import Jobs
from researchcrew.jobs.contracts import QuestionResult, crewai_state
from researchcrew.runtime import open_runtime
from researchcrew.settings import JobsSettings, Settings, SourceHealthSettings
from researchcrew.testing import FakeTool, fake_chunk

QUESTIONS = [f"What does study {n} say about flaky tests?" for n in range(6)]


def settings_for(tmp_path: Path, health: SourceHealthSettings | None = None, **jobs: Any) -> Settings:
    values = {"concurrency": 2, "retry_backoff_s": 0.01, "retry_backoff_max_s": 0.05, "lease_s": 5.0, **jobs}
    # A source that failed is skipped for a window (tools/health.py) and a retry waits for it: scaled down like
    # the retries' own waits, so that a source failing twice is still tried three times here.
    health = health or SourceHealthSettings(initial_backoff_s=0.02, max_backoff_s=0.04)
    return Settings(data_dir=tmp_path / "data", jobs=JobsSettings(**values), health=health)


class CountingTool(FakeTool):
    """Evidence naming the question it was asked; fails the first ``fail_first`` calls per question."""

    def __init__(
        self, source_type: str = "rag", *, fail_first: int = 0, kind: str = "unreachable", **kwargs: Any
    ) -> None:
        super().__init__(source_type, **kwargs)
        self.fail_first = fail_first
        self.kind = kind
        self.per_question: Counter[str] = Counter()
        self.urls: dict[str, str] = {}

    async def _search(self, query: str, **options: Any) -> list[Any]:  # type: ignore[override]
        self.per_question[query] += 1
        if self.per_question[query] <= self.fail_first:
            from researchcrew.errors import ToolError

            raise ToolError(self.kind, f"{self.kind} on purpose")  # type: ignore[arg-type]
        await super()._search(query, **options)
        url = self.urls.get(query, f"https://example.org/{abs(hash(query)) % 1000}")
        return [
            fake_chunk(
                self.source_type,
                1,
                content=f"{query} Flaky tests fail intermittently.",
                semantic_relevance=0.9,
                title=f"About {query[:20]}",
                url=url,
            )
        ]


@pytest.fixture
async def jobs_with(tmp_path: Path) -> AsyncIterator[Any]:
    opened: list[Any] = []

    async def make(*tools: FakeTool, **jobs: Any) -> Jobs:
        runtime = open_runtime(settings_for(tmp_path, **jobs), tools=list(tools), remember=False)
        opened.append(runtime)
        return Jobs(runtime)

    yield make
    for runtime in opened:
        await runtime.aclose()


async def test_a_run_stores_one_result_per_question_with_counts_and_exports(jobs_with: Any, tmp_path: Path) -> None:
    tool = CountingTool()
    jobs = await jobs_with(tool)
    csv_file = tmp_path / "q.csv"
    csv_file.write_text("question,team\n" + "".join(f'"{q}",t{n}\n' for n, q in enumerate(QUESTIONS)))
    created = await jobs.create("ada", name="weekly", questions=csv_file)
    seen: list[int] = []
    run = await jobs.run("ada", "weekly", on_progress=lambda index, status: seen.append(index))
    assert run.status == "completed" and run.counts.answered == len(QUESTIONS)
    assert crewai_state(run.status) == "completed"  # the names crewAI's deployed-crew clients read
    assert sorted(seen) == list(range(len(QUESTIONS)))
    assert all(count == 1 for count in tool.per_question.values()) and len(tool.per_question) == len(QUESTIONS)
    results = await jobs.results("ada", run.id)
    assert [r.carried["team"] for r in results] == [f"t{n}" for n in range(len(QUESTIONS))]
    rows = list(csv.DictReader(io.StringIO(await jobs.export("ada", run.id, "csv"))))
    assert [row["question"] for row in rows] == QUESTIONS and rows[0]["team"] == "t0"
    assert rows[0]["status"] == "answered" and int(rows[0]["citation_count"]) >= 1 and rows[0]["sources_used"] == "rag"
    assert rows[0]["citation_1_url"].startswith("https://example.org/")
    lines = (await jobs.export("ada", run.id, "jsonl")).splitlines()
    assert QuestionResult.model_validate_json(lines[2]).response is not None
    assert json.loads(lines[0])["question"] == QUESTIONS[0]
    assert created.job.columns == ["team"]


async def test_transient_failures_are_retried_and_failures_for_good_end_the_run_partial(jobs_with: Any) -> None:
    flaky = CountingTool("rag", fail_first=2)  # every source down, twice, then fine
    # Retries alone: with source health on, one question's failure backs the shared source off and the other
    # question's attempt is skipped instead of calling it (how a retry waits out a backoff is tested below).
    jobs = await jobs_with(flaky, attempts=3, health=SourceHealthSettings(enabled=False))
    await jobs.create("ada", name="flaky", questions=QUESTIONS[:2])
    run = await jobs.run("ada", "flaky")
    assert run.status == "completed" and run.counts.answered == 2
    assert set(flaky.per_question.values()) == {3}

    down = CountingTool("rag", fail_first=99, kind="not_configured")  # permanent: no retry
    jobs = await jobs_with(down, attempts=3)
    await jobs.create("ada", name="down", questions=QUESTIONS[:2])
    run = await jobs.run("ada", "down")
    assert run.status == "failed" and run.counts.failed == 2
    assert set(down.per_question.values()) == {1}
    [result, _] = await jobs.results("ada", run.id)
    assert result.failure is not None and result.failure.kind == "sources_failed"
    assert "rag: not_configured" in result.failure.message
    assert run.source_failures[0].source == "rag" and run.source_failures[0].count == 2


async def test_a_question_whose_only_source_is_backing_off_is_retried_when_its_window_ends(tmp_path: Path) -> None:
    """The retry after an unreachable arXiv finds it backing off (tools/health.py): that is the source's failure,
    not "no source was searched", so the question waits for the window and is tried again."""
    arxiv = CountingTool("arxiv", name="academic_search", fail_first=1)
    settings = settings_for(tmp_path, attempts=3, retry_backoff_max_s=5.0)
    settings.health = SourceHealthSettings(initial_backoff_s=0.3, max_backoff_s=0.3)
    runtime = open_runtime(settings, tools=[arxiv], remember=False)
    try:
        jobs = Jobs(runtime)
        await jobs.create("ada", name="backoff", questions=QUESTIONS[:1])
        run = await jobs.run("ada", "backoff")
    finally:
        await runtime.aclose()
    assert run.counts.answered == 1
    assert arxiv.per_question[QUESTIONS[0]] == 2  # unreachable, then (after the skipped try's wait) answered


async def test_a_question_whose_only_source_stays_backing_off_fails_saying_so(tmp_path: Path) -> None:
    arxiv = CountingTool("arxiv", name="academic_search", fail_first=99)
    settings = settings_for(tmp_path, attempts=2)
    settings.health = SourceHealthSettings(initial_backoff_s=600, max_backoff_s=600)
    runtime = open_runtime(settings, tools=[arxiv], remember=False)
    try:
        jobs = Jobs(runtime)
        await jobs.create("ada", name="down", questions=QUESTIONS[:1])
        run = await jobs.run("ada", "down")
        [result] = await jobs.results("ada", run.id)
    finally:
        await runtime.aclose()
    assert run.status == "failed" and arxiv.per_question[QUESTIONS[0]] == 1  # the second try skipped it
    assert result.status == "failed" and result.failure is not None
    assert result.failure.kind == "sources_failed"  # not "no_sources": it was selected and could not be searched
    assert "arxiv: unreachable — skipped: unreachable 0 s ago; next try in 10 min" in result.failure.message


async def test_a_question_whose_sources_all_fail_is_failed_but_the_others_answer(jobs_with: Any) -> None:
    class Picky(CountingTool):
        async def _search(self, query: str, **options: Any) -> list[Any]:  # type: ignore[override]
            if "study 1 " in query:
                from researchcrew.errors import ToolError

                raise ToolError("http_error", "HTTP 400 for this one", status_code=400)
            return await super()._search(query, **options)

    jobs = await jobs_with(Picky())
    await jobs.create("ada", name="mixed", questions=QUESTIONS[:3])
    run = await jobs.run("ada", "mixed")
    assert run.status == "partial" and (run.counts.answered, run.counts.failed) == (2, 1)


async def test_cancel_stops_questions_not_yet_started(jobs_with: Any) -> None:
    slow = CountingTool(delay_s=0.3)
    jobs = await jobs_with(slow, concurrency=1)
    await jobs.create("ada", name="slow", questions=QUESTIONS)
    started = await jobs.start("ada", "slow", executor="in_process")
    while not slow.per_question:  # noqa: ASYNC110  (polling a fake's call log)
        await asyncio.sleep(0.02)
    cancelled = await jobs.cancel("ada", started.id)
    assert cancelled.cancel_requested and cancelled.counts.cancelled >= len(QUESTIONS) - 2
    for _ in range(100):
        info = await jobs.status("ada", started.id)
        if info.finished:
            break
        await asyncio.sleep(0.05)
    assert info.status == "cancelled"
    assert len(slow.per_question) <= 2  # the one being researched (and at most one claimed just before)
    await jobs.aclose()


async def test_an_interrupted_run_resumes_without_repeating_stored_answers(jobs_with: Any) -> None:
    tool = CountingTool(delay_s=0.15)
    jobs = await jobs_with(tool, concurrency=2)
    await jobs.create("ada", name="long", questions=QUESTIONS)
    started = await jobs.start("ada", "long", executor="in_process")
    while sum(1 for r in await jobs.results("ada", started.id) if r.status == "answered") < 2:  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    await jobs.aclose()  # the process stops: questions in progress go back to pending
    stopped = await jobs.results("ada", started.id)
    answered_before = {r.question for r in stopped if r.status == "answered"}
    assert {r.status for r in stopped} <= {"answered", "pending"} and len(answered_before) < len(QUESTIONS)
    resumed = await jobs.resume("ada", started.id)
    assert resumed.status == "completed" and resumed.counts.answered == len(QUESTIONS)
    for question in answered_before:
        assert tool.per_question[question] == 1  # not asked again


async def test_the_report_says_what_is_new_since_the_previous_run(jobs_with: Any) -> None:
    tool = CountingTool()
    jobs = await jobs_with(tool)
    await jobs.create("ada", name="weekly", questions=QUESTIONS[:2], schedule="0 6 * * MON", timezone="Europe/Berlin")
    first = await jobs.run("ada", "weekly")
    first_report = await jobs.export("ada", first.id, "md")
    assert "first finished run" in first_report and "| 1 | What does study 0 say" in first_report
    tool.urls[QUESTIONS[1]] = "https://example.org/a-new-paper"
    second = await jobs.run("ada", "weekly")
    report = await jobs.export("ada", second.id, "md")
    news = report.split("## What is new since the previous run")[1].split("## Answers")[0]
    assert f"Compared with run {first.id[:12]}" in news
    assert "https://example.org/a-new-paper" in news and "2. What does study 1" in news
    assert "1. What does study 0" not in news  # unchanged question: not listed


async def test_bad_input_is_refused_before_anything_is_stored(jobs_with: Any, tmp_path: Path) -> None:
    jobs = await jobs_with(CountingTool())
    with pytest.raises(JobInputError, match=r"schedule\.cron: invalid cron expression"):
        await jobs.create("ada", name="x", questions=["q?"], schedule="every monday")
    with pytest.raises(JobInputError, match=r"schedule\.timezone: unknown time zone"):
        await jobs.create("ada", name="x", questions=["q?"], schedule="0 6 * * MON", timezone="Berlin/Mars")
    with pytest.raises(JobInputError, match=r"options\.deadline_s"):
        await jobs.create("ada", name="x", questions=["q?"], options={"deadline_s": 0})
    with pytest.raises(JobInputError, match="webhook_url"):
        await jobs.create("ada", name="x", questions=["q?"], webhook_url="not a url")
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_text('{"question": "ok?"}\n{"question": "x", "exclude_sources": ["Not A Source"]}\n')
    with pytest.raises(JobInputError, match=r"line 2: exclude_sources\.0"):
        await jobs.create("ada", name="x", questions=jsonl)
    assert await jobs.list("ada") == []
    with pytest.raises(JobNotFoundError):
        await jobs.run("ada", "x")


async def test_the_sdk_has_the_same_operations(tmp_path: Path) -> None:
    tool = CountingTool()
    async with ResearchAssistant(settings_for(tmp_path), tools=[tool], remember=False) as assistant:
        await assistant.jobs.create("ada", name="sdk", questions=QUESTIONS[:2])
        run = await assistant.jobs.run("ada", "sdk")
        assert run.counts.answered == 2
        assert [job.name for job in await assistant.jobs.list("ada")] == ["sdk"]
        assert (await assistant.jobs.runs("ada", "sdk"))[0].id == run.id
