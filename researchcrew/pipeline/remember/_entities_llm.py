"""Entity extraction with an LLM: typed entities and typed relations, checked against the text.

The rule-based extractor always runs first (it is cheap, and better at identifiers such as arXiv ids and DOIs).
The LLM is given the exchange fenced as data by the one fence (``llm.fence``: an answer quotes retrieved web text,
which may carry a prompt injection) and asked for JSON (entities with a type and confidence; relations such as
``evaluated_on`` or ``introduced_by``), which the one reply parser (``llm.replies``) reads and validates. Names
the text does not contain are dropped (an LLM may invent them), relations must join entities that were found, and
the rule-based co-occurrence and abbreviation relations are kept. Any failure of the LLM (an error, a timeout,
unparsable or invalid JSON) logs a warning and returns the rule-based result: extraction never fails because of
the LLM.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from typing import Any, Protocol, get_args

from pydantic import BaseModel, Field, field_validator

from researchcrew.llm.calls import complete
from researchcrew.llm.fence import RULE, block
from researchcrew.llm.replies import ReplyParseError, parse_reply
from researchcrew.memory.records import EntityMention, EntityRelation
from researchcrew.pipeline.remember._entities import (
    CO_OCCURS,
    CONTEXT_CHARS,
    EntityType,
    Extraction,
    RuleBasedExtractor,
    clean_text,
    normalize,
    sentences,
)

logger = logging.getLogger(__name__)

ENTITY_TYPES: tuple[str, ...] = get_args(EntityType)
MAX_LLM_CONFIDENCE = 0.9  # a model's self-reported certainty is not evidence; cap it
_SYSTEM = (
    "You extract named entities and the relations between them from a research question and its answer. "
    "Entities are specific named things: datasets, models, methods, metrics, papers (arXiv ids, DOIs), people, "
    "organizations, named concepts. Not generic words. Relations are facts the text states, such as "
    "evaluated_on, introduced_by, outperforms, uses, part_of, abbreviation_of. "
    'Reply with JSON only: {"entities": [{"name": "...", "type": "dataset|model|method|metric|paper|person|'
    'organization|concept", "confidence": 0.0-1.0}], "relations": [{"source": "...", "target": "...", '
    '"relation": "snake_case_verb", "confidence": 0.0-1.0}]}. Write every name exactly as it appears in the text. '
    "The question and the answer are given in the blocks QUESTION and ANSWER. " + RULE
)
_BLOCKS = ("QUESTION", "ANSWER")


class SupportsACall(Protocol):
    """What the extractor needs of an LLM: crewAI's ``BaseLLM.acall``."""

    async def acall(self, messages: Any) -> Any: ...


class _Entity(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    type: str = "concept"
    confidence: float = Field(default=0.7, ge=0.0, le=1.0)

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        value = value.strip().casefold()
        return value if value in ENTITY_TYPES else "concept"


class _Relation(BaseModel):
    source: str = Field(min_length=1, max_length=200)
    target: str = Field(min_length=1, max_length=200)
    relation: str = Field(min_length=1, max_length=64)
    confidence: float = Field(default=0.7, ge=0.0, le=1.0)

    @field_validator("relation")
    @classmethod
    def _snake_case(cls, value: str) -> str:
        value = re.sub(r"[^a-z0-9]+", "_", value.strip().casefold()).strip("_")
        if not value:
            raise ValueError("empty relation name")
        return value


class _Answer(BaseModel):
    entities: list[_Entity] = Field(default_factory=list, max_length=200)
    relations: list[_Relation] = Field(default_factory=list, max_length=400)


def parse_answer(raw: Any) -> _Answer:
    """The LLM's JSON (a bare object, or one inside a ```json fence or surrounded by prose), validated.
    Raises ``ReplyParseError`` saying why when there is none."""
    return parse_reply(raw, _Answer)


class LLMEntityExtractor:
    """Typed entities and relations from an LLM, falling back to the rules. See the module docstring."""

    def __init__(
        self,
        llm: SupportsACall,
        *,
        fallback: RuleBasedExtractor | None = None,
        timeout_s: float = 20.0,
        max_chars: int = 12_000,
    ) -> None:
        self.llm = llm
        self.fallback = fallback or RuleBasedExtractor()
        self.timeout_s = timeout_s
        self.max_chars = max_chars

    async def extract(self, texts: Sequence[str]) -> Extraction:
        rules = await self.fallback.extract(texts)
        try:
            async with asyncio.timeout(self.timeout_s):
                raw = await complete(self.llm, self._messages(texts))
            answer = parse_answer(raw)
        except TimeoutError:
            logger.warning("entity extraction: the LLM did not answer within %s s; using the rules", self.timeout_s)
            return rules
        except ReplyParseError as error:
            logger.warning("entity extraction: unusable LLM answer (%s); using the rules", str(error)[:300])
            return rules
        except Exception as error:  # the one guard around a provider call (litellm, httpx, SDK errors all differ)
            logger.warning("entity extraction: the LLM failed (%s: %s); using the rules", type(error).__name__, error)
            return rules
        return self._merge(rules, answer, texts)

    def _messages(self, texts: Sequence[str]) -> list[dict[str, str]]:
        """The question and the answer, each in its block; the answer gets what the question leaves of
        ``max_chars`` (the question at most a third), so a long answer is cut inside its block, never the block."""
        question_budget = self.max_chars // 3
        blocks, used = [], 0
        for name, text in zip(_BLOCKS, texts, strict=False):
            budget = question_budget if name == "QUESTION" else self.max_chars - used
            quoted = text[: max(0, budget)]
            used += len(quoted)
            blocks.append(block(name, quoted))
        return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": "\n\n".join(blocks)}]

    def _merge(self, rules: Extraction, answer: _Answer, texts: Sequence[str]) -> Extraction:
        sentence_list = [s for text in texts for s, _ in sentences(text)]
        haystack = clean_text("\n".join(texts)).casefold()
        mentions = {normalize(m.name): m for m in rules.mentions}
        for entity in answer.entities:
            name = entity.name.strip()
            if name.casefold() not in haystack:
                logger.debug("entity extraction: dropping %r, which the text does not contain", name)
                continue
            key = normalize(name)
            confidence = min(entity.confidence, MAX_LLM_CONFIDENCE)
            known = mentions.get(key)
            if known is not None:
                kind = entity.type if entity.type != "concept" else known.type
                mentions[key] = known.model_copy(update={"type": kind, "confidence": max(known.confidence, confidence)})
                continue
            context = next((s for s in sentence_list if name.casefold() in s.casefold()), "")
            mentions[key] = EntityMention(
                name=name, type=entity.type, confidence=confidence, context=context[:CONTEXT_CHARS]
            )
        relations = list(rules.relations)
        seen = {(normalize(r.source), normalize(r.target), r.relation) for r in relations}
        for relation in answer.relations:
            source, target = mentions.get(normalize(relation.source)), mentions.get(normalize(relation.target))
            if source is None or target is None or source.name == target.name or relation.relation == CO_OCCURS:
                continue
            triple = (normalize(source.name), normalize(target.name), relation.relation)
            if triple in seen:
                continue
            seen.add(triple)
            relations.append(
                EntityRelation(
                    source=source.name,
                    target=target.name,
                    relation=relation.relation,
                    confidence=min(relation.confidence, MAX_LLM_CONFIDENCE),
                )
            )
        return Extraction(mentions=list(mentions.values()), relations=relations, method="llm")


__all__ = ["ENTITY_TYPES", "LLMEntityExtractor", "SupportsACall", "parse_answer"]
