"""Retrieval tools: the ``Tool`` interface and the four built-in sources.

The concrete tools are imported lazily (``researchcrew.tools.rag``, ``.web``, ``.arxiv``, ``.memory_recall``) so that
importing the interface does not pull in pymilvus, firecrawl or zep-python.
"""

from researchcrew.tools.base import Tool, ToolResult, validate_chunks

__all__ = ["Tool", "ToolResult", "validate_chunks"]
