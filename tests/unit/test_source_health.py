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
from researchcrew.cli._status import BUILTIN_TOOL_NAMES
from researchcrew.contracts import ContextChunk, RetrieverInput, SourceFailure
from researchcrew.pipeline.retrieve import Retriever
from researchcrew.settings import SourceHealthSettings
from researchcrew.testing import FakeTool
from researchcrew.tools.base import current_call
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
        assert result.stdout.startswith("Commands that use the stores")  # where commands run (issue 19), then health
        lines = {line.split()[0]: line for line in result.stdout.splitlines()[2:]}
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
    assert "run in process: no service is running for" in result.stdout.splitlines()[0]
    assert all(line.rstrip().endswith("healthy") for line in result.stdout.splitlines()[2:])


class QueueingTool(FakeTool):
    """Waits in a queue of its own before its request leaves (as arXiv's pacing makes calls wait), then hangs."""

    def __init__(self, *, sends: bool) -> None:
        super().__init__("arxiv", name="academic_search", hang=True)
        self.sends = sends

    async def _search(self, query: str, **kwargs: Any) -> list[ContextChunk]:
        sent: list[float] = []
        call = current_call()
        assert call is not None
        call.queued(lambda: sent[0] if sent else None)
        if self.sends:  # its turn came at once: the source has the request and does not answer
            sent.append(time.monotonic())
        return await super()._search(query, **kwargs)


@pytest.mark.parametrize("sends", [False, True])
async def test_only_a_timeout_of_the_request_itself_backs_the_source_off(sends: bool) -> None:
    tool = QueueingTool(sends=sends)
    retriever = Retriever([tool], health=SourceHealth(SETTINGS, clock=Clock()))
    first = await retriever.run(request().model_copy(update={"timeout_per_source": 0.2}))
    report = first.aggregated_context.report_for("arxiv")
    assert report is not None and report.failure is not None and report.failure.kind == "timeout"
    assert ("its own request queue" in report.failure.message) is not sends
    second = await retriever.run(request().model_copy(update={"timeout_per_source": 0.2}))
    assert second.aggregated_context.report_for("arxiv").status == ("skipped" if sends else "failed")  # type: ignore[union-attr]
    assert tool.started == (1 if sends else 2)  # a queue of our own says nothing about the source


async def test_an_arxiv_call_waiting_behind_other_workers_turns_does_not_back_arxiv_off() -> None:
    """The multi-worker case (tests/jobs/test_limits.py): arXiv's one request per 3 s is shared through Redis, so
    a worker's call can spend its whole timeout waiting for a turn while other workers' requests are answered."""
    import redis

    from researchcrew.settings import ArxivSettings
    from researchcrew.tools.arxiv import ArxivTool, RequestSpacer
    from researchcrew.tools.limits import SharedPacer
    from tests.jobs.cluster import ArxivStandIn
    from tests.loopback.server import LoopbackServer

    url = reachable_redis()
    prefix = f"rc-health-queue-{uuid.uuid4().hex[:8]}"
    pacing = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    client_a, worker_a = shared(prefix, Clock(), url)
    client_b, worker_b = shared(prefix, Clock(), url)
    stand_in = ArxivStandIn()
    with LoopbackServer(stand_in) as server:
        settings = ArxivSettings(api_url=f"{server.url}/api/query", timeout_s=1, min_interval_s=3, cache_ttl_s=0)
        spacer = RequestSpacer(3.0)  # worker B's own spacer: it has sent nothing yet
        spacer.shared = SharedPacer(pacing, f"{prefix}:limits:pace:arxiv", 3.0)
        tool = ArxivTool(settings, spacer=spacer)
        try:
            SharedPacer(pacing, f"{prefix}:limits:pace:arxiv", 3.0).wait_turn()  # worker A's request just now
            output = await Retriever([tool], health=worker_b).run(request())
            report = output.aggregated_context.report_for("arxiv")
            assert report is not None and report.failure is not None and report.failure.kind == "timeout"
            assert "its own request queue" in report.failure.message
            # Neither worker backs arXiv off: it was never asked within the time.
            assert await worker_a.skips([("academic_search", "arxiv")]) == {}
            assert await worker_b.skips([("academic_search", "arxiv")]) == {}
        finally:
            tool.close()
            spacer.close()
            await client_a.delete(worker_a.key("academic_search"))
            await client_a.aclose()
            await client_b.aclose()
            pacing.delete(f"{prefix}:limits:pace:arxiv")
            pacing.close()


async def test_an_arxiv_request_that_was_sent_and_not_answered_backs_arxiv_off() -> None:
    from researchcrew.settings import ArxivSettings
    from researchcrew.tools.arxiv import ArxivTool, RequestSpacer
    from tests.jobs.cluster import ArxivStandIn
    from tests.loopback.server import LoopbackServer

    with LoopbackServer(ArxivStandIn(delay_s=3)) as server:
        settings = ArxivSettings(api_url=f"{server.url}/api/query", timeout_s=0.5, min_interval_s=0, cache_ttl_s=0)
        spacer = RequestSpacer(0.0)
        tool = ArxivTool(settings, spacer=spacer)
        health = SourceHealth(SETTINGS, clock=Clock())
        try:
            output = await Retriever([tool], health=health).run(request())
            report = output.aggregated_context.report_for("arxiv")
            assert report is not None and report.failure is not None and report.failure.kind == "timeout"
            assert "queue" not in report.failure.message
            assert "academic_search" in await health.skips([("academic_search", "arxiv")])
        finally:
            tool.close()
            spacer.close()
