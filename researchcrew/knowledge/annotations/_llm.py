"""Optional LLM extraction: with a model configured, each passage's facts as the model reads them, validated.

The rules (``_extract``) run first and always; the model adds facts the rules missed ("The panel is 1,134 mm wide"
→ width: 1,134 mm). Its reply must be JSON ``{"facts": [{"label": ..., "value": ...}]}``; a fact is kept only when
its value occurs verbatim in the passage (an invented or reworded value is dropped and counted), and a reply that
does not parse, or a call that fails, leaves the rules' annotations as they are. Ingest runs on a worker thread, so
the model is called synchronously (``BaseLLM.call``), bounded by the provider's own timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from researchcrew.knowledge.annotations._extract import Annotation, Extraction
from researchcrew.knowledge.annotations._values import typed_value
from researchcrew.knowledge.documents import Chunk, Document
from researchcrew.llm.fence import block
from researchcrew.llm.replies import ReplyParseError, parse_reply

logger = logging.getLogger(__name__)

MAX_FACTS_PER_PASSAGE = 30

_SYSTEM = (
    "You extract facts from a passage as label/value pairs: measurements, counts, prices, dates, names. "
    "Copy each value exactly as it is written in the passage (same characters, same units); never compute, convert "
    'or guess. Reply with JSON only: {"facts": [{"label": "...", "value": "..."}]}; an empty list when there are none.'
)


class _Fact(BaseModel):
    label: str = Field(min_length=1, max_length=100)
    value: str = Field(min_length=1, max_length=300)


class _Facts(BaseModel):
    facts: list[_Fact] = Field(default_factory=list, max_length=200)


class LLMExtractor:
    """Facts from each passage by an LLM (a crewAI ``BaseLLM``), validated against the passage."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.rejected = 0  # values the model gave that the passage does not hold

    def facts(self, passage: str) -> list[tuple[str, str]]:
        """(label, value) pairs the model found in ``passage`` whose value the passage holds verbatim."""
        messages = [
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": block("EVIDENCE", passage)},
        ]
        try:
            reply = self.llm.call(messages)
            parsed = parse_reply(reply, _Facts, list_field="facts")
        except ReplyParseError as error:
            logger.info("annotation extraction reply unusable, rules only: %s", error)
            return []
        except Exception as error:  # the provider's own failure (network, quota): the rules' annotations stand
            logger.warning("annotation extraction by the LLM failed, rules only: %s", error)
            return []
        kept: list[tuple[str, str]] = []
        for fact in parsed.facts[:MAX_FACTS_PER_PASSAGE]:
            value = fact.value.strip()
            if value and value in passage:
                kept.append((fact.label.strip(), value))
            else:
                self.rejected += 1
        return kept

    def add_to(self, extraction: Extraction, document: Document, chunks: Sequence[Chunk]) -> Extraction:
        """The rules' extraction plus the model's facts that the rules did not already have."""
        seen = {(value.key, value.text) for item in extraction.annotations for value in item.values}
        page = document.metadata.get("page")
        for chunk in chunks:
            for label, value in self.facts(chunk.text):
                typed = typed_value(label, value)
                if (typed.key, typed.text) in seen:
                    continue
                seen.add((typed.key, typed.text))
                extraction.annotations.append(
                    Annotation(
                        kind="fact",
                        values=[typed],
                        section=chunk.heading,
                        page=page if isinstance(page, int) and page >= 1 else None,
                        chunk_id=chunk.chunk_id,
                        doc_id=chunk.doc_id,
                        source_key=document.source_key,
                        title=document.title,
                        file=str(document.metadata.get("path") or "") or None,
                        extracted_by="llm",
                    )
                )
        return extraction
