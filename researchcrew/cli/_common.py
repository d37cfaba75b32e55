"""What every subcommand shares: building settings at the edge, running on the runtime, one-line errors, JSON."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from researchcrew.runtime import Runtime
    from researchcrew.settings import Settings

T = TypeVar("T")


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment; a bad value ends the command with one clear line, not a traceback."""
    from pydantic import ValidationError

    from researchcrew.settings import Settings

    try:
        return Settings(**{key: value for key, value in overrides.items() if value is not None})
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise click.ClickException(f"invalid settings: {problems}") from error


def with_runtime(
    action: Callable[[Runtime], Awaitable[T]], settings: Settings | None = None, *, hint: str = "", **options: Any
) -> T:
    """Open the process's runtime, run ``action`` on it, close it. Only what ``action`` asks the runtime for is
    opened (``kb stats`` never starts the memory store or imports crewAI). An error researchcrew raises on purpose
    ends the command in one line (plus ``hint``), not a traceback."""
    settings = settings or load_settings()
    from researchcrew.errors import ResearchCrewError
    from researchcrew.runtime import open_runtime

    async def run() -> T:
        async with open_runtime(settings, **options) as runtime:
            return await action(runtime)

    try:
        return asyncio.run(run())
    except ResearchCrewError as error:
        raise click.ClickException(f"{error}{hint}") from error


def echo_json(payload: Any) -> None:
    """Print one JSON document to stdout (for `--json`)."""
    click.echo(json.dumps(payload, indent=2, default=str, ensure_ascii=False))
