"""A live service (uvicorn in a thread) on each memory-store backend, with one user's key: the whole-app sweeps
(schema fuzzing, hostile inputs) run once per backend on one app each."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from researchcrew.runtime import Runtime
from researchcrew.service._app import create_app
from researchcrew.service.accounts import Accounts
from researchcrew.settings import DocumentsSettings, MemorySettings, ServiceSettings, Settings
from tests.helpers.services import fresh_postgres_database
from tests.service.support import LiveServer, default_tools, live_server

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@dataclass
class LiveService:
    backend: str
    server: LiveServer
    auth: dict[str, str]
    settings: Settings


@contextmanager
def live_service(data_dir: Path, backend: str, *, prefix: str = "rc_sweep") -> Iterator[LiveService]:
    """The app over ``backend`` ("sqlite": a file in ``data_dir``; "postgresql": a fresh database, dropped after),
    served by uvicorn with generous rate limits, and a key for the user "sweeper"."""
    with ExitStack() as stack:
        url = stack.enter_context(fresh_postgres_database(prefix)) if backend == "postgresql" else None
        settings = Settings(
            data_dir=data_dir,
            service=ServiceSettings(rate_limit="100000/minute", max_concurrent_questions=100),
            memory=MemorySettings(database_url=url),
            documents=DocumentsSettings(max_file_bytes=64 * 1024),  # a megabyte upload is refused, not ingested
        )
        app = create_app(settings, tools=default_tools())  # its runtime opens and closes on the server's loop
        server = stack.enter_context(live_server(app))
        key = server.run_in_loop(_issue_key(app.state.service.runtime))
        yield LiveService(backend, server, {"Authorization": f"Bearer {key}"}, settings)


async def _issue_key(runtime: Runtime) -> str:
    return (await Accounts(await runtime.memory_store()).add_user("sweeper")).key
