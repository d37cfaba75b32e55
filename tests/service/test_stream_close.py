"""Closing an event stream leaves nothing behind (issue 17 item 9): every task a stream starts — the question and
the queue read it waits on — is cancelled and awaited when the stream closes, however it closes. A read left pending
used to surface later, when it was garbage-collected, as asyncio's "Task was destroyed but it is pending!".

The pump itself (``researchcrew.service._streaming.pump``, shared by the three streams) is driven directly; the
native messages stream and the OpenAI-compatible one are closed by real TCP disconnects against uvicorn.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from researchcrew.runtime import open_runtime
from researchcrew.service._app import create_app
from researchcrew.service._streaming import KEEP_ALIVE, pump
from researchcrew.settings import JobsSettings
from tests.loopback.server import wait_until
from tests.service.support import QUESTION, live_server, service_settings
from tests.service.test_disconnect import SlowSource

DESTROYED = "Task was destroyed but it is pending"


def _destroyed_pending(caplog: pytest.LogCaptureFixture) -> list[str]:
    gc.collect()  # a task nobody references any more is reported when it is collected
    return [record.getMessage() for record in caplog.records if DESTROYED in record.getMessage()]


def _leftovers(before: set[asyncio.Task[Any]]) -> list[asyncio.Task[Any]]:
    return [task for task in asyncio.all_tasks() - before if task is not asyncio.current_task()]


# ---- the pump ---------------------------------------------------------------------------------------------------
async def _never_ending(events: asyncio.Queue[str]) -> str:
    events.put_nowait("first")
    await asyncio.Event().wait()
    return "never"


def _pump(task: asyncio.Task[str], events: asyncio.Queue[str], closed: list[str]) -> Any:
    async def on_close() -> None:
        closed.append("slot given back")

    return pump(
        task,
        events,
        keep_alive_s=30,
        render=lambda event: event.encode(),
        finish=lambda done: [done.result().encode()],
        on_close=on_close,
    )


async def test_a_pump_cancelled_while_it_waits_cancels_and_awaits_everything(caplog: pytest.LogCaptureFixture) -> None:
    for _ in range(5):
        before = asyncio.all_tasks()
        events: asyncio.Queue[str] = asyncio.Queue()
        task = asyncio.create_task(_never_ending(events))
        closed: list[str] = []
        stream = _pump(task, events, closed)

        async def consume(chunks: Any = stream) -> None:
            async for _chunk in chunks:
                pass

        consumer = asyncio.create_task(consume())
        await asyncio.sleep(0.05)  # the first event is sent; the pump now waits on the queue and the task
        consumer.cancel()  # what Starlette does when the client disconnects
        with pytest.raises(asyncio.CancelledError):
            await consumer
        assert task.cancelled()
        assert closed == ["slot given back"]
        assert _leftovers(before) == []  # in particular no queue read still pending
    assert _destroyed_pending(caplog) == []


async def test_a_pump_closed_between_events_or_after_its_result_leaves_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = asyncio.all_tasks()
    events: asyncio.Queue[str] = asyncio.Queue()
    task = asyncio.create_task(_never_ending(events))
    closed: list[str] = []
    stream = _pump(task, events, closed)
    assert await stream.__anext__() == b"first"
    await stream.aclose()  # closed at a yield: the generator's own close
    assert task.cancelled() and closed == ["slot given back"]
    assert _leftovers(before) == []

    quick: asyncio.Queue[str] = asyncio.Queue()

    async def answer() -> str:
        quick.put_nowait("working")
        await asyncio.sleep(0)
        return "answer"

    closed = []
    chunks = [chunk async for chunk in _pump(asyncio.create_task(answer()), quick, closed)]
    assert chunks == [b"working", b"answer"] and closed == ["slot given back"]
    assert KEEP_ALIVE not in chunks
    assert _leftovers(before) == []
    assert _destroyed_pending(caplog) == []


# ---- real disconnects -------------------------------------------------------------------------------------------
@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Any, SlowSource]]:
    source = SlowSource(delay_s=30.0)
    # Without the embedded job scheduler: its periodic sweep is a task of the server's own that comes and goes (on a
    # loaded machine it was still pending at every look for 30 s), and no stream starts it.
    settings = service_settings(tmp_path, auth=False).model_copy(
        update={"jobs": JobsSettings(embedded_scheduler=False)}
    )
    runtime = open_runtime(settings, tools=[source])
    with live_server(create_app(settings, runtime=runtime)) as live:
        yield live, source
    asyncio.run(runtime.aclose())


def _pending_in_server(live: Any) -> list[str]:
    async def names() -> list[str]:
        gc.collect()
        current = asyncio.current_task()
        return sorted(
            task.get_coro().__qualname__  # type: ignore[union-attr]
            for task in asyncio.all_tasks()
            if task is not current and not task.done()
        )

    return list(live.run_in_loop(names()))


def _beyond(pending: list[str], idle: list[str]) -> list[str]:
    """The pending tasks that are not among the idle server's own (counted, so a second copy counts)."""
    return sorted((Counter(pending) - Counter(idle)).elements())


@pytest.mark.parametrize("door", ["messages", "chat-completions"])
def test_disconnecting_from_a_stream_again_and_again_leaves_no_task_behind(
    server: tuple[Any, SlowSource], caplog: pytest.LogCaptureFixture, door: str
) -> None:
    live, source = server
    caplog.set_level(logging.INFO)
    session = httpx.post(f"{live.url}/v1/sessions", json={}).json()["session_id"]
    idle = _pending_in_server(live)  # uvicorn's own tasks, before any stream
    if door == "messages":
        url, body = f"{live.url}/v1/sessions/{session}/messages", {"question": QUESTION}
    else:
        url = f"{live.url}/v1/chat/completions"
        body = {"model": "researchcrew", "messages": [{"role": "user", "content": QUESTION}], "stream": True}
    for _ in range(4):
        source.started.clear()
        with (
            httpx.Client(timeout=10) as client,
            client.stream("POST", url, json=body, headers={"Accept": "text/event-stream"}) as response,
        ):
            assert response.status_code == 200
            for _line in response.iter_lines():
                if source.started.is_set():
                    break  # mid-stream: the question is searching, the pump waits for its next event
            assert source.started.wait(10)
        # the client is gone: the question is cancelled and nothing it started is still pending
        # (uvicorn's own tasks come and go with connections: only tasks beyond the idle ones count as left behind)
        assert wait_until(lambda: not _beyond(_pending_in_server(live), idle), timeout_s=30), _pending_in_server(live)
    assert not source.finished.is_set()
    assert _destroyed_pending(caplog) == []
    assert [r.getMessage() for r in caplog.records if "closed early" in r.getMessage()], "no stream was cut off"
