"""The Synthesizer: a cited, structured answer from the filtered evidence (seed 003, "Synthesizer Agent").

With an LLM, one crewAI Agent + Task writes the answer: no tools, no delegation, crewAI memory off, verbose off
(no console panels), tracing off, one iteration, no agent-level retries. The Task asks for ``AnswerDraft`` as its
``response_model``, so providers with native structured output (OpenAI and OpenAI-compatible servers) return
schema-valid JSON; ``output_pydantic`` is deliberately not used, because crewAI would then make further, uncounted
LLM calls to convert an unreadable reply. The reply is parsed here instead, by the one reply parser
(``llm.replies``: JSON, JSON inside prose or code fences), with at most one repair call. Whatever the model wrote,
citations are then validated in code.

The answer falls back to the extractive synthesizer, with a caveat saying why, when the model fails, times out,
returns something unreadable after the repair, or cites nothing that exists. Without an LLM the extractive
synthesizer answers directly and crewAI is never imported.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import BaseModel, ValidationError

from researchcrew.contracts.evaluator import ScoredChunk
from researchcrew.contracts.synthesizer import AnswerDraft, SynthesizerInput, SynthesizerOutput
from researchcrew.llm import build_llm, quiet_crewai
from researchcrew.llm.replies import ReplyParseError, parse_reply
from researchcrew.pipeline.progress import current_reporter
from researchcrew.pipeline.synthesize import prompts
from researchcrew.pipeline.synthesize._citations import ValidationMode
from researchcrew.pipeline.synthesize._streaming import streaming_task
from researchcrew.pipeline.synthesize.extractive import ExtractiveSynthesizer, perspective_sections
from researchcrew.pipeline.synthesize.finalize import empty_output, finalize, relevant_contradictions

if TYPE_CHECKING:
    from crewai import BaseLLM

    from researchcrew.settings import Settings

logger = logging.getLogger(__name__)


class DraftParseError(ReplyParseError):
    """The model's reply holds no readable ``AnswerDraft``."""


def _has_statements(draft: AnswerDraft) -> str | None:
    return None if any(section.claims for section in draft.sections) else "the JSON object has no statements"


def parse_draft(reply: str | BaseModel | dict[str, Any]) -> AnswerDraft:
    """The ``AnswerDraft`` in a model reply (``llm.replies.parse_reply``: a model object, a JSON object or list of
    sections, or JSON inside prose or code fences) with at least one statement. Raises ``DraftParseError`` naming
    the problem when there is none."""
    try:
        return parse_reply(reply, AnswerDraft, list_field="sections", check=_has_statements)
    except ReplyParseError as exc:
        raise DraftParseError(str(exc)) from exc


def _raw_reply(exc: ValidationError) -> str | None:
    """The model's text inside a failed structured-output parse: providers with native structured output parse the
    reply themselves (the ``openai`` SDK's ``parse``) and raise when it is not the schema's JSON. The reply is
    still the model's answer — maybe JSON inside prose — so it goes to our own parser instead of being lost."""
    if exc.title != AnswerDraft.__name__:
        return None
    for error in exc.errors():
        if isinstance(error.get("input"), str):
            return str(error["input"])
    return None


async def _reply_or_raw(call: Awaitable[Any]) -> str | BaseModel:
    try:
        reply: str | BaseModel = await call
    except ValidationError as exc:
        raw = _raw_reply(exc)
        if raw is None:
            raise
        logger.info("the provider could not parse the reply as AnswerDraft; parsing it here")
        return raw
    return reply


def with_perspectives(draft: AnswerDraft, request: SynthesizerInput, evidence: Sequence[ScoredChunk]) -> AnswerDraft:
    """The draft, plus quoted perspective sections for every disagreement it does not already present with
    both sides cited — so a disagreement is always shown side by side, whatever the model chose to write."""
    numbers = {scored.chunk.chunk_id: n for n, scored in enumerate(evidence, start=1)}
    shown = {n for s in draft.sections if s.perspective for claim in s.claims for n in claim.citations}
    missing = [
        record
        for record in relevant_contradictions(request.contradictions, evidence)
        if not (numbers[record.chunk_id_a] in shown and numbers[record.chunk_id_b] in shown)
    ]
    if not missing:
        return draft
    return AnswerDraft(sections=[*draft.sections, *perspective_sections(missing, evidence)])


class Synthesizer:
    """Writes the answer with the LLM through crewAI, or extractively when ``llm`` is None.

    ``timeout_s`` bounds the whole LLM part (generation and the repair call); on expiry the answer is extractive.
    ``stream_when_watched``: when the run reports progress, the model streams and its text is reported as written.
    ``citation_mode`` decides what happens to a claim without a valid citation: ``remove`` (default) or ``flag``.
    """

    def __init__(
        self,
        llm: BaseLLM | None,
        *,
        timeout_s: float = 45.0,
        max_evidence: int = 20,
        max_chars_per_chunk: int = 2000,
        citation_mode: ValidationMode = "remove",
        structured_output: bool = True,
        stream_when_watched: bool = True,
    ) -> None:
        self.llm = llm
        self.structured_output = structured_output
        self.stream_when_watched = stream_when_watched
        self.timeout_s = timeout_s
        self.max_evidence = max_evidence
        self.max_chars_per_chunk = max_chars_per_chunk
        self.citation_mode: ValidationMode = citation_mode
        self.extractive = ExtractiveSynthesizer(max_evidence=max_evidence)

    @classmethod
    def from_settings(
        cls, settings: Settings, llm: BaseLLM | Literal["from settings"] | None = "from settings"
    ) -> Synthesizer:
        """The Synthesizer the settings describe, with time for one generation and one repair. ``llm``: the model
        to write with (None: extractive); by default the one ``settings.llm`` builds. ``assemble`` builds it so."""
        return cls(
            build_llm(settings.llm) if llm == "from settings" else llm,
            timeout_s=2 * settings.llm.timeout_s,
            structured_output=settings.llm.structured_output,
            stream_when_watched=settings.llm.stream,
        )

    async def run(self, request: SynthesizerInput) -> SynthesizerOutput:
        started = time.perf_counter()
        evidence = request.filtered_context.chunks[: self.max_evidence]
        if not evidence:
            return empty_output(request, started)
        if self.llm is None:
            return self.extractive.answer(request)
        deadline = asyncio.timeout(self.timeout_s)
        try:
            async with deadline:
                draft = await self._generate(request, evidence)
        except TimeoutError as exc:
            if not deadline.expired():  # the provider's own timeout, not ours
                logger.warning("the LLM call timed out: %s; answering extractively", exc)
                return self._fallback(request, f"the language model call timed out ({exc})")
            logger.warning("the LLM did not answer within %.1f s; answering extractively", self.timeout_s)
            return self._fallback(request, f"the language model did not answer within {self.timeout_s:g} s")
        except DraftParseError as exc:
            logger.warning("the LLM reply could not be parsed even after a repair request: %s", exc)
            return self._fallback(request, f"its reply was not in the required format ({exc})")
        except Exception as exc:  # the one guard around crewAI and the provider SDKs; their errors are open-ended
            logger.warning("the LLM call failed; answering extractively", exc_info=True)
            return self._fallback(request, f"the language model call failed ({type(exc).__name__}: {exc})")
        draft = with_perspectives(draft, request, evidence)
        output = finalize(
            request, evidence, draft, answer_kind="generated", caveats=[], started=started, mode=self.citation_mode
        )
        if output.final_response.sections:
            return output
        stats = output.final_response.citation_stats
        fallback = self._fallback(
            request, f"none of its {stats.claims_removed} statement(s) cited evidence that was provided"
        )
        merged = fallback.final_response.citation_stats.model_copy(
            update={
                "removed": fallback.final_response.citation_stats.removed + stats.removed,
                "claims_removed": fallback.final_response.citation_stats.claims_removed + stats.claims_removed,
            }
        )
        fallback.final_response.citation_stats = merged
        return fallback

    def _fallback(self, request: SynthesizerInput, reason: str) -> SynthesizerOutput:
        caveat = f"The language model's answer could not be used: {reason}. This answer is extractive instead."
        return self.extractive.answer(request, caveats=[caveat])

    async def _generate(self, request: SynthesizerInput, evidence: Sequence[ScoredChunk]) -> AnswerDraft:
        reply = await _reply_or_raw(self._kickoff(request, evidence))
        try:
            return parse_draft(reply)
        except DraftParseError as exc:
            logger.info("LLM reply unreadable (%s); asking once for a repair", exc)
            if self.llm is None:  # unreachable: _generate only runs with an LLM
                raise
            raw = reply.model_dump_json() if isinstance(reply, BaseModel) else str(reply)
            messages = prompts.repair_messages(prompts.system_text(), raw, str(exc), len(evidence))
            schema = AnswerDraft if self.structured_output else None
            # The blocking ``call`` in a worker thread, like crewAI's own executor: provider SDKs' async clients
            # are bound to the event loop that created them, and this LLM object may outlive that loop.
            call = asyncio.to_thread(self.llm.call, cast(Any, messages), response_model=schema)
            repaired = await _reply_or_raw(call)
            return parse_draft(repaired)

    async def _kickoff(self, request: SynthesizerInput, evidence: Sequence[ScoredChunk]) -> str | BaseModel:
        """One crewAI Agent + Task through ``Crew.akickoff``; returns the Task's raw reply."""
        quiet_crewai()
        from crewai import Agent, Crew, Process, Task
        from crewai.events.utils.console_formatter import (
            set_suppress_console_output,
            should_suppress_console_output,
        )

        agent = Agent(
            role=prompts.ROLE,
            goal=prompts.GOAL,
            backstory=prompts.RULES,
            llm=self.llm,
            tools=[],
            allow_delegation=False,
            verbose=False,
            memory=False,
            cache=False,
            max_iter=1,
            max_retry_limit=0,
            respect_context_window=False,
        )
        task = Task(
            description=prompts.task_description(request, evidence, max_chars_per_chunk=self.max_chars_per_chunk),
            expected_output=prompts.EXPECTED_OUTPUT,
            agent=agent,
            response_model=AnswerDraft if self.structured_output else None,
        )
        crew = Crew(
            agents=[agent], tasks=[task], process=Process.sequential, verbose=False, memory=False, tracing=False
        )
        # verbose=False silences the panels; this also silences crewAI's event-bus warnings printed on failures.
        previous = should_suppress_console_output()
        set_suppress_console_output(True)
        reporter = current_reporter() if self.stream_when_watched else None
        try:
            with streaming_task(str(task.id), self.llm, reporter):  # token by token, when someone watches
                result = await crew.akickoff()
        finally:
            set_suppress_console_output(previous)
        outputs = getattr(result, "tasks_output", None) or []
        reply: str | BaseModel = outputs[0].pydantic or outputs[0].raw if outputs else str(getattr(result, "raw", ""))
        return reply
