"""Running the service: uvicorn with one runtime per process (``researchcrew serve``).

One worker runs the app in this process. Several (``--workers N``) are uvicorn's worker processes, each building
the app from the environment (``app_from_environment``), so every setting reaches them through the same
``RESEARCHCREW_*`` variables; the command's own flags are handed over the same way. SIGTERM (or Ctrl-C) stops
accepting connections, lets running requests finish within ``service.shutdown_grace_s``, then closes each
runtime, which writes every pending memory record before it releases the stores.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from researchcrew.errors import ConfigurationError, ResearchCrewError
from researchcrew.settings import Settings

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

FACTORY = "researchcrew.service.server:app_from_environment"


class BriefStartupFailure:
    """The app, with a start-up failure researchcrew raised on purpose (a store that cannot be reached, a setting
    that cannot work) reported by uvicorn in one line instead of the traceback Starlette sends with
    ``lifespan.startup.failed``. `serve` checks the memory database before uvicorn starts; this covers what can
    still fail in the lifespan (each ``--workers`` process, a database gone in between)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def send_brief(message: Message) -> None:
            # Starlette sends the failure from inside its ``except`` block: the error is the one being handled.
            error = sys.exc_info()[1]
            if message["type"] == "lifespan.startup.failed" and isinstance(error, ResearchCrewError):
                from researchcrew.redaction import redact

                message = {**message, "message": redact(f"researchcrew cannot start: {error}")}
            await send(message)

        await self.app(scope, receive, send_brief)


def app_from_environment() -> Any:
    """The app of each ``serve --workers`` process (``uvicorn --factory``): settings from the environment."""
    from researchcrew.service._app import app_from_environment as build

    return BriefStartupFailure(build())


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable only from this machine (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_deployment(settings: Settings) -> None:
    """Refuse set-ups that would be unsafe or cannot work, with what to do instead."""
    service = settings.service
    if not service.auth and not is_loopback(service.host):
        raise ConfigurationError(
            f"--no-auth is refused on {service.host}: without keys anyone who reaches the port acts as the local "
            "user. Bind a loopback address (--host 127.0.0.1) or create keys with `researchcrew users add NAME`."
        )
    if service.workers > 1 and "rag" in settings.enabled_sources and settings.milvus.uri is None:
        raise ConfigurationError(
            "a Milvus Lite file serves one process, so --workers > 1 needs a Milvus server "
            "(RESEARCHCREW_MILVUS__URI=http://host:19530) or `rag` left out of RESEARCHCREW_ENABLED_SOURCES"
        )
    if service.workers > 1 and settings.memory.database_url is None:
        logger.warning("%d workers share one SQLite memory file: writes queue up; PostgreSQL scales", service.workers)


def run(settings: Settings, *, log_level: str = "info") -> None:
    """Serve until SIGTERM or Ctrl-C."""
    import uvicorn

    check_deployment(settings)
    service = settings.service
    common = {
        "host": service.host,
        "port": service.port,
        "timeout_graceful_shutdown": int(service.shutdown_grace_s) if service.shutdown_grace_s else None,
        "log_level": log_level,
        "proxy_headers": False,
        "server_header": False,
    }
    if service.workers == 1:
        from researchcrew.service._app import create_app

        app = BriefStartupFailure(create_app(settings))
        if not service.local_socket:
            uvicorn.run(app, **common)  # type: ignore[arg-type]
            return
        _serve_with_local_socket(uvicorn.Config(app, **common), settings)  # type: ignore[arg-type]
        return
    # Worker processes read their settings from the environment: hand this command's choices over that way.
    os.environ["RESEARCHCREW_SERVICE__AUTH"] = "true" if service.auth else "false"
    os.environ["RESEARCHCREW_DATA_DIR"] = str(settings.data_dir)
    # uvicorn's worker processes share one listening socket each: no local socket; commands run in process (they can,
    # since several workers need a Milvus server and PostgreSQL anyway).
    uvicorn.run(FACTORY, factory=True, workers=service.workers, **common)  # type: ignore[arg-type]


def _serve_with_local_socket(config: Any, settings: Settings) -> None:
    """One app on the TCP port and on the data folder's Unix socket (``researchcrew.service._local_socket``)."""
    import uvicorn

    from researchcrew.service._local_socket import bind_local_socket, remove_local_socket

    path = settings.service_socket_path
    settings.ensure_data_dir()
    local = bind_local_socket(path)

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            try:
                await super().shutdown(sockets)
            finally:  # here, not after run(): uvicorn re-raises SIGTERM once serve() returns, ending the process
                remove_local_socket(local, path)

    server = Server(config)
    tcp = config.bind_socket()
    if local is not None:
        logger.info("researchcrew commands of this data folder use the service through %s", path)
    try:
        server.run(sockets=[tcp] if local is None else [tcp, local])
    except KeyboardInterrupt:  # as uvicorn.run: Ctrl-C ends the service quietly
        pass
    finally:
        remove_local_socket(local, path)
    if not server.started:
        sys.exit(3)  # uvicorn's STARTUP_FAILURE, as uvicorn.run ends
