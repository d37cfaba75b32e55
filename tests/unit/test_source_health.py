"""Source health (issue 20 item 6): a source that failed as unreachable, timed out or was rate-limited is skipped for
an exponential, capped backoff window, reported as skipped with the reason; a success resets it. The clock is
injected; the shared variant runs against the real Redis."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import pytest
from click.testing import CliRunner

from researchcrew.cli import cli
from researchcrew.cli.status import BUILTIN_TOOL_NAMES
from researchcrew.contracts import RetrieverInput, SourceFailure
from researchcrew.pipeline.retrieve import Retriever
from researchcrew.settings import SourceHealthSettings
from researchcrew.testing import FakeTool
from researchcrew.tools.health import SourceHealth
from tests.helpers.services import reachable_redis


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


SETTINGS = SourceHealthSettings(initial_backoff_s=60, factor=2, max_backoff_s=200)
UNREACHABLE = SourceFailure(kind="unreachable", message="cannot reach arXiv at 127.0.0.1:9: ConnectionError")


def request() -> RetrieverInput:
    return RetrieverInput(query_text="what is mutation testing?", user_id="u1", session_id="s1")


async def test_a_source_that_failed_is_skipped_with_the_reason_until_its_window_ends() -> None:
    clock = Clock()
    health = SourceHealth(SETTINGS, clock=clock)
    await health.record([("academic_search", UNREACHABLE)])
    clock.now += 40
    skip = (await health.skips([("academic_search", "arxiv")]))["academic_search"]
    assert skip.failure.kind == "unreachable"
    assert skip.failure.message == "skipped: unreachable 40 s ago; next try in 20 s"
    clock.now += 20
    assert await health.skips([("academic_search", "arxiv")]) == {}  # the window is over: try it again


async def test_the_window_grows_exponentially_is_capped_and_a_success_resets_it() -> None:
    clock = Clock()
    health = SourceHealth(SETTINGS, clock=clock)
    windows = []
    for _ in range(4):
        await health.record([("web_search", SourceFailure(kind="timeout", message="no answer within 7 s"))])
        (state,) = await health.states(["web_search"])
        assert state.retry_at is not None and state.last_failure_at is not None
        windows.append((state.retry_at - state.last_failure_at).total_seconds())
        clock.now += 1_000
    assert windows == [60, 120, 200, 200]
    await health.record([("web_search", None)])
    (state,) = await health.states(["web_search"])
    assert state.status == "healthy" and state.failures == 0 and state.last_failure_kind is None
    await health.record([("web_search", SourceFailure(kind="timeout", message="again"))])
    (state,) = await health.states(["web_search"])
    assert state.failures == 1  # counted afresh after the success


@pytest.mark.parametrize(
    ("failure", "skipped"),
    [
        (SourceFailure(kind="http_error", message="HTTP 429", status_code=429), True),
        (SourceFailure(kind="http_error", message="HTTP 503", status_code=503), False),
        (SourceFailure(kind="bad_response", message="not a feed"), False),
        (SourceFailure(kind="not_configured", message="no key"), False),
        (SourceFailure(kind="internal_error", message="a bug"), False),
    ],
)
async def test_only_failures_that_last_start_a_backoff(failure: SourceFailure, skipped: bool) -> None:
    health = SourceHealth(SETTINGS, clock=Clock())
    await health.record([("web_search", failure)])
    skips = await health.skips([("web_search", "web")])
    assert ("web_search" in skips) is skipped
    if skipped:
        assert skips["web_search"].failure.status_code == 429
        assert skips["web_search"].failure.message.startswith("skipped: rate-limited 0 s ago")


async def test_disabled_health_never_skips() -> None:
    health = SourceHealth(SourceHealthSettings(enabled=False), clock=Clock())
    await health.record([("academic_search", UNREACHABLE)])
    assert await health.skips([("academic_search", "arxiv")]) == {}


async def test_the_stored_message_is_redacted() -> None:
    health = SourceHealth(SETTINGS, clock=Clock())
    secret = SourceFailure.model_construct(kind="unreachable", message="cannot reach redis://:hunter2@10.0.0.1:6379/0")
    await health.record([("memory_recall", secret)])
    (state,) = await health.states(["memory_recall"])
    assert state.last_failure_message is not None and "hunter2" not in state.last_failure_message
    assert "hunter2" not in state.describe()


async def test_the_retriever_skips_a_source_backing_off_and_calls_it_again_later() -> None:
    clock = Clock()
    arxiv = FakeTool("arxiv", name="academic_search", fail_with=("unreachable", "cannot reach arXiv"))
    rag = FakeTool("rag")
    retriever = Retriever([rag, arxiv], health=SourceHealth(SETTINGS, clock=clock))

    first = await retriever.run(request())
    assert first.aggregated_context.report_for("arxiv").status == "failed"  # type: ignore[union-attr]
    clock.now += 40
    second = await retriever.run(request())
    report = second.aggregated_context.report_for("arxiv")
    assert report is not None and report.status == "skipped" and report.failure is not None
    assert report.failure.message == "skipped: unreachable 40 s ago; next try in 20 s"
    assert arxiv.started == 1  # not called at all the second time
    assert second.retrieval_status == "partial" and second.sources_failed == ["arxiv"]
    assert "arxiv: unreachable (skipped: unreachable 40 s ago" in (second.error_message or "")

    clock.now += 20
    arxiv.fail_with = None  # it is back
    third = await retriever.run(request())
    assert arxiv.started == 2 and third.retrieval_status == "success"
    assert await retriever.health.skips([("academic_search", "arxiv")]) == {}  # type: ignore[union-attr]


async def test_every_source_backing_off_is_a_failed_retrieval() -> None:
    clock = Clock()
    down = FakeTool("arxiv", name="academic_search", fail_with=("timeout", "no answer"))
    retriever = Retriever([down], health=SourceHealth(SETTINGS, clock=clock))
    await retriever.run(request())
    output = await retriever.run(request())
    assert output.retrieval_status == "failed" and down.started == 1


# Shared through Redis ---------------------------------------------------------------------------------------
def shared(prefix: str, clock: Clock, url: str) -> Any:
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    return client, SourceHealth(SETTINGS, client=client, key_prefix=prefix, clock=clock)


async def test_health_is_shared_by_every_process_using_one_redis() -> None:
    url = reachable_redis()
    prefix = f"rc-health-test-{uuid.uuid4().hex[:8]}"
    clock = Clock()
    client_a, first = shared(prefix, clock, url)
    client_b, second = shared(prefix, clock, url)
    try:
        await first.record([("academic_search", UNREACHABLE)])
        await first.record([("academic_search", UNREACHABLE)])  # twice in a row: 120 s
        clock.now += 40
        skip = (await second.skips([("academic_search", "arxiv")]))["academic_search"]
        assert skip.failure.message == "skipped: unreachable 40 s ago; next try in 80 s"
        (state,) = await second.states()  # the names stored in Redis, without being told
        assert state.name == "academic_search" and state.failures == 2 and state.status == "backing_off"
        await second.record([("academic_search", None)])  # a success anywhere heals it everywhere
        assert await first.skips([("academic_search", "arxiv")]) == {}
    finally:
        await client_a.delete(first.key("academic_search"))
        await client_a.aclose()
        await client_b.aclose()


async def test_a_redis_that_does_not_answer_falls_back_to_this_process() -> None:
    from tests.loopback.server import closed_port

    clock = Clock()
    client, health = shared("rc-health-down", clock, f"redis://127.0.0.1:{closed_port()}/0")
    try:
        await health.record([("academic_search", UNREACHABLE)])  # never raises
        assert "academic_search" in await health.skips([("academic_search", "arxiv")])
    finally:
        await client.aclose()


# `researchcrew status` ----------------------------------------------------------------------------------------
def test_builtin_tool_names_are_the_tools_names() -> None:
    from researchcrew.tools.arxiv import ArxivTool
    from researchcrew.tools.memory_recall import MemoryTool
    from researchcrew.tools.rag import RAGTool
    from researchcrew.tools.web import WebSearchTool

    tools = {tool.source_type: tool.name for tool in (RAGTool, WebSearchTool, ArxivTool, MemoryTool)}
    assert tools == BUILTIN_TOOL_NAMES


def test_status_shows_each_sources_health_from_redis(tmp_path: Any) -> None:
    url = reachable_redis()
    prefix = f"rc-status-test-{uuid.uuid4().hex[:8]}"

    async def fail_arxiv() -> None:
        client, health = shared(prefix, Clock(time.time() - 10), url)
        try:
            failure = SourceFailure.model_construct(kind="unreachable", message="cannot reach http://u:pw@arxiv/x")
            await health.record([("academic_search", failure)])
        finally:
            await client.aclose()

    asyncio.run(fail_arxiv())
    env = {
        "RESEARCHCREW_DATA_DIR": str(tmp_path),
        "RESEARCHCREW_REDIS__URL": url,
        "RESEARCHCREW_REDIS__KEY_PREFIX": prefix,
    }
    try:
        result = CliRunner().invoke(cli, ["status"], env=env, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        lines = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
        assert set(lines) == {"rag", "web", "arxiv", "memory"}
        assert "backing off until" in lines["arxiv"] and "unreachable 10 s ago" in lines["arxiv"]
        assert ":pw@" not in result.stdout  # the password is masked
        assert lines["rag"].endswith("healthy")
        as_json = CliRunner().invoke(cli, ["status", "--json"], env=env, catch_exceptions=False)
        payload = json.loads(as_json.stdout)
        arxiv = next(item for item in payload["sources"] if item["name"] == "academic_search")
        assert arxiv["status"] == "backing_off" and arxiv["last_failure_kind"] == "unreachable"
        assert arxiv["source_type"] == "arxiv" and arxiv["retry_at"]
    finally:
        import redis

        redis.Redis.from_url(url).delete(f"{prefix}:health:academic_search")


def test_status_without_redis_says_what_it_can_know(tmp_path: Any) -> None:
    result = CliRunner().invoke(cli, ["status"], env={"RESEARCHCREW_DATA_DIR": str(tmp_path)}, catch_exceptions=False)
    assert result.exit_code == 0
    assert "no redis.url is set" in result.stdout and "--url" in result.stdout
    assert all(line.rstrip().endswith("healthy") for line in result.stdout.splitlines()[1:])


class PacedTool(FakeTool):
    """Times out waiting in its own queue while the source answers: not the source's fault."""

    def counts_against_health(self, failure: SourceFailure) -> bool:
        return failure.kind != "timeout"


async def test_a_timeout_the_tool_says_was_its_own_queue_does_not_back_the_source_off() -> None:
    paced = PacedTool("arxiv", name="academic_search", fail_with=("timeout", "waited for its turn"))
    retriever = Retriever([paced], health=SourceHealth(SETTINGS, clock=Clock()))
    await retriever.run(request())
    await retriever.run(request())
    assert paced.started == 2  # tried again: a queue of our own says nothing about arXiv


def test_arxiv_does_not_count_a_timeout_spent_waiting_for_its_pacing_turn() -> None:
    from researchcrew.settings import ArxivSettings
    from researchcrew.tools.arxiv import ArxivTool, RequestSpacer

    now = [100.0]
    spacer = RequestSpacer(3.0, clock=lambda: now[0])
    tool = ArxivTool(ArxivSettings(timeout_s=7), spacer=spacer)
    timeout = SourceFailure(kind="timeout", message="academic_search did not answer within 7 s")
    assert tool.counts_against_health(timeout)  # never answered: the timeout is arXiv's
    spacer.last_answer_at = 96.0
    assert not tool.counts_against_health(timeout)  # it answered 4 s ago: we were waiting for our turn
    now[0] = 104.0
    assert tool.counts_against_health(timeout)
    assert tool.counts_against_health(UNREACHABLE)
    tool.close()
