"""The labelled set of deep reports for the quality check (issue 21): sound reports from real deep runs over the demo
corpus (``data/quality_reports.json``, built by ``benchmarks/deep_quality_build.py``) and flawed ones made from them by
named transformations, one flaw each. Shared by tests/deep/test_quality_check.py and benchmarks/deep_quality.py.

A run is *sound* as built, reduced to what a sound report is by definition: its plan is the sub-questions it
answered, each from at least two sources (an unanswered item or a one-source section is one of the flaws below, so a
sound report has neither). Runs without such a section are left out.

Split: ``tune`` (thresholds of the check were chosen on these) and ``report`` (measured only), by the run's position
in the file (even: tune, odd: report), so a run and its flawed copies stay on one side.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from researchcrew.contracts import AnswerSection, Citation, CitationStats, Claim, ContextChunk, FinalResponse
from researchcrew.contracts.deep import FindingKind, ResearchPlan
from researchcrew.deep._quality import sections_by_position
from researchcrew.pipeline.synthesize._citations import citation_for
from researchcrew.text.terms import STOP_WORDS, query_topics

DATA = Path(__file__).parent / "data" / "quality_reports.json"
Split = Literal["tune", "report"]
EARLIER_ANSWER = (
    "_Extractive answer: the sentences below are quoted from the sources cited; no language model wrote them._\n"
    "- {text} [1]"
)


@dataclass
class Case:
    """One labelled report."""

    name: str
    split: Split
    question: str
    plan: ResearchPlan
    response: FinalResponse
    evidence: list[ContextChunk]
    flaw: str | None  # the transformation's name; None: sound
    kind: FindingKind | None  # the finding kind the flaw is

    @property
    def flawed(self) -> bool:
        return self.flaw is not None


@dataclass
class Run:
    question: str
    plan: ResearchPlan
    response: FinalResponse
    evidence: list[ContextChunk]


def _sources(section_claims: list[Claim], citations: dict[int, Citation]) -> set[str]:
    return {
        (citations[n].source_id or citations[n].title or citations[n].chunk_id)
        for claim in section_claims
        for n in claim.citations
        if n in citations
    }


def _sound(raw: dict) -> Run | None:  # type: ignore[type-arg]
    plan = ResearchPlan.model_validate(raw["plan"])
    response = FinalResponse.model_validate(raw["response"])
    evidence = [ContextChunk.model_validate(chunk) for chunk in raw["evidence"]]
    citations = {citation.number: citation for citation in response.citations}
    grouped, _ = sections_by_position(response.sections)
    keep = [
        position
        for position in range(1, len(plan.items) + 1)
        if len(_sources([c for s in grouped.get(position, []) for c in s.claims], citations)) >= 2
    ]
    if not keep:
        return None
    renumber = {old: new for new, old in enumerate(keep, start=1)}
    sections: list[AnswerSection] = []
    for old in keep:
        for section in grouped[old]:
            heading = section.heading
            if heading:
                heading = re.sub(r"^\d{1,2}(?=[. ])", str(renumber[old]), heading)
            sections.append(section.model_copy(update={"heading": heading}))
    items = [plan.items[old - 1] for old in keep]
    valid = sum(len(claim.citations) for section in sections for claim in section.claims)
    return Run(
        question=raw["question"],
        plan=plan.model_copy(update={"items": items}),
        response=response.model_copy(update={"sections": sections, "citation_stats": CitationStats(valid=valid)}),
        evidence=evidence,
    )


@cache
def runs() -> tuple[Run, ...]:
    raw = json.loads(DATA.read_text())["runs"]
    return tuple(run for run in (_sound(item) for item in raw) if run is not None)


# ---- flaw transformations: each takes the run, the run's target plan position, and a donor run -----------------
def _with_sections(run: Run, sections: list[AnswerSection], **update: object) -> FinalResponse:
    return run.response.model_copy(update={"sections": sections, **update})


def _map_section(run: Run, position: int, change: Callable[[AnswerSection], AnswerSection | None]) -> FinalResponse:
    grouped, _ = sections_by_position(run.response.sections)
    targets = {id(section) for section in grouped[position]}
    sections = []
    for section in run.response.sections:
        changed = change(section) if id(section) in targets else section
        if changed is not None:
            sections.append(changed)
    return _with_sections(run, sections)


def _claims(section: AnswerSection, change: Callable[[Claim], Claim]) -> AnswerSection:
    return section.model_copy(update={"claims": [change(claim) for claim in section.claims]})


def off_topic(run: Run, position: int, donor: Run) -> tuple[FinalResponse, list[ContextChunk]]:
    """The section's statements are replaced by another report's section on another question (with its sources)."""
    donor_grouped, _ = sections_by_position(donor.response.sections)
    donor_claims = [claim for section in donor_grouped[1] for claim in section.claims]
    donor_citations = {citation.number: citation for citation in donor.response.citations}
    start = max((citation.number for citation in run.response.citations), default=0)
    numbers: dict[int, int] = {}
    citations = list(run.response.citations)
    for claim in donor_claims:
        for n in claim.citations:
            if n in donor_citations and n not in numbers:
                numbers[n] = start + len(numbers) + 1
                citations.append(donor_citations[n].model_copy(update={"number": numbers[n]}))
    moved = [
        claim.model_copy(update={"citations": [numbers[n] for n in claim.citations if n in numbers]})
        for claim in donor_claims
    ]
    first = True

    def change(section: AnswerSection) -> AnswerSection | None:
        nonlocal first
        if not first:
            return None
        first = False
        return section.model_copy(update={"claims": moved})

    response = _map_section(run, position, change).model_copy(update={"citations": citations})
    return response, [*run.evidence, *donor.evidence]


def garbled_keywords(run: Run, position: int, donor: Run) -> tuple[FinalResponse, list[ContextChunk]]:
    """The section's statements lose their function words (the "sources disagree: answer extractive ..." look)."""

    def salad(claim: Claim) -> Claim:
        words = [word for word in claim.text.split() if word.lower().strip(".,;:") not in STOP_WORDS]
        return claim.model_copy(update={"text": " ".join(words)})

    return _map_section(run, position, lambda section: _claims(section, salad)), run.evidence


def garbled_characters(run: Run, position: int, donor: Run) -> tuple[FinalResponse, list[ContextChunk]]:
    """The section's statements come out with broken encoding and words run together."""

    def broken(claim: Claim) -> Claim:
        words = claim.text.split()
        half = len(words) // 2
        text = " ".join(words[:half]).replace("e", "Ã©") + " " + "".join(words[half:])
        return claim.model_copy(update={"text": text})

    return _map_section(run, position, lambda section: _claims(section, broken)), run.evidence


def repeated(run: Run, position: int, donor: Run) -> tuple[FinalResponse, list[ContextChunk]]:
    """The section repeats a statement of another section (or of its own, doubled)."""
    grouped, _ = sections_by_position(run.response.sections)
    other = 1 if position != 1 else min(2, len(grouped))
    copied = grouped[other][0].claims[0]

    def add(section: AnswerSection) -> AnswerSection:
        if section is not grouped[position][0]:
            return section
        return section.model_copy(update={"claims": [*section.claims, copied]})

    return _map_section(run, position, add), run.evidence


def repeated_within(run: Run, position: int, donor: Run) -> tuple[FinalResponse, list[ContextChunk]]:
    """Each statement of the section says its words twice over (a stuttering writer)."""

    def doubled(claim: Claim) -> Claim:
        words = claim.text.rstrip(".").split()
        return claim.model_copy(update={"text": " ".join(words + words) + "."})

    return _map_section(run, position, lambda section: _claims(section, doubled)), run.evidence


def uncited_stripped(run: Run, position: int, donor: Run) -> tuple[FinalResponse, list[ContextChunk]]:
    """The section's statements lose their citations."""
    return (
        _map_section(run, position, lambda section: _claims(section, lambda c: c.model_copy(update={"citations": []}))),
        run.evidence,
    )


def uncited_wrong(run: Run, position: int, donor: Run) -> tuple[FinalResponse, list[ContextChunk]]:
    """The section's statements cite another section's sources (which do not say them)."""
    grouped, _ = sections_by_position(run.response.sections)
    own = {n for section in grouped[position] for claim in section.claims for n in claim.citations}
    other = 1 if position != 1 else min(2, len(grouped))
    foreign = [n for section in grouped[other] for claim in section.claims for n in claim.citations if n not in own]
    wrong = foreign[:1] or [max(own) + 100]
    return (
        _map_section(run, position, lambda s: _claims(s, lambda c: c.model_copy(update={"citations": wrong}))),
        run.evidence,
    )


def single_source(run: Run, position: int, donor: Run) -> tuple[FinalResponse, list[ContextChunk]]:
    """The section keeps only the statements of its first source."""
    grouped, _ = sections_by_position(run.response.sections)
    first = next(n for section in grouped[position] for claim in section.claims for n in claim.citations)

    def only(section: AnswerSection) -> AnswerSection:
        claims = [
            claim.model_copy(update={"citations": [first]}) for claim in section.claims if first in claim.citations
        ]
        return section.model_copy(update={"claims": claims})

    response = _map_section(run, position, only)
    grouped, _ = sections_by_position(response.sections)
    if not any(section.claims for section in grouped.get(position, [])):  # keep the heading's section non-empty
        raise ValueError("no statement of the first source")
    return response, run.evidence


def unanswered(run: Run, position: int, donor: Run) -> tuple[FinalResponse, list[ContextChunk]]:
    """The section is gone; its plan item stays."""
    return _map_section(run, position, lambda section: None), run.evidence


def _echo_chunk(run: Run, text: str) -> ContextChunk:
    return ContextChunk(
        chunk_id="memory:earlier-answer",
        source_type="memory",
        content=EARLIER_ANSWER.format(text=text),
        semantic_relevance=0.8,
        title=f"Earlier answer: {run.question}",
        source_id="earlier-answer",
        metadata={"recalled_as": "earlier_question", "speaker": "assistant"},
    )


def memory_echo(run: Run, position: int, donor: Run) -> tuple[FinalResponse, list[ContextChunk]]:
    """The section quotes the assistant's earlier answer, recalled from memory, as a cited statement."""
    grouped, _ = sections_by_position(run.response.sections)
    said = grouped[position][0].claims[0].text
    chunk = _echo_chunk(run, said)
    number = max(citation.number for citation in run.response.citations) + 1
    echo = Claim(text=f"As answered before, {said[0].lower()}{said[1:]}", citations=[number])

    def add(section: AnswerSection) -> AnswerSection:
        if section is not grouped[position][0]:
            return section
        return section.model_copy(update={"claims": [*section.claims, echo]})

    response = _map_section(run, position, add)
    return response.model_copy(update={"citations": [*run.response.citations, citation_for(number, chunk)]}), [
        *run.evidence,
        chunk,
    ]


def memory_echo_across(run: Run, position: int, donor: Run) -> tuple[FinalResponse, list[ContextChunk]]:
    """An "Across sub-questions: sources disagree" section set against the assistant's earlier answer (what users
    saw): the memory side's words garbled into its heading, its statement quoted from the earlier answer."""
    grouped, _ = sections_by_position(run.response.sections)
    claim = grouped[position][0].claims[0]
    chunk = _echo_chunk(run, claim.text)
    number = max(citation.number for citation in run.response.citations) + 1
    sections = [
        *run.response.sections,
        AnswerSection(
            heading="Across sub-questions: sources disagree: answer extractive sentences below quoted sources cited "
            "language model wrote",
            perspective=f"Earlier answer [{number}] (memory)",
            claims=[Claim(text=f"Extractive answer: the sentences below are quoted. {claim.text}", citations=[number])],
        ),
        AnswerSection(heading="", perspective="A source (rag)", claims=[claim]),
    ]
    response = _with_sections(run, sections, citations=[*run.response.citations, citation_for(number, chunk)])
    return response, [*run.evidence, chunk]


FLAWS: dict[str, tuple[FindingKind, Callable[[Run, int, Run], tuple[FinalResponse, list[ContextChunk]]]]] = {
    "off_topic": ("off_topic", off_topic),
    "garbled_keywords": ("garbled", garbled_keywords),
    "garbled_characters": ("garbled", garbled_characters),
    "repeated": ("repeated", repeated),
    "repeated_within": ("repeated", repeated_within),
    "uncited_stripped": ("uncited", uncited_stripped),
    "uncited_wrong": ("uncited", uncited_wrong),
    "single_source": ("single_source", single_source),
    "unanswered": ("unanswered", unanswered),
    "memory_echo": ("memory_echo", memory_echo),
    "memory_echo_across": ("memory_echo", memory_echo_across),
}


def _donor(all_runs: tuple[Run, ...], index: int) -> Run:
    """The run on the most different question (fewest shared topic words; the nearest such run after this one)."""
    topics = set(query_topics(all_runs[index].question))
    others = [(index + step) % len(all_runs) for step in range(1, len(all_runs))]
    return all_runs[min(others, key=lambda other: len(topics & set(query_topics(all_runs[other].question))))]


def cases(split: Split | None = None) -> list[Case]:
    """Every labelled case (of one split): each sound run, and each flaw applied to it at a position chosen by
    the run's index (the donor of an off-topic section: the run half the set away)."""
    all_runs = runs()
    found: list[Case] = []
    for index, run in enumerate(all_runs):
        side: Split = "tune" if index % 2 == 0 else "report"
        if split is not None and side != split:
            continue
        found.append(Case(f"{index}:sound", side, run.question, run.plan, run.response, run.evidence, None, None))
        donor = _donor(all_runs, index)
        for offset, (name, (kind, transform)) in enumerate(FLAWS.items()):
            position = 1 + (index + offset) % len(run.plan.items)
            try:
                response, evidence = transform(run, position, donor)
            except ValueError:
                continue
            found.append(
                Case(f"{index}:{name}@{position}", side, run.question, run.plan, response, evidence, name, kind)
            )
    return found
