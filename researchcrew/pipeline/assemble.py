"""Assemble the ResearchFlow's stages from ``Settings`` and opened resources: the tools, the four agents and the
policies between them.

This is the one place that knows which concrete class serves which role. It opens nothing: the runtime
(``researchcrew.runtime``) opens the knowledge base, the memory store and Zep, and hands them in.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from researchcrew.contracts import ContextChunk, FinalResponse, MemoryInput
from researchcrew.llm.pricing import Pricing
from researchcrew.pipeline.reformulate import deterministic_reformulation, llm_reformulation
from researchcrew.pipeline.stages import ResearchStages, StructuredStage, TableSaver
from researchcrew.settings import Settings
from researchcrew.tools.base import Tool

if TYPE_CHECKING:
    from crewai import BaseLLM

    from researchcrew.embedding.embedder import Embedder
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.memory.records import SessionSummary
    from researchcrew.memory.store import MemoryStore
    from researchcrew.memory.zep import ZepMemory
    from researchcrew.pipeline.remember.writer import MemoryWriter
    from researchcrew.tools.health import SourceHealth
    from researchcrew.tools.limits import SharedLimits

logger = logging.getLogger(__name__)


def assemble_stages(
    settings: Settings,
    *,
    tools: Sequence[Tool],
    llm: BaseLLM | None,
    memory_writer: MemoryWriter | None,
    embedder: Embedder | None = None,
    memory_unavailable: str | None = None,
    memory_store: MemoryStore | None = None,
    health: SourceHealth | None = None,
    structured: StructuredStage | None = None,
    save_table: TableSaver | None = None,
) -> ResearchStages:
    """The stages one research run uses. ``memory_writer=None`` remembers nothing; ``memory_unavailable`` says why
    (the store could not be opened), and answers then say so. ``embedder`` measures how well evidence supports the
    question (without one, each source's own relevance stands in). ``memory_store`` is where the follow-up stage reads
    session summaries (None: every question is researched as asked). ``health`` skips sources backing off after a
    recent failure (None: every question tries every source). ``structured`` chooses each question's route and answers
    structured questions from annotations (issue 22; None: normal retrieval only); their tables are persisted by
    ``save_table`` (default: in ``memory_store``) for "show the rest" and export."""
    from researchcrew.pipeline._support import EmbeddingSupport, knowledge_base_null, relevance_support
    from researchcrew.pipeline.clarify import evidence_clarifier
    from researchcrew.pipeline.evaluate._evaluator import Evaluator
    from researchcrew.pipeline.retrieve import Retriever
    from researchcrew.pipeline.synthesize._citations import validate_citations
    from researchcrew.pipeline.synthesize._llm_writer import Synthesizer
    from researchcrew.pipeline.synthesize.extractive import ExtractiveSynthesizer

    def check(response: FinalResponse, given: Sequence[ContextChunk]) -> FinalResponse:
        return validate_citations(response, given)

    def schedule_memory(memory_input: MemoryInput) -> bool:
        if memory_writer is None:
            return False
        memory_writer.remember_in_background(memory_input)
        return True

    reformulate = llm_reformulation(llm, timeout_s=settings.llm.timeout_s) if llm else deterministic_reformulation
    follow_up_options = _follow_up(settings, llm=llm, memory_store=memory_store, memory_writer=memory_writer)
    return ResearchStages(
        retriever=Retriever(tools, settings=settings.retrieval, health=health),
        evaluator=Evaluator(settings.evaluation, llm=llm),
        fallback_evaluator=Evaluator(settings.evaluation),  # deterministic: no LLM adjudication
        synthesizer=Synthesizer.from_settings(settings, llm),
        fallback_synthesizer=ExtractiveSynthesizer(),
        validate_citations=check,
        remember=schedule_memory,
        reformulate=reformulate,
        **follow_up_options,
        clarify=evidence_clarifier(settings.clarification, llm),
        deadline_s=settings.retrieval.run_deadline_s,
        quality_threshold=settings.evaluation.quality_threshold,
        # With an LLM, keep time back from retrieval for generation; the extractive path needs milliseconds.
        synthesis_reserve_s=min(5.0, settings.llm.timeout_s) if llm else 0.3,
        llm=llm,
        memory_unavailable=memory_unavailable,
        support=(
            EmbeddingSupport(embedder, settings.confidence, null=knowledge_base_null(tools, embedder))
            if embedder is not None
            else relevance_support
        ),
        confidence=settings.confidence,
        pricing=pricing_for(settings, llm),
        structured=structured,
        table_page_size=settings.structured.page_size,
        save_table=save_table or (memory_store.save_answer_table if memory_store is not None else None),
    )


def pricing_for(settings: Settings, llm: BaseLLM | None) -> Pricing:
    """Prices for the configured model, or for the model a given LLM object names."""
    if settings.llm.model is None and llm is not None and isinstance(getattr(llm, "model", None), str):
        return Pricing.from_settings(settings.llm.model_copy(update={"model": llm.model}))
    return Pricing.from_settings(settings.llm)


def _follow_up(
    settings: Settings, *, llm: BaseLLM | None, memory_store: MemoryStore | None, memory_writer: MemoryWriter | None
) -> dict[str, Any]:
    """The follow-up stage's fields of ``ResearchStages``: where the session's summary is read, and who rewrites."""
    if not settings.follow_up.enabled or memory_store is None:
        return {}
    from researchcrew.pipeline.follow_up._llm import llm_rewriter
    from researchcrew.pipeline.follow_up._session import RECENT_TURNS, summary_from_history

    store = memory_store
    wait_s = settings.follow_up.wait_for_memory_s

    async def load(user_id: str, session_id: str) -> SessionSummary | None:
        if memory_writer is not None and not await memory_writer.session_settled(user_id, session_id, wait_s):
            logger.info(
                "the previous exchange of session %s is still being remembered; rewriting without it", session_id
            )
        summary = await store.session_summary(user_id=user_id, session_id=session_id)
        if summary is not None:
            return summary
        history = await store.history(user_id=user_id, session_id=session_id, limit=RECENT_TURNS)
        return summary_from_history(history, user_id=user_id, session_id=session_id)

    options: dict[str, Any] = {
        "session_context": load,
        "follow_up_budget_s": wait_s + settings.follow_up.timeout_s + 1.0,
    }
    if llm is not None and settings.follow_up.use_llm:
        options["follow_up"] = llm_rewriter(llm, timeout_s=settings.follow_up.timeout_s)
    return options


def default_structured_stage(
    settings: Settings, *, knowledge_base: KnowledgeBase, memory_store: MemoryStore | None, llm: BaseLLM | None
) -> StructuredStage | None:
    """The structured stage over the knowledge base's annotations (issue 22), with the same collection access as the
    knowledge-base search: None when the knowledge base is not a source or annotations are off
    (``settings.structured.annotate``)."""
    if "rag" not in settings.enabled_sources:
        return None
    from researchcrew.knowledge.collections_store import CollectionsStore
    from researchcrew.pipeline._structured import annotation_stage

    access = CollectionsStore(memory_store.engine) if memory_store else None
    return annotation_stage(knowledge_base, access=access, llm=llm)


def default_tools(
    settings: Settings,
    *,
    knowledge_base: KnowledgeBase,
    memory_store: MemoryStore | None,
    zep: ZepMemory | None = None,
    limits: SharedLimits | None = None,
    memory_unavailable: str | None = None,
) -> list[Tool]:
    """The built-in sources named in ``settings.enabled_sources``, in that order, then the crewai-tools sources
    named in ``settings.extra_sources`` (``tools/extra_sources.py``; a missing key raises ``ConfigurationError``
    before anything is built). Memory recall uses Zep when the
    Zep backend is configured, else the built-in store; when the store could not be opened (``memory_unavailable``
    says why), memory stays in the fan-out as a source that reports that failure. ``limits`` shares arXiv's pacing
    and the Firecrawl cap with other processes (through Redis, when configured)."""
    from researchcrew.knowledge.collections_store import CollectionsStore
    from researchcrew.tools.arxiv import ArxivTool
    from researchcrew.tools.extra_sources import build_extra_sources
    from researchcrew.tools.memory_recall import MemoryTool
    from researchcrew.tools.rag import RAGTool
    from researchcrew.tools.unavailable import UnavailableSource
    from researchcrew.tools.web import WebSearchTool

    extras = build_extra_sources(settings)  # first: a configuration mistake stops the start before anything opens
    firecrawl_lease_s = settings.firecrawl.effective_timeout_s + 10  # a killed holder's slot comes back after this
    cap = limits.cap("firecrawl", settings.firecrawl.max_concurrent, lease_s=firecrawl_lease_s) if limits else None
    pacer = limits.pacer("arxiv", settings.arxiv.min_interval_s) if limits else None
    built: dict[str, Tool] = {
        # Searches are limited to the collections the asking user may read, asked of the memory database per search.
        "rag": RAGTool(knowledge_base, access=CollectionsStore(memory_store.engine) if memory_store else None),
        "web": WebSearchTool(settings.firecrawl, cap=cap),
        "arxiv": ArxivTool(settings.arxiv, shared_pacer=pacer),
    }
    recall = zep if zep is not None else memory_store
    if recall is not None:
        built["memory"] = MemoryTool(recall, settings.memory)
    elif memory_unavailable is not None:
        built["memory"] = UnavailableSource(
            "memory", MemoryTool.name, kind="unreachable", reason=f"{memory_unavailable} (retried later)"
        )
    return [built[name] for name in settings.enabled_sources if name in built] + list(extras)
