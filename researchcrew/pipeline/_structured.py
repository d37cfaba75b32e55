"""The structured stage (seed 004, issue 22): route a question, and on the structured or hybrid route answer it from
annotations with a table of cited rows.

Route rules (offline; the seed's "rule-based dispatch keyed by intent signals"):

* the annotation store failed → ``long_text`` (normal retrieval), the failure in the reason;
* intent ``conceptual`` → ``long_text``, fallback ``hybrid``;
* enumeration / numeric lookup / aggregate whose fields the index holds (a label, an item term, or a unit that
  picks the fields) → ``structured``, fallbacks ``hybrid``, ``long_text``;
* the same intents with that coverage and a part only passages answer ("... and what did they find?") → ``hybrid``
  (the table answers the first part, the passages the rest), fallback ``long_text``;
* the same intents without that coverage → ``hybrid``, fallback ``long_text``.

The long-text route searches the summaries of long documents first, then the passages of the matching sections
(``pipeline/_long_text.py``); its passages join the normal retrieval's. When no summary matches, ``retrieval`` is
added to ``tried``: plain retrieval answered alone.

With an LLM, one short call with the seed's route prompt answers ``{"route", "fallbacks", "reason"}``; a reply that
does not validate, or a failure, leaves the rules' decision. A route that finds no row falls back in order (the
structured route's subject condition is relaxed first, inside the search), recorded in ``RouteDecision.tried``.
An ambiguous field (a unit that several fields share, none named) returns the candidate fields as
``clarification`` instead of guessing.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from researchcrew.contracts.chunks import ContextChunk
from researchcrew.contracts.tables import (
    AnswerTable,
    RouteDecision,
    RouteName,
    StructuredOutcome,
    StructuredRequest,
    TableRow,
)
from researchcrew.errors import KnowledgeBaseError, ModelUnavailableError
from researchcrew.knowledge.access import CollectionAccess, ImplicitAccess
from researchcrew.knowledge.annotations import (
    GENERIC_WORDS,
    IMPLIED_LABELS,
    AnnotationIndex,
    ParsedQuestion,
    SearchResult,
    annotations_aggregate,
    annotations_search,
    conversions,
    describe_filters,
    doubts,
    index_for,
    parse_question,
    passage_evidence,
    resolve_labels,
    table_of,
    verified,
)
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.llm.fence import block
from researchcrew.llm.replies import ReplyParseError, ask_for
from researchcrew.pipeline._long_text import LongTextSearch, long_text_search
from researchcrew.text.terms import stem, term_words

logger = logging.getLogger(__name__)

ROUTE_PROMPT_TIMEOUT_S = 5.0
_SYSTEM = (
    "You are a retrieval router. Choose the best plan for the small RAG system: structured (annotations: facts and "
    "table rows), hybrid (annotations + text search) or long_text (summaries and passages). "
    'Respond with JSON: {"route": "...", "fallbacks": ["...", "..."], "reason": "..."}'
)


class _RouteReply(BaseModel):
    route: Literal["structured", "hybrid", "long_text"]
    fallbacks: list[Literal["structured", "hybrid", "long_text"]] = Field(default_factory=list, max_length=3)
    reason: str = Field(default="", max_length=1_000)


@dataclass
class Coverage:
    """What the index holds for a question: annotations at all, and whether its fields are among them."""

    annotations: int
    fields: bool
    healthy: bool = True
    problem: str = ""


def unexplained_words(
    question: ParsedQuestion,
    known: dict[str, int],
    labels: list[str],
    index: AnnotationIndex,
    collections: list[str],
) -> set[str]:
    """The question's content words that are no annotated field, item, document or generic word: a field the
    annotations do not hold ("the inverter *efficiency* for each model"), so coverage is uncertain (hybrid)."""
    words = {stem(word) for word in question.words} - GENERIC_WORDS
    words -= {stem(word) for key in known for word in term_words(key)}
    words -= {stem(word) for item in question.items for word in term_words(item)}
    words -= {stem(word) for word in IMPLIED_LABELS}
    words -= {stem(word) for label in labels for word in term_words(label)}
    if words:
        words -= index.subject_words(collections)
    return words


def rule_route(question: ParsedQuestion, coverage: Coverage) -> RouteDecision:
    """The rules' route for a question (see the module docstring)."""
    intent = question.intent
    if not coverage.healthy:
        return RouteDecision(
            route="long_text", intent=intent, reason=f"the annotation store is unavailable ({coverage.problem})"
        )
    if intent == "conceptual":
        return RouteDecision(
            route="long_text", intent=intent, fallbacks=["hybrid"], reason="a conceptual question: passages answer it"
        )
    if coverage.annotations and coverage.fields and question.text_part:
        return RouteDecision(
            route="hybrid",
            intent=intent,
            fallbacks=["long_text"],
            reason=_clip(
                f"{intent.replace('_', ' ')} over annotated fields, and “{question.text_part}” is for passages"
            ),
        )
    if coverage.annotations and coverage.fields:
        return RouteDecision(
            route="structured",
            intent=intent,
            fallbacks=["hybrid", "long_text"],
            reason=f"{intent.replace('_', ' ')} over fields the annotations hold",
        )
    reason = "no annotations in the collections searched" if not coverage.annotations else "fields not annotated"
    return RouteDecision(route="hybrid", intent=intent, fallbacks=["long_text"], reason=f"{intent}: {reason}")


class AnnotationStage:
    """``StructuredStage`` over an ``AnnotationIndex`` (see the module docstring)."""

    def __init__(
        self,
        index: AnnotationIndex,
        *,
        access: CollectionAccess | None = None,
        llm: Any = None,
        route_timeout_s: float = ROUTE_PROMPT_TIMEOUT_S,
        long_text: LongTextSearch | None = None,
    ) -> None:
        self.index = index
        self.access = access or ImplicitAccess()
        self.llm = llm
        self.route_timeout_s = route_timeout_s
        self.long_text = long_text  # summaries first, then their sections (None: the long-text route is retrieval)

    async def _collections(self, request: StructuredRequest) -> list[str]:
        readable = await self.access.readable(request.user_id)
        if request.collections is None:
            return readable
        return [name for name in request.collections if name in readable]

    async def run(self, request: StructuredRequest, /) -> StructuredOutcome:
        question = parse_question(request.question)
        try:
            async with asyncio.timeout(request.deadline_s):
                collections = await self._collections(request)
                return await asyncio.to_thread(self._run, request, question, collections)
        except (KnowledgeBaseError, TimeoutError) as error:
            problem = "timed out" if isinstance(error, TimeoutError) else str(error)
            logger.warning("structured stage: %s", problem)
            return StructuredOutcome(route=rule_route(question, Coverage(0, False, False, problem[:300])))

    def _coverage(self, question: ParsedQuestion, collections: list[str]) -> Coverage:
        if question.intent == "conceptual" and self.llm is None:
            # The rules send a conceptual question to the long-text route whatever the annotations hold: no
            # annotation is read for it (issue 20 item 7). With a model routing, it may weigh the coverage.
            return Coverage(0, False)
        count = self.index.count(collections)
        if not count:
            return Coverage(0, False)
        known = self.index.labels(collections)
        labels, _ = resolve_labels(question, sorted(known), self.index)
        asked = bool(labels or question.items or question.numeric or question.aggregate == "count")
        return Coverage(count, asked and not unexplained_words(question, known, labels, self.index, collections))

    def _run(self, request: StructuredRequest, question: ParsedQuestion, collections: list[str]) -> StructuredOutcome:
        coverage = self._coverage(question, collections)
        decision = self._decide(request, question, coverage)
        tried: list[RouteName] = []
        outcome: StructuredOutcome | None = None
        for route in [decision.route, *decision.fallbacks]:
            tried.append(route)
            if route == "long_text":
                outcome = self._long_text(request, decision, collections, tried)
                break  # its passages join the pipeline's normal retrieval
            result = annotations_search(self.index, question, collections)
            if result.ambiguous:
                return StructuredOutcome(
                    route=decision.model_copy(
                        update={
                            "tried": tried,
                            "reason": _clip(f"{decision.reason}; which field: {', '.join(result.ambiguous)}?"),
                        }
                    ),
                    clarification=result.ambiguous,
                )
            if result.matches:
                outcome = self._outcome(request, question, result, decision, collections)
                break
        ran = [name for name in tried if name != "retrieval"]
        final = decision.model_copy(update={"tried": tried, "route": ran[-1] if ran else decision.route})
        if outcome is None:
            return StructuredOutcome(route=final)
        return outcome.model_copy(update={"route": final.model_copy(update={"reason": outcome.route.reason})})

    def _long_text(
        self, request: StructuredRequest, decision: RouteDecision, collections: list[str], tried: list[RouteName]
    ) -> StructuredOutcome | None:
        """The long-text route: the matching sections' passages (``pipeline/_long_text.py``); ``retrieval`` is
        added to ``tried`` when no summary matched and plain retrieval answers alone."""
        if self.long_text is None:
            return None
        try:
            found = self.long_text.run(request.question, collections)
        except (KnowledgeBaseError, ModelUnavailableError) as error:
            logger.warning("long-text route: summaries unavailable, plain retrieval answers: %s", error)
            tried.append("retrieval")
            reason = _clip(f"{decision.reason}; summaries unavailable ({error}): plain retrieval")
            return StructuredOutcome(route=decision.model_copy(update={"reason": reason}))
        reason = _clip(f"{decision.reason}; {found.describe()}")
        if not found.chunks:
            tried.append("retrieval")
            return StructuredOutcome(route=decision.model_copy(update={"reason": reason}))
        return StructuredOutcome(route=decision.model_copy(update={"reason": reason}), evidence=found.chunks)

    def _decide(self, request: StructuredRequest, question: ParsedQuestion, coverage: Coverage) -> RouteDecision:
        rules = rule_route(question, coverage)
        # The model is asked only when the annotations hold the question's fields: otherwise no route but the text
        # one can answer, and a call per question (latency, cost) would decide nothing.
        if self.llm is None or not coverage.healthy or not coverage.fields:
            return rules
        messages = [
            {"role": "system", "content": _SYSTEM},
            {
                "role": "user",
                "content": (
                    f"{block('QUESTION', request.question)}\nDetected intent: {question.intent}\n"
                    f"Annotation coverage: {coverage.annotations} annotations; question's fields "
                    f"{'covered' if coverage.fields else 'not covered'}\nTool health: annotations ok"
                ),
            },
        ]
        try:
            reply = asyncio.run(ask_for(self.llm, messages, _RouteReply, timeout_s=self.route_timeout_s))
        except (ReplyParseError, TimeoutError) as error:
            logger.info("route prompt unusable, rules decide: %s", error)
            return rules
        except Exception as error:  # the provider's own failure: the rules decide
            logger.warning("route prompt failed, rules decide: %s", error)
            return rules
        fallbacks = [route for route in dict.fromkeys(reply.fallbacks) if route != reply.route]
        return RouteDecision(
            route=reply.route,
            intent=question.intent,
            fallbacks=fallbacks,
            reason=_clip(reply.reason or rules.reason),
            decided_by="llm",
        )

    def _outcome(
        self,
        request: StructuredRequest,
        question: ParsedQuestion,
        result: SearchResult,
        decision: RouteDecision,
        collections: list[str],
    ) -> StructuredOutcome:
        columns, rows, notes = table_of(result)
        citations: dict[tuple[str, str], int] = {}
        evidence: list[ContextChunk] = []
        numbered: list[TableRow] = []
        for item, row in zip(result.matches, rows, strict=True):
            key = (item.collection, item.annotation.chunk_id)
            if key not in citations:
                citations[key] = len(citations) + 1
                evidence.append(passage_evidence(result.passages[key], item.collection))
            numbered.append(row.model_copy(update={"citation": citations[key]}))
        aggregates = []
        if question.aggregate is not None:
            label = result.labels[0] if result.labels and question.aggregate != "count" else None
            group = _group_key(question, result, collections, self.index)
            aggregates = annotations_aggregate(result, question.aggregate, label=label, group_by=group)
        converted, examples = conversions(result)
        table = AnswerTable(
            title=_clip(request.question, 500),
            columns=columns,
            rows=numbered[: request.page_size],
            total_rows=len(numbered),
            aggregates=aggregates,
            notes=[*result.notes, *notes, *self.index.notes(collections)][:50],
            filters=[_clip(text, 300) for text in describe_filters(question, result)],
            conversions=[_clip(text, 300) for text in examples],
            converted=converted,
        )
        return StructuredOutcome(
            route=decision,
            table=table,
            all_rows=numbered,
            evidence=evidence,
            verified_rows=verified(result),
            doubts=doubts(result),
        )


def annotation_stage(
    kb: KnowledgeBase, *, access: CollectionAccess | None = None, llm: Any = None
) -> AnnotationStage | None:
    """The structured stage as ``kb``'s settings ask (``settings.structured``): None when annotations are off; the
    LLM routes only when ``llm_routing`` is on and one is given."""
    index = index_for(kb)
    if index is None:
        return None
    structured = kb.settings.structured
    return AnnotationStage(
        index,
        access=access,
        llm=llm if structured.llm_routing else None,
        route_timeout_s=structured.route_timeout_s,
        long_text=long_text_search(kb),
    )


def _group_key(
    question: ParsedQuestion, result: SearchResult, collections: list[str], index: AnnotationIndex
) -> str | None:
    if not question.group_by:
        return None
    known = sorted(index.labels(collections))
    group = parse_question(question.group_by)
    labels, _ = resolve_labels(group, known, None)
    labels = [label for label in labels if label not in result.labels]
    return labels[0] if labels else None


def _clip(text: str, limit: int = 1_000) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = ["AnnotationStage", "Coverage", "annotation_stage", "rule_route"]
