"""Assemble the ResearchFlow's stages from ``Settings`` and opened resources: the tools, the four agents and the
policies between them.

This is the one place that knows which concrete class serves which role. It opens nothing: the runtime
(``researchcrew.runtime``) opens the knowledge base, the memory store and Zep, and hands them in.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from researchcrew.contracts import ContextChunk, FinalResponse, MemoryInput
from researchcrew.pipeline.reformulate import deterministic_reformulation, llm_reformulation
from researchcrew.pipeline.stages import ResearchStages
from researchcrew.settings import Settings
from researchcrew.tools.base import Tool

if TYPE_CHECKING:
    from crewai import BaseLLM

    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.memory.store import MemoryStore
    from researchcrew.memory.zep import ZepMemory
    from researchcrew.pipeline.remember.agent import MemoryAgent

logger = logging.getLogger(__name__)


def assemble_stages(
    settings: Settings, *, tools: Sequence[Tool], llm: BaseLLM | None, memory_agent: MemoryAgent | None
) -> ResearchStages:
    """The stages one research run uses. ``memory_agent=None`` remembers nothing."""
    from researchcrew.pipeline.evaluate.evaluator import EvaluatorAgent
    from researchcrew.pipeline.retrieve import RetrieverAgent
    from researchcrew.pipeline.synthesize.citations import validate_citations
    from researchcrew.pipeline.synthesize.extractive import ExtractiveSynthesizer
    from researchcrew.pipeline.synthesize.llm_writer import SynthesizerAgent

    def check(response: FinalResponse, given: Sequence[ContextChunk]) -> FinalResponse:
        return validate_citations(response, given)

    def schedule_memory(memory_input: MemoryInput) -> bool:
        if memory_agent is None:
            return False
        memory_agent.remember_in_background(memory_input)
        return True

    reformulate = llm_reformulation(llm, timeout_s=settings.llm.timeout_s) if llm else deterministic_reformulation
    return ResearchStages(
        retriever=RetrieverAgent(tools, settings=settings.retrieval),
        evaluator=EvaluatorAgent(settings.evaluation, llm=llm),
        fallback_evaluator=EvaluatorAgent(settings.evaluation),  # deterministic: no LLM adjudication
        synthesizer=SynthesizerAgent(
            llm,
            timeout_s=2 * settings.llm.timeout_s,
            structured_output=settings.llm.structured_output,
            stream_when_watched=settings.llm.stream,
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
        synthesis_reserve_s=min(5.0, settings.llm.timeout_s) if llm else 0.3,
        llm=llm,
    )


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
