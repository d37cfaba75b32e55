"""`researchcrew status`: where the commands of this data folder run (through the running service, or each in its
own process, and why: ``researchcrew.client._discovery``), and each source's health — healthy, or backing off after a
recent failure (until when, the last failure's kind and message, credentials masked).

Health lives in the process that asks questions, and in Redis when ``redis.url`` is set (shared by every process).
So this command reads Redis when there is one; ``--url`` asks a running service (its ``/readyz``) instead; without
either, a fresh process has seen no failure and says so.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from researchcrew.cli._common import echo_json, load_settings, local_option, route_for

if TYPE_CHECKING:
    from researchcrew.settings import Settings
    from researchcrew.tools.health import SourceState

# The built-in tools' names by source type (tests pin them to the tool classes; importing those here would load
# the arXiv and Firecrawl SDKs for a status line).
BUILTIN_TOOL_NAMES: dict[str, str] = {
    "rag": "rag_search",
    "web": "web_search",
    "arxiv": "academic_search",
    "memory": "memory_recall",
}
_TIMEOUT_S = 5.0


@click.command()
@click.option(
    "--url",
    envvar="RESEARCHCREW_SERVICE_URL",
    metavar="URL",
    help="Ask a running service (e.g. http://127.0.0.1:8000) for its sources' health instead.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the sources' health as JSON.")
@local_option
def status(url: str | None, as_json: bool, local: bool) -> None:
    """Where commands run (the local service, or in process, and why); each source's health."""
    settings = load_settings()
    route = route_for(settings, local=local)
    if url:
        states, where = _from_service(url), f"the service at {url}"
    elif route.url is not None:
        socket_url = route.url
        states, where = _from_service(socket_url), f"the service at {settings.service_socket_path}"
    else:
        states, where = asyncio.run(_from_settings(settings))
    if as_json:
        commands = {"mode": route.mode, "reason": route.reason}
        echo_json({"commands": commands, "from": where, "sources": [state.model_dump(mode="json") for state in states]})
        return
    mode = "through the service" if route.mode == "service" else "in process"
    click.echo(f"Commands that use the stores (ask, jobs run, ingest, kb, memory) run {mode}: {route.reason}")
    click.echo(render(states, where))


def render(states: list[SourceState], where: str, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    lines = [f"Source health ({where}):"]
    for state in states:
        lines.append(f"  {state.source_type or '?':<8} {state.name:<18} {state.describe(now)}")
    if not states:
        lines.append("  no sources are enabled")
    return "\n".join(lines)


async def _from_settings(settings: Settings) -> tuple[list[SourceState], str]:
    from researchcrew.tools.health import SourceHealth

    names = [BUILTIN_TOOL_NAMES[source] for source in settings.enabled_sources if source in BUILTIN_TOOL_NAMES]
    kinds = {name: source for source, name in BUILTIN_TOOL_NAMES.items()}
    client: Any = None
    if settings.redis.url is not None:
        import redis.asyncio

        timeout = settings.redis.timeout_s
        client = redis.asyncio.Redis.from_url(
            settings.redis.url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        where = "shared through Redis"
    else:
        where = (
            "this process only: no redis.url is set, so no failure of another process is known; --url asks a service"
        )
    try:
        health = SourceHealth(settings.health, client=client, key_prefix=settings.redis.key_prefix)
        states = await health.states(names)
    finally:
        if client is not None:
            await client.aclose()
    return [state.model_copy(update={"source_type": kinds.get(state.name)}) for state in states], where


def _from_service(url: str) -> list[SourceState]:
    import httpx

    from researchcrew.redaction import redact
    from researchcrew.tools.health import SourceState

    if url.startswith("unix://"):
        transport = httpx.HTTPTransport(uds=url.removeprefix("unix://"))
        base, address = "http://researchcrew.local", "/readyz"
    else:
        transport, base, address = None, "", url.rstrip("/") + "/readyz"
    try:
        with httpx.Client(transport=transport, base_url=base, timeout=_TIMEOUT_S) as client:
            response = client.get(address)
    except httpx.HTTPError as error:
        raise click.ClickException(redact(f"cannot reach the service at {url}: {error}")) from error
    try:
        payload = response.json()
        return [SourceState.model_validate(item) for item in payload.get("source_health", [])]
    except ValueError as error:  # not JSON, or not the shape /readyz answers
        raise click.ClickException(
            redact(f"{address} did not answer with the sources' health (HTTP {response.status_code})")
        ) from error
