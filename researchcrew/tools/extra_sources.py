"""Sources from crewai-tools, configured by name: ``RESEARCHCREW_EXTRA_SOURCES=tavily,serper``.

Each name maps to one crewai-tools class, the environment variables it reads itself (its API key: researchcrew
never asks for the key twice), the Python package it needs beyond crewai-tools, and how its output is read.
``build_extra_sources(settings)`` checks them all before anything is built and fails in one line naming the
variable (``ConfigurationError``: the CLI, the service and the workers stop at start with that line), then wraps
each tool with ``from_crewai``; ``pipeline/assemble.default_tools`` appends them after the built-in sources, so they
reach every door (SDK, CLI, chat, jobs, deep research), ``/readyz`` and source health like Firecrawl does.

``settings.extra_source_options`` passes constructor options per name (``{"serper": {"n_results": 10}}``, a
self-hosted endpoint's ``base_url``); an option the tool does not take is a start-up error too.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from researchcrew.errors import ConfigurationError
from researchcrew.settings import environment_variable
from researchcrew.tools._crewai_source import CrewAISource, from_crewai

if TYPE_CHECKING:
    from researchcrew.settings import Settings

SETTING = "RESEARCHCREW_EXTRA_SOURCES"


@dataclass(frozen=True)
class ExtraSource:
    """One crewai-tools class researchcrew knows how to use as a source."""

    class_name: str  # in the crewai_tools package
    keys: tuple[str, ...]  # environment variables the tool reads, all required
    package: str | None = None  # import name of a package the tool needs beyond crewai-tools
    pip_name: str | None = None  # and what to pip install for it
    parser: str = "search_results"


EXTRA_SOURCES: dict[str, ExtraSource] = {
    "tavily": ExtraSource("TavilySearchTool", ("TAVILY_API_KEY",), package="tavily", pip_name="tavily-python"),
    "serper": ExtraSource("SerperDevTool", ("SERPER_API_KEY",)),
    "brave": ExtraSource("BraveSearchTool", ("BRAVE_API_KEY",)),
    "exa": ExtraSource("EXASearchTool", ("EXA_API_KEY",), package="exa_py", pip_name="exa-py"),
    "serpapi": ExtraSource(
        "SerpApiGoogleSearchTool", ("SERPAPI_API_KEY",), package="serpapi", pip_name="google-search-results"
    ),
    "linkup": ExtraSource("LinkupSearchTool", ("LINKUP_API_KEY",), package="linkup", pip_name="linkup-sdk"),
}


def check_extra_sources(settings: Settings) -> None:
    """Every configured extra source is known, installed and has its keys; else one line naming what to set."""
    known = ", ".join(sorted(EXTRA_SOURCES))
    for name in settings.extra_sources:
        spec = EXTRA_SOURCES.get(name)
        if spec is None:
            raise ConfigurationError(f"{SETTING} names an unknown source {name!r}; choose from {known}")
        missing = [key for key in spec.keys if not environment_variable(key)]
        if missing:
            raise ConfigurationError(
                f"{SETTING} includes {name}, which needs {' and '.join(missing)}; set it, or remove {name}"
            )
        if spec.package is not None and importlib.util.find_spec(spec.package) is None:
            raise ConfigurationError(
                f"{SETTING} includes {name}, which needs the package {spec.pip_name}: pip install {spec.pip_name}"
            )
    unknown_options = set(settings.extra_source_options) - set(settings.extra_sources)
    if unknown_options:
        raise ConfigurationError(
            f"RESEARCHCREW_EXTRA_SOURCE_OPTIONS has options for {', '.join(sorted(unknown_options))}, which "
            f"{SETTING} does not name"
        )


def build_extra_sources(settings: Settings) -> list[CrewAISource]:
    """The configured extra sources as researchcrew tools (checked first; see ``check_extra_sources``)."""
    check_extra_sources(settings)
    if not settings.extra_sources:
        return []
    crewai_tools = importlib.import_module("crewai_tools")  # only now: it imports crewAI (seconds)
    sources = []
    for name in settings.extra_sources:
        spec = EXTRA_SOURCES[name]
        options: dict[str, Any] = dict(settings.extra_source_options.get(name, {}))
        tool_class = getattr(crewai_tools, spec.class_name)
        unknown = sorted(set(options) - set(getattr(tool_class, "model_fields", {})))
        if unknown:
            raise ConfigurationError(
                f"RESEARCHCREW_EXTRA_SOURCE_OPTIONS for {name}: {spec.class_name} has no option {', '.join(unknown)}"
            )
        try:
            tool = tool_class(**options)
        except (ValueError, TypeError, ImportError) as error:  # pydantic's ValidationError is a ValueError
            raise ConfigurationError(f"{SETTING}: {name} could not be set up: {error}") from error
        sources.append(from_crewai(tool, source_type=name, name=f"{name}_search", parser=spec.parser))
    return sources


__all__ = ["EXTRA_SOURCES", "ExtraSource", "build_extra_sources", "check_extra_sources"]
