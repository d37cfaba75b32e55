"""A small async flow runner with crewAI's routing rules, for the quick pipeline (``pipeline.flow.ResearchFlow``).

The quick pipeline's Flow only routes: each stage's work lives in ``ResearchStages``. crewAI's ``Flow`` did that
routing until issue 19, and it costs what an extractive answer does not need: importing crewAI (≈ 3–6 s in a fresh
process, with chromadb, pandas and fastapi behind it) and ≈ 20 ms of event-bus, tracing and state bookkeeping per
question (``benchmarks/README.md``, "The quick path without crewAI's Flow"). This runner keeps the same authoring
style — ``@start()``, ``@listen(...)``, ``@router(...)``, ``or_(...)`` on async methods — and the same execution
order as crewAI 1.15's ``Flow`` for graphs of this shape:

* the start methods run first, in definition order;
* when a method finishes, the routers listening to it run one after another, each router's label triggering the
  routers that listen to that label (a chain); then the plain listeners of the method and of every label run,
  together (``asyncio.gather``), and each finished listener triggers its own listeners in turn;
* a listener on ``or_(a, b)`` runs when either happens, again each time a *router label* it listens to comes back
  (a loop such as ``reformulate → "retry" → retrieve``), but only once for method completions — crewAI's rule;
* the run's result is what the last method to finish returned.

``and_`` conditions, human feedback, persistence and crewAI's events are not supported: the deep-research Flow,
which needs them, stays a crewAI Flow (``researchcrew.deep._flow``).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

Kind = Literal["start", "listen", "router"]
_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])
# A ceiling on method runs in one kickoff: a routing loop without an exit is a bug, and this makes it an error.
MAX_STEPS = 200


@dataclass(frozen=True)
class Or:
    """Any of these triggers (method names or router labels)."""

    triggers: tuple[str, ...]


Trigger = str | Callable[..., Any] | Or


def or_(*triggers: Trigger) -> Or:
    """A condition met by any of ``triggers``: methods (by reference or name) or router labels."""
    if not triggers:
        raise ValueError("or_() needs at least one trigger")
    return Or(tuple(name for trigger in triggers for name in _names(trigger)))


@dataclass(frozen=True)
class Step:
    """One decorated method: its name, kind, and what triggers it (empty for a start method)."""

    name: str
    kind: Kind
    triggers: tuple[str, ...]
    any_of: bool  # declared with or_(): fires once per method completion (routers' labels re-arm it)


def _names(trigger: Trigger) -> tuple[str, ...]:
    if isinstance(trigger, Or):
        return trigger.triggers
    if isinstance(trigger, str):
        return (trigger,)
    if callable(trigger):
        return (trigger.__name__,)
    raise TypeError(f"a flow trigger is a method, a label or or_(...), not {type(trigger).__name__}")


def _mark(kind: Kind, condition: Trigger | None) -> Callable[[_F], _F]:
    def decorate(method: _F) -> _F:
        target: object = method  # checked as an object: the type guard would narrow ``_F`` away
        if not inspect.iscoroutinefunction(target):
            raise TypeError(f"flow step {method.__name__} must be an async method")
        triggers = () if condition is None else _names(condition)
        method.__flow_step__ = Step(method.__name__, kind, triggers, isinstance(condition, Or))  # type: ignore[attr-defined]
        return method

    return decorate


def start() -> Callable[[_F], _F]:
    """The method the run begins with."""
    return _mark("start", None)


def listen(condition: Trigger) -> Callable[[_F], _F]:
    """Run after ``condition`` (a method, a router label, or ``or_(...)``)."""
    return _mark("listen", condition)


def router(condition: Trigger) -> Callable[[_F], _F]:
    """Run after ``condition``; the label (a string) the method returns triggers what listens to it."""
    return _mark("router", condition)


class Flow:
    """Base class: subclasses declare async steps with the decorators above and call ``await self.kickoff()``."""

    _steps: ClassVar[tuple[Step, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        steps: dict[str, Step] = {}
        for klass in reversed(cls.__mro__):  # definition order; a subclass's override replaces the step
            for value in vars(klass).values():
                step = getattr(value, "__flow_step__", None)
                if isinstance(step, Step):
                    steps[step.name] = step
        for step in steps.values():
            if step.kind == "start" and step.triggers:
                raise TypeError(f"start step {step.name} cannot have a trigger")
        cls._steps = tuple(steps.values())

    async def kickoff(self) -> Any:
        """Run the flow from its start methods; returns what the last method to finish returned."""
        run = _Run(self, self._steps)
        for step in self._steps:
            if step.kind == "start":
                await run.execute(step)
        return run.last_output


class _Run:
    """One kickoff's bookkeeping: which or_-listeners fired, how many steps ran, the last output."""

    def __init__(self, flow: Flow, steps: tuple[Step, ...]) -> None:
        self._flow = flow
        self._steps = steps
        self._fired: set[str] = set()
        self._count = 0
        self.last_output: Any = None

    async def _call(self, step: Step) -> Any:
        self._count += 1
        if self._count > MAX_STEPS:
            raise RuntimeError(f"flow ran more than {MAX_STEPS} steps: its routing loops without an exit")
        result = await getattr(self._flow, step.name)()
        self.last_output = result
        return result

    async def execute(self, step: Step) -> None:
        await self._call(step)
        await self._after(step.name)

    async def _after(self, finished: str) -> None:
        triggers = [finished]
        current = finished
        while routers := [s for s in self._steps if s.kind == "router" and current in s.triggers]:
            label = None
            for step in routers:  # one after another; each label is a new trigger
                result = await self._call(step)
                if result is not None:
                    label = str(result)
                    triggers.append(label)
            if label is None:
                break
            current = label  # routers listening to the label run next (a chain)
        for index, trigger in enumerate(triggers):
            if index > 0:  # a router's label re-arms the or_-listeners that listen to it (a loop)
                self._fired -= {s.name for s in self._steps if trigger in s.triggers}
            listeners = [s for s in self._steps if s.kind == "listen" and trigger in s.triggers and self._arm(s)]
            if listeners:
                await asyncio.gather(*(self.execute(step) for step in listeners))

    def _arm(self, step: Step) -> bool:
        """Whether ``step`` may fire now (an or_-listener fires once until a router label re-arms it)."""
        if not step.any_of or len(step.triggers) < 2:
            return True
        if step.name in self._fired:
            return False
        self._fired.add(step.name)
        return True


__all__ = ["MAX_STEPS", "Flow", "Step", "listen", "or_", "router", "start"]
