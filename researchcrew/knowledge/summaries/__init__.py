"""Summaries of long documents (seed 004's long-text route, issue 22): extractive summaries of each long document
and of its sections, with summary vectors, in a Milvus collection beside the chunks.

* ``document_summaries`` / ``summarise`` — sentence centrality over the chunks' own vectors (offline).
* ``SummaryIndex`` — the ``<collection>_summaries`` collection: written at ingest, removed with the document and
  the collection, searched by the long-text route (``pipeline/_long_text.py``).
"""

from __future__ import annotations

from researchcrew.knowledge.summaries._extractive import Passage, Summary, document_summaries, summarise
from researchcrew.knowledge.summaries._index import (
    SummaryHit,
    SummaryIndex,
    SummaryReport,
    group_of,
    summaries_for,
)

__all__ = [
    "Passage",
    "Summary",
    "SummaryHit",
    "SummaryIndex",
    "SummaryReport",
    "document_summaries",
    "group_of",
    "summaries_for",
    "summarise",
]
