"""``GET /healthz`` (the process is alive) and ``GET /readyz`` (its stores answer; which sources are configured, and
each source's health: healthy, or backing off after a recent failure — ``tools/health.py``). Neither needs a key:
load balancers and orchestrators call them. A source backing off does not make the process unready: questions are
still answered from the others, and say so."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Literal

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field

from researchcrew.redaction import public_text
from researchcrew.service._problems import STORE_RETRY_AFTER_S
from researchcrew.service._state import Service
from researchcrew.tools.health import SourceState

if TYPE_CHECKING:
    from researchcrew.knowledge.collection import KnowledgeBase

logger = logging.getLogger(__name__)

router = APIRouter(tags=["health"])
_CHECK_TIMEOUT_S = 3.0


class Health(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["ok"] = Field(description="Always `ok`: the process answers.")
    pid: int = Field(description="The id of the process that answered (several processes may serve).")


class Check(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ok: bool = Field(description="Whether it answered in time.")
    detail: str = Field(description="What was checked, or why it failed.")


class Readiness(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ready: bool = Field(description="True when every check passed.")
    checks: dict[str, Check] = Field(description="Each dependency checked: memory_store, knowledge_base, limits.")
    sources: list[str] = Field(description="Source types questions are researched in, in order.")
    source_health: list[SourceState] = Field(
        default_factory=list,
        description="Each source's health: healthy, or backing off until `retry_at` after its last failure (kind "
        "and message, credentials masked). Shared by every process using the same Redis when `redis.url` is set.",
    )


@router.get("/healthz", response_model=Health, summary="The process is alive.")
async def healthz() -> Health:
    return Health(status="ok", pid=os.getpid())


@router.get(
    "/readyz",
    response_model=Readiness,
    summary="The stores answer; which sources are configured.",
    responses={503: {"model": Readiness, "description": "A store did not answer."}},
)
async def readyz(service: Service, response: Response) -> Readiness:
    from researchcrew.tools.rag import RAGTool

    stages = await service.runtime.stages()
    tools = list(getattr(stages.retriever, "tools", ()))
    checks = {"memory_store": await _memory_store(service)}
    knowledge_bases = [tool.knowledge_base for tool in tools if isinstance(tool, RAGTool)]
    if knowledge_bases:
        checks["knowledge_base"] = await _knowledge_base(knowledge_bases[0])
    if service.throttle.shared:
        ok = await service.throttle.ping()
        checks["limits"] = Check(ok=ok, detail="Redis answers" if ok else "Redis does not answer")
    ready = all(check.ok for check in checks.values())
    if not ready:
        response.status_code = 503
        response.headers["Retry-After"] = str(STORE_RETRY_AFTER_S)
    health = service.runtime.source_health()
    states = await health.states([tool.name for tool in tools])
    kinds = {tool.name: tool.source_type for tool in tools}
    states = [state.model_copy(update={"source_type": kinds.get(state.name)}) for state in states]
    return Readiness(ready=ready, checks=checks, sources=[tool.source_type for tool in tools], source_health=states)


async def _memory_store(service: Service) -> Check:
    store = await service.runtime.memory_store()
    try:
        async with asyncio.timeout(_CHECK_TIMEOUT_S):
            await store.ping()
    except TimeoutError:
        return Check(ok=False, detail=f"{store.backend} did not answer within {_CHECK_TIMEOUT_S:g} s")
    except Exception as error:  # the readiness probe reports any failure of the driver as data
        logger.warning("readiness: memory store failed: %s", error)
        return Check(ok=False, detail=f"{store.backend}: {type(error).__name__}")
    return Check(ok=True, detail=f"{store.backend} answers")


async def _knowledge_base(knowledge_base: KnowledgeBase) -> Check:
    from researchcrew.errors import KnowledgeBaseError

    try:
        async with asyncio.timeout(_CHECK_TIMEOUT_S):
            chunks = await asyncio.to_thread(knowledge_base.store.count)
    except TimeoutError:
        return Check(ok=False, detail=f"Milvus did not answer within {_CHECK_TIMEOUT_S:g} s")
    except KnowledgeBaseError as error:
        return Check(ok=False, detail=public_text(str(error)))
    return Check(ok=True, detail=f"Milvus answers ({chunks} chunks)")
