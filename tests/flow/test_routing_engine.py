"""pipeline/_routing.py runs a Flow with crewAI's routing rules: router chains, listeners of methods and labels,
or_-listeners that fire once per method completion but again for each router label (a loop), the last output."""

from __future__ import annotations

import pytest

from researchcrew.pipeline._routing import MAX_STEPS, Flow, listen, or_, router, start


class Loop(Flow):
    """guard → route → ("go" → work → decide → "again" → work ...) | ("stop" → finish); finish on or_."""

    def __init__(self, rounds: int, refuse: bool = False) -> None:
        self.rounds, self.refuse, self.trace = rounds, refuse, list[str]()

    @start()
    async def guard(self) -> None:
        self.trace.append("guard")

    @router(guard)
    async def route(self) -> str:
        self.trace.append("route")
        return "stop" if self.refuse else "go"

    @listen(or_("go", "again"))
    async def work(self) -> None:
        self.trace.append("work")

    @router(work)
    async def decide(self) -> str:
        self.rounds -= 1
        self.trace.append("decide")
        return "again" if self.rounds > 0 else "done"

    @router("done")
    async def gate(self) -> str:  # a router on a label: the chain continues
        self.trace.append("gate")
        return "write_it"

    @listen("write_it")
    async def write(self) -> str:
        self.trace.append("write")
        return "written"

    @listen(or_(write, "stop"))
    async def finish(self) -> str:
        self.trace.append("finish")
        return f"finished after {self.trace.count('work')} rounds"


async def test_routers_chain_and_an_or_listener_loops_on_router_labels() -> None:
    flow = Loop(rounds=3)
    assert await flow.kickoff() == "finished after 3 rounds"
    assert flow.trace == [
        "guard", "route", "work", "decide", "work", "decide", "work", "decide", "gate", "write", "finish",
    ]  # fmt: skip


async def test_a_router_label_can_skip_to_the_end() -> None:
    flow = Loop(rounds=3, refuse=True)
    assert await flow.kickoff() == "finished after 0 rounds"
    assert flow.trace == ["guard", "route", "finish"]


class Twice(Flow):
    """An or_-listener on two methods that both finish fires once (crewAI's rule for method completions)."""

    def __init__(self) -> None:
        self.calls = 0

    @start()
    async def a(self) -> None: ...

    @listen(a)
    async def b(self) -> None: ...

    @listen(a)
    async def c(self) -> None: ...

    @listen(or_(b, c))
    async def joined(self) -> int:
        self.calls += 1
        return self.calls


async def test_an_or_listener_fires_once_for_method_completions() -> None:
    flow = Twice()
    assert await flow.kickoff() == 1
    assert flow.calls == 1


class Forever(Flow):
    @start()
    async def begin(self) -> None: ...

    @router(or_(begin, "again"))
    async def spin(self) -> str:
        return "again"


async def test_a_routing_loop_without_an_exit_is_an_error_not_a_hang() -> None:
    with pytest.raises(RuntimeError, match=f"more than {MAX_STEPS} steps"):
        await Forever().kickoff()


def test_steps_must_be_async_and_triggers_methods_labels_or_or() -> None:
    def plain(self: object) -> None: ...

    with pytest.raises(TypeError, match="must be an async method"):
        listen("x")(plain)  # type: ignore[type-var]
    with pytest.raises(TypeError, match="a flow trigger is"):
        or_(3)  # type: ignore[arg-type]
