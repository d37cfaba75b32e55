"""Build the ResearchFlow's stages from ``Settings``: the four tools, the four agents and the policies between them.

This is the one place that knows which concrete class serves which role, so that ``ResearchAssistant`` (and the
API and batch jobs after it) only say *what* they want overridden. Heavy imports happen here, on first use.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from researchcrew.contracts import ContextChunk, FinalResponse, MemoryInput
from researchcrew.errors import ConfigurationError
from researchcrew.pipeline.reformulate import deterministic_reformulation, llm_reformulation
from researchcrew.pipeline.stages import ResearchStages
from researchcrew.settings import Settings
from researchcrew.tools.base import Tool

if TYPE_CHECKING:
    from crewai import BaseLLM

    from researchcrew.embedding.embedder import Embedder
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.memory.outbox import OutboxWorker
    from researchcrew.memory.store import MemoryStore
    from researchcrew.memory.zep import ZepMemory
    from researchcrew.pipeline.remember.agent import MemoryAgent

logger = logging.getLogger(__name__)


@dataclass
class BuiltStages:
    """The stages plus the long-lived resources behind them, which the owner must close."""

    stages: ResearchStages
    knowledge_base: KnowledgeBase | None
    memory_store: MemoryStore | None
    memory_agent: MemoryAgent | None
    outbox_worker: OutboxWorker | None = None
    zep: ZepMemory | None = None


async def build_stages(
    settings: Settings,
    *,
    tools: Sequence[Tool] | None = None,
    llm: BaseLLM | None = None,
    knowledge_base: KnowledgeBase | None = None,
    memory_store: MemoryStore | None = None,
    remember: bool = True,
) -> BuiltStages:
    """Everything one assistant needs. ``tools=None`` builds the four built-in sources from ``settings``."""
    from researchcrew.llm import build_llm
    from researchcrew.pipeline.evaluate.evaluator import EvaluatorAgent
    from researchcrew.pipeline.retrieve import RetrieverAgent
    from researchcrew.pipeline.synthesize.citations import validate_citations
    from researchcrew.pipeline.synthesize.extractive import ExtractiveSynthesizer
    from researchcrew.pipeline.synthesize.llm_writer import SynthesizerAgent

    model = llm if llm is not None else build_llm(settings.llm)
    open_store = memory_store is None and (remember or tools is None)
    open_kb = tools is None and knowledge_base is None
    if open_store or open_kb:
        memory_store, knowledge_base = await _open_stores(
            settings, memory_store=memory_store, knowledge_base=knowledge_base, open_store=open_store, open_kb=open_kb
        )
    zep, outbox_worker = _zep_backend(settings, memory_store) if memory_store is not None else (None, None)
    if tools is None:
        if knowledge_base is None:  # _open_stores opened it or raised
            raise RuntimeError("the knowledge base was not opened")
        tools = default_tools(settings, knowledge_base=knowledge_base, memory_store=memory_store, zep=zep)
    memory_agent = None
    if remember and memory_store is not None:
        from researchcrew.pipeline.remember.agent import MemoryAgent

        memory_agent = MemoryAgent(memory_store, llm=model, zep_outbox=outbox_worker)

    def check(response: FinalResponse, given: Sequence[ContextChunk]) -> FinalResponse:
        return validate_citations(response, given)

    def schedule_memory(memory_input: MemoryInput) -> bool:
        if memory_agent is None:
            return False
        memory_agent.remember_in_background(memory_input)
        return True

    reformulate = llm_reformulation(model, timeout_s=settings.llm.timeout_s) if model else deterministic_reformulation
    stages = ResearchStages(
        retriever=RetrieverAgent(tools, settings=settings.retrieval),
        evaluator=EvaluatorAgent(settings.evaluation, llm=model),
        fallback_evaluator=EvaluatorAgent(settings.evaluation),  # deterministic: no LLM adjudication
        synthesizer=SynthesizerAgent(
            model, timeout_s=2 * settings.llm.timeout_s, structured_output=settings.llm.structured_output
        ),
        fallback_synthesizer=ExtractiveSynthesizer(),
        validate_citations=check,
        remember=schedule_memory,
        reformulate=reformulate,
        deadline_s=settings.retrieval.run_deadline_s,
        timeout_per_source_s=settings.retrieval.timeout_per_source_s,
        num_results=settings.retrieval.num_results,
        quality_threshold=settings.evaluation.quality_threshold,
        # With an LLM, keep time back from retrieval for generation; the extractive path needs milliseconds.
        synthesis_reserve_s=min(5.0, settings.llm.timeout_s) if model else 0.3,
        llm=model,
    )
    return BuiltStages(stages, knowledge_base, memory_store, memory_agent, outbox_worker, zep)


def default_tools(
    settings: Settings,
    *,
    knowledge_base: KnowledgeBase,
    memory_store: MemoryStore | None,
    zep: ZepMemory | None = None,
) -> list[Tool]:
    """The built-in sources named in ``settings.enabled_sources``, in that order. Memory recall uses Zep when the
    Zep backend is configured, else the built-in store."""
    from researchcrew.tools.arxiv import ArxivTool
    from researchcrew.tools.memory_recall import MemoryTool
    from researchcrew.tools.rag import RAGTool
    from researchcrew.tools.web import WebSearchTool

    built: dict[str, Tool] = {
        "rag": RAGTool(knowledge_base),
        "web": WebSearchTool(settings.firecrawl),
        "arxiv": ArxivTool(settings.arxiv),
    }
    recall = zep if zep is not None else memory_store
    if recall is not None:
        built["memory"] = MemoryTool(recall, settings.memory)
    unknown = [name for name in settings.enabled_sources if name not in ("rag", "web", "arxiv", "memory")]
    if unknown:
        logger.warning("enabled_sources names unknown source types %s; pass custom tools with tools=", unknown)
    return [built[name] for name in settings.enabled_sources if name in built]


async def _open_stores(
    settings: Settings,
    *,
    memory_store: MemoryStore | None,
    knowledge_base: KnowledgeBase | None,
    open_store: bool,
    open_kb: bool,
) -> tuple[MemoryStore | None, KnowledgeBase | None]:
    """Open the memory store and the knowledge base at the same time, sharing one embedding model.

    Each piece costs about a second on first use (loading the model, starting Milvus Lite and opening its
    collection, migrating the memory database); done one after another on the first question they add up, so they
    overlap here. When one fails, the other is closed before the error propagates."""
    embedder = await asyncio.to_thread(_shared_embedder, settings)
    jobs: list[asyncio.Task[object]] = []
    if open_store:
        jobs.append(asyncio.ensure_future(_open_memory_store(settings, embedder)))
    if open_kb:
        jobs.append(asyncio.ensure_future(_open_knowledge_base(settings, embedder)))
    results = await asyncio.gather(*jobs, return_exceptions=True)
    failures = [result for result in results if isinstance(result, BaseException)]
    opened = [result for result in results if not isinstance(result, BaseException)]
    if failures:
        for resource in opened:
            await _close_quietly(resource)
        raise failures[0]
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.memory.store import MemoryStore

    for resource in opened:
        if isinstance(resource, MemoryStore):
            memory_store = resource
        elif isinstance(resource, KnowledgeBase):
            knowledge_base = resource
    return memory_store, knowledge_base


def _shared_embedder(settings: Settings) -> Embedder | None:
    """The process-wide embedding model for ``settings``, loaded now so the first question does not wait for it,
    and shared by the knowledge base and memory recall (each would otherwise load its own copy). None when it
    cannot be loaded: each part then reports the missing model itself, per question, as a failed source."""
    from researchcrew.embedding.embedder import get_embedder
    from researchcrew.errors import ModelUnavailableError

    try:
        return get_embedder(settings)
    except ModelUnavailableError as error:
        logger.warning("embedding model unavailable (%s); knowledge base and memory recall will report it", error)
        return None


async def _open_knowledge_base(settings: Settings, embedder: Embedder | None) -> KnowledgeBase:
    from researchcrew.errors import KnowledgeBaseError
    from researchcrew.knowledge.collection import KnowledgeBase

    if settings.milvus.uri is None:
        settings.ensure_data_dir()
    knowledge_base = KnowledgeBase(settings, embedder=embedder)
    try:
        # Connecting starts Milvus Lite (or reaches the server) and loads the collection: blocking, about a second.
        await asyncio.to_thread(lambda: knowledge_base.store.client)
    except KnowledgeBaseError as error:
        # Not fatal: the RAG source retries the connection per question and reports it as failed meanwhile.
        logger.warning("knowledge base not reachable at start-up: %s", error)
    return knowledge_base


async def _open_memory_store(settings: Settings, embedder: Embedder | None) -> MemoryStore:
    from researchcrew.memory.store import MemoryStore

    return await MemoryStore.from_settings(settings, embedder=embedder)


async def _close_quietly(resource: object) -> None:
    """Release a store opened by ``_open_stores`` whose sibling failed to open."""
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.memory.store import MemoryStore

    try:
        if isinstance(resource, MemoryStore):
            await resource.close()
        elif isinstance(resource, KnowledgeBase):
            await asyncio.to_thread(resource.close)
    except Exception:  # closing after a failed start must not hide the error that caused it
        logger.warning("could not close %r after a failed start", resource, exc_info=True)


def _zep_backend(settings: Settings, store: MemoryStore) -> tuple[ZepMemory | None, OutboxWorker | None]:
    """With ``memory.backend = "zep"``: the Zep client (recall) and the outbox worker that mirrors every exchange
    to Zep from our own store, retried in the background (the answer never waits for Zep)."""
    if settings.memory.backend != "zep":
        return None, None
    from researchcrew.memory.outbox import OutboxWorker
    from researchcrew.memory.zep import ZepError, ZepMemory

    try:
        zep = ZepMemory(settings.zep)
    except ZepError as error:
        raise ConfigurationError(f"memory.backend is 'zep' but {error.message}") from error
    worker = OutboxWorker(store, zep)
    worker.start()
    return zep, worker
