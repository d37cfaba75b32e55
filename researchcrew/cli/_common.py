"""What every subcommand shares: building settings at the edge, running on the runtime, one-line errors, JSON."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from researchcrew.client import Route, ServiceClient
    from researchcrew.runtime import Runtime
    from researchcrew.settings import Settings

T = TypeVar("T")


CONFIGURATION_EXIT_CODE = 2


class ConfigurationProblem(click.ClickException):
    """A setting is wrong: one line naming it, what is wrong and a valid example; exit code 2."""

    exit_code = CONFIGURATION_EXIT_CODE


def setting_name(location: tuple[Any, ...]) -> str:
    """The environment variable of a settings field: ("memory", "database_url") → RESEARCHCREW_MEMORY__DATABASE_URL."""
    parts = [str(part) for part in location if not isinstance(part, int)]
    return "RESEARCHCREW_" + "__".join(part.upper() for part in parts) if parts else "the settings"


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment; a bad value ends the command with one clear line (exit code 2), not a
    traceback."""
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from researchcrew.redaction import redact, remember_settings_secrets
    from researchcrew.settings import Settings

    try:
        settings = Settings(**{key: value for key, value in overrides.items() if value is not None})
        remember_settings_secrets(settings)  # masked in every message and log line from now on
    except ValidationError as error:
        problems = "; ".join(
            f"{setting_name(e['loc'])}: {e['msg'].removeprefix('Value error, ')}" for e in error.errors()
        )
        raise ConfigurationProblem(redact(f"invalid setting {problems}")) from error
    except SettingsError as error:  # a value the settings source could not even parse (e.g. malformed JSON)
        raise ConfigurationProblem(redact(f"invalid setting: {error}; see `researchcrew --help`")) from error
    if settings.extra_sources or settings.extra_source_options:  # a missing key stops every command at start
        from researchcrew.errors import ConfigurationError
        from researchcrew.tools.extra_sources import check_extra_sources

        try:
            check_extra_sources(settings)
        except ConfigurationError as error:
            raise ConfigurationProblem(redact(str(error))) from error
    return settings


def with_runtime(
    action: Callable[[Runtime], Awaitable[T]], settings: Settings | None = None, *, hint: str = "", **options: Any
) -> T:
    """Open the process's runtime, run ``action`` on it, close it. Only what ``action`` asks the runtime for is
    opened (``kb stats`` never starts the memory store or imports crewAI). An error researchcrew raises on purpose
    ends the command in one line (plus ``hint``), not a traceback."""
    settings = settings or load_settings()
    from researchcrew.errors import ConfigurationError, ResearchCrewError
    from researchcrew.redaction import redact
    from researchcrew.runtime import open_runtime

    async def run() -> T:
        async with open_runtime(settings, **options) as runtime:
            return await action(runtime)

    try:
        return asyncio.run(run())
    except ConfigurationError as error:
        raise ConfigurationProblem(redact(f"{error}{hint}")) from error
    except ResearchCrewError as error:
        raise click.ClickException(redact(f"{error}{hint}")) from error


def local_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--local``: run in this process even when a service of the data folder is running (the commands that need
    the stores use it otherwise: ``researchcrew.client._discovery``)."""
    return click.option(
        "--local",
        "local",
        is_flag=True,
        envvar="RESEARCHCREW_LOCAL",
        help="Run in this process, not through the running service of the data folder (RESEARCHCREW_LOCAL=1).",
    )(command)


def route_for(settings: Settings, *, local: bool, user_id: str | None = None) -> Route:
    """Whether this command goes through the data folder's running service, and why (``researchcrew status``)."""
    from researchcrew.client import find_service

    return find_service(settings.data_dir, settings.service_socket_path, local=local, user_id=user_id)


def with_service(route: Route, action: Callable[[ServiceClient], Awaitable[T]], *, user_id: str | None = None) -> T:
    """Run ``action`` on a client of the service ``route`` found. What the service refuses ends the command in one
    line (its problem's detail), as the same failure does in process."""
    from researchcrew.client import ServiceClient
    from researchcrew.errors import ServiceError
    from researchcrew.redaction import redact

    if route.url is None:
        raise ValueError("route_for() found no service")
    url = route.url

    async def run() -> T:
        async with ServiceClient(url, user_id=user_id) as client:
            return await action(client)

    try:
        return asyncio.run(run())
    except ServiceError as error:
        raise click.ClickException(redact(error.detail)) from error


def read_question(
    argument: str | None,
    *,
    missing: str = 'give a QUESTION, or pipe one in (`echo "..." | researchcrew ask`, or `ask -`)',
) -> str:
    """The question given on the command line; ``-`` (or no argument when stdin is not a terminal, as in
    ``echo "..." | researchcrew ask``) reads it from stdin. No question at all is the usage error ``missing``."""
    if argument is not None and argument != "-":
        return argument
    text = "" if argument is None and sys.stdin.isatty() else " ".join(sys.stdin.read().split())
    if not text:
        raise click.UsageError(missing if argument is None else "the question read from stdin is empty")
    return text


def question_is_piped(argument: str | None) -> bool:
    """Whether the question comes from stdin: ``-``, or no argument while stdin is not a terminal."""
    return argument == "-" or (argument is None and not sys.stdin.isatty())


def echo_json(payload: Any) -> None:
    """Print one JSON document to stdout (for `--json`)."""
    click.echo(json.dumps(payload, indent=2, default=str, ensure_ascii=False))
