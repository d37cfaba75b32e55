"""Retrieval tools: the ``Tool`` interface and the four built-in sources, and any crewAI tool as a source.

The concrete tools are imported lazily (``researchcrew.tools.rag``, ``.web``, ``.arxiv``, ``.memory_recall``) so that
importing the interface does not pull in pymilvus, firecrawl or zep-python. ``from_crewai`` (a crewai-tools or
crewAI ``BaseTool`` instance as a source, ``tools/_crewai_source.py``) is loaded on first use too.
"""

from typing import TYPE_CHECKING, Any

from researchcrew.tools.base import Tool, ToolResult, validate_chunks

if TYPE_CHECKING:
    from researchcrew.tools._crewai_source import CrewAISource, from_crewai

__all__ = ["CrewAISource", "Tool", "ToolResult", "from_crewai", "validate_chunks"]


def __getattr__(name: str) -> Any:
    if name in ("CrewAISource", "from_crewai"):
        from researchcrew.tools import _crewai_source as crewai_source

        return getattr(crewai_source, name)
    raise AttributeError(f"module 'researchcrew.tools' has no attribute {name!r}")
