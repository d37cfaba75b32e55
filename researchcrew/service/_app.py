"""The FastAPI app: ``create_app(settings)`` builds it; routers are added per resource.

One runtime per process, opened in the lifespan and warmed there (crewAI, the embedding model, Milvus and the
memory store are paid at start-up, not by the first user), kept in ``app.state.service`` with the accounts, the
sessions and the limits that stand on it. Routers of later features (OpenAI-compatible routes, the web page) are
added with ``app.include_router``; they get the process state with the ``Service`` dependency, the user with
``CurrentUser``, and raise ``ApiProblem`` for every failure (``researchcrew.service._problems``).

On shutdown (SIGTERM: uvicorn stops accepting and lets running requests finish within ``service.shutdown_grace_s``)
the lifespan waits for answers still running within the same grace, then closes the runtime, which gives every
pending memory write the same grace again before it releases the stores (an answer that went out is remembered).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI
from starlette.routing import Route

from researchcrew.knowledge.collections_store import CollectionsStore
from researchcrew.knowledge.document_store import DocumentStore
from researchcrew.knowledge.library import Library
from researchcrew.redaction import install_log_redaction, remember_settings_secrets
from researchcrew.runtime import Runtime, open_runtime
from researchcrew.service._batch import ServiceBatch
from researchcrew.service._body_limit import BodyLimit
from researchcrew.service._input_checks import check_request_input
from researchcrew.service._mcp_http import MCP_PATH, McpEndpoint
from researchcrew.service._problems import install_problem_handlers
from researchcrew.service._state import ServiceState
from researchcrew.service._throttle import Throttle
from researchcrew.service.accounts import Accounts
from researchcrew.service.chat_sessions import ChatSessions
from researchcrew.settings import Settings

logger = logging.getLogger(__name__)

API_VERSION = "1"
_FORM_OVERHEAD_BYTES = 64 * 1024  # a document upload's body: the file and its multipart headers and fields
_MIN_MEMORY_FLUSH_S = 10.0  # with no shutdown grace configured, memory writes still get the runtime's default


def create_app(settings: Settings | None = None, *, runtime: Runtime | None = None, **runtime_options: Any) -> FastAPI:
    """The service's app. ``runtime``: a runtime to stand on (tests, embedding apps; it is not closed by the app);
    else one is opened from ``settings`` with ``runtime_options`` (``tools=``, ``llm=``, ... as ``open_runtime``)."""
    settings = settings or Settings()
    install_log_redaction()  # every log record of the process: no password, token or key in a log line
    remember_settings_secrets(settings)  # the configured keys and URL passwords, masked wherever they appear

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = runtime is None
        active = runtime if runtime is not None else open_runtime(settings, **runtime_options)
        throttle = Throttle(settings.service, settings.redis)
        batch = ServiceBatch(active, settings)  # Jobs, and the embedded scheduler unless a separate one runs
        library: Library | None = None
        try:
            await active.stages()  # crewAI, the model, Milvus and the memory store, paid now
            store = await active.memory_store()
            await batch.start()
            library = Library(
                settings, DocumentStore(store.engine), active.knowledge_base, access=CollectionsStore(store.engine)
            )
            await library.start()
            app.state.service = ServiceState(
                settings=settings,
                runtime=active,
                accounts=Accounts(store),
                sessions=ChatSessions(store),
                throttle=throttle,
                jobs=batch.jobs,
                library=library,
            )
            logger.info("researchcrew service ready (auth %s)", "on" if settings.service.auth else "off")
            async with mcp_endpoint.running(
                app.state.service
            ):  # the MCP session manager runs inside the app's lifespan
                yield
        finally:
            state = getattr(app.state, "service", None)
            app.state.service = None
            grace_s = settings.service.shutdown_grace_s
            try:
                if isinstance(state, ServiceState):
                    await _finish_running(state.questions, grace_s)
                if library is not None:
                    await library.stop()  # an ingestion under way stops at its next batch; queued again on start
                await batch.stop()  # the scheduler and the background runs, before the runtime closes
                await throttle.aclose()
            finally:  # even when a step above failed: the memory writes of finished answers are not dropped
                if owned:
                    # Pending memory writes first (each answer that finished is remembered: they get the same
                    # grace as running answers), then the stores.
                    await active.aclose(memory_flush_s=max(grace_s, _MIN_MEMORY_FLUSH_S))

    app = FastAPI(
        title="researchcrew",
        version=API_VERSION,
        summary="Research answers in which every claim cites its source: sessions per user, streaming progress.",
        lifespan=lifespan,
        # FastAPI's /docs and /redoc pages load their scripts from a CDN; the service sends nothing to third
        # parties. The schema itself is at /openapi.json.
        docs_url=None,
        redoc_url=None,
        # Every route: no parameter a store cannot keep, no JSON body nested too deeply (service/_input_checks.py).
        dependencies=[Depends(check_request_input)],
    )
    install_problem_handlers(app)
    upload_limit = settings.documents.max_file_bytes + _FORM_OVERHEAD_BYTES
    app.add_middleware(BodyLimit, max_bytes=settings.service.max_body_bytes, routes={"/v1/documents": upload_limit})
    from researchcrew.service import _web as web
    from researchcrew.service import openai_compat
    from researchcrew.service.routes import _deep_runs as deep_runs
    from researchcrew.service.routes import _direct as direct
    from researchcrew.service.routes import _health as health
    from researchcrew.service.routes import _messages as messages
    from researchcrew.service.routes import _sessions as sessions
    from researchcrew.service.routes import _tables as tables
    from researchcrew.service.routes import _usage as usage

    for router in (
        health.router,
        sessions.router,
        tables.router,  # structured answers' tables: pages and CSV (issue 22)
        messages.router,
        openai_compat.router,
        deep_runs.router,
        direct.router,  # the service client's: the SDK's service_url and the CLI's commands
        usage.router,
    ):
        app.include_router(router)
    from researchcrew.service.routes import _collections as collections
    from researchcrew.service.routes import _documents as documents
    from researchcrew.service.routes import _jobs as jobs
    from researchcrew.service.routes import _kickoff as kickoff

    app.include_router(collections.router)  # document collections and who reads them
    app.include_router(jobs.router)  # batch jobs and runs
    app.include_router(kickoff.router)  # crewAI's deployed-crew API over one run
    mcp_endpoint = McpEndpoint(app)  # the MCP server over streamable HTTP, behind the same API keys
    app.router.routes.append(Route(MCP_PATH, endpoint=mcp_endpoint, include_in_schema=False))
    app.include_router(documents.router)  # documents uploaded into the knowledge base
    web.install(app)  # the web page at / and its static files
    return app


async def _finish_running(tasks: Sequence[asyncio.Task[object]] | set[asyncio.Task[object]], grace_s: float) -> None:
    """Let answers still being researched finish within ``grace_s``; cancel what is left after it."""
    pending = [task for task in tasks if not task.done()]
    if not pending:
        return
    logger.info("waiting up to %.0f s for %d running answer(s)", grace_s, len(pending))
    _, late = await asyncio.wait(pending, timeout=grace_s)
    for task in late:
        task.cancel()
    if late:
        logger.warning("cancelled %d answer(s) still running after the %.0f s grace period", len(late), grace_s)
        await asyncio.wait(late, timeout=5)


def app_from_environment() -> FastAPI:
    """The app for ``uvicorn --factory`` (and each ``serve --workers`` process): settings from the environment."""
    return create_app(Settings())
