"""`researchcrew serve`: the HTTP service (sessions per user, streaming answers). See researchcrew.service."""

from __future__ import annotations

import click

from researchcrew.cli._common import load_settings


@click.command()
@click.option("--host", default=None, help="Address to bind (default 127.0.0.1; RESEARCHCREW_SERVICE__HOST).")
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port (default 8000).")
@click.option("--workers", type=click.IntRange(1, 64), default=None, help="Server processes (default 1).")
@click.option(
    "--no-auth",
    is_flag=True,
    help="No API keys: every request runs as one local user. Refused unless --host is a loopback address.",
)
def serve(host: str | None, port: int | None, workers: int | None, no_auth: bool) -> None:
    """Run the HTTP service: per-user sessions, answers as JSON or server-sent events."""
    from researchcrew.cli._startup import memory_database, require
    from researchcrew.errors import ConfigurationError
    from researchcrew.service.server import check_deployment, run

    settings = load_settings()
    chosen = {"host": host, "port": port, "workers": workers, "auth": False if no_auth else None}
    service = settings.service.model_copy(update={key: value for key, value in chosen.items() if value is not None})
    settings = settings.model_copy(update={"service": service})
    try:
        check_deployment(settings)
        # The database first, in this process: unreachable, it is one line here rather than uvicorn's lifespan
        # traceback (in every worker process). The same store is then opened by the app's lifespan.
        require([memory_database(settings)])
        run(settings)
    except ConfigurationError as error:
        raise click.ClickException(str(error)) from error
