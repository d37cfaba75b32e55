"""The report's quality check (seed 002 phase 4), in code, on four dimensions in [0, 1]:

* **citation correctness** — of the citations written (in the sub-question answers and the report), the share that
  pointed to evidence actually given: the citation check's own counts (``CitationStats``);
* **plan coverage** — the share of approved sub-questions whose section makes at least one cited statement;
* **query relevance** — half: the share of the question's content terms the statements mention; half: per
  answered section, the share of its sub-question's terms it mentions (averaged);
* **structure** — one titled section per answered sub-question, sections in plan order, and no section holding
  most of the report when there are three or more.

Beside the four dimensions, each section is read for what is wrong with it (``findings``, by kind, issue 21;
``report_findings``): off-topic, garbled or repeated text, statements without a citation that supports them, a
section resting on one source, a plan item left unanswered, and memory echoes (the assistant's own earlier answers
quoted as evidence). Each finding lowers ``soundness`` by its kind's severity (multiplied: two findings lower it
more than one; a mild kind, one source, once per report). ``overall`` is the dimensions' weighted mean (0.35, 0.30,
0.20, 0.15) times the soundness: the score shown to the user. A report below the threshold, or with findings that
are not mild, is remediated once (``_remediate``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from itertools import pairwise

from researchcrew.contracts.chunks import MEMORY_SOURCE_TYPE, ContextChunk, is_evidence
from researchcrew.contracts.deep import FindingKind, QualityFinding, QualityScores, ResearchPlan
from researchcrew.contracts.synthesizer import AnswerSection, Citation, FinalResponse
from researchcrew.text.terms import STOP_WORDS, claim_words, query_topics, term_set

WEIGHTS = {"citation_correctness": 0.35, "plan_coverage": 0.30, "query_relevance": 0.20, "structure": 0.15}
MAX_SECTION_SHARE = 0.6
WEAK_SECTION_RELEVANCE = 0.34
_NUMBERED = re.compile(r"^(\d{1,2})\.(?:\d{1,2})?\s")


def section_number(heading: str) -> int | None:
    """The plan position a report heading belongs to ("2. How ..." and "2.3 Methods" → 2), else None."""
    match = _NUMBERED.match(heading)
    return int(match.group(1)) if match else None


def sections_by_position(sections: Sequence[AnswerSection]) -> tuple[dict[int, list[AnswerSection]], list[int]]:
    """Sections grouped by plan position (an untitled section belongs to the one before it), and the order in
    which the positions appear (each run of one position once). Sections outside any position (disagreements
    across sub-questions) are left out."""
    grouped: dict[int, list[AnswerSection]] = defaultdict(list)
    order: list[int] = []
    current: int | None = None
    for section in sections:
        if section.heading:
            current = section_number(section.heading)
            if current is not None and (not order or order[-1] != current):
                order.append(current)
        if current is not None:
            grouped[current].append(section)
    return dict(grouped), order


def _claims_text(sections: Sequence[AnswerSection]) -> str:
    return " ".join(claim.text for section in sections for claim in section.claims if claim.citations)


def _share(wanted: set[str], have: frozenset[str]) -> float:
    return len(wanted & have) / len(wanted) if wanted else 1.0


def score_report(
    response: FinalResponse,
    plan: ResearchPlan,
    question: str,
    *,
    attempt: int,
    threshold: float,
    extra_removed: int = 0,
    evidence: Sequence[ContextChunk] | None = None,
) -> QualityScores:
    """Score a report (see the module docstring). ``extra_removed``: citations the sub-question answers lost to
    the citation check before the report was put together; ``evidence``: the chunks the report numbered (their
    text and metadata sharpen the findings; without them the citations' snippets are read)."""
    issues: list[str] = []
    stats = response.citation_stats
    removed = stats.removed + extra_removed
    written = stats.valid + removed
    citation = stats.valid / written if written else 0.0
    if removed:
        issues.append(
            f"{removed} citation(s) pointed to evidence that was not given and were removed: cite only the numbered "
            "evidence blocks, and only for what they say"
        )

    grouped, order = sections_by_position(response.sections)
    positions = dict(enumerate(plan.items, start=1))
    covered = [position for position in positions if _claims_text(grouped.get(position, []))]
    coverage = len(covered) / len(positions)
    for position, item in positions.items():
        if position not in covered:
            issues.append(
                f"sub-question {position} (“{item.question}”) has no cited statement: answer it from its evidence, "
                "or say what the evidence lacks"
            )

    everything = term_set(_claims_text(response.sections))
    topics = query_topics(question.split("(", 1)[0] if not question.startswith("(") else question)
    missing = [word for stem, word in topics.items() if stem not in everything]
    overall_share = _share(set(topics), everything)
    section_shares: list[float] = []
    for position in covered:
        wanted = set(query_topics(positions[position].question))
        share = _share(wanted, term_set(_claims_text(grouped[position])))
        section_shares.append(share)
        if share < WEAK_SECTION_RELEVANCE:
            issues.append(f"the section of sub-question {position} hardly addresses “{positions[position].question}”")
    relevance = 0.5 * overall_share + 0.5 * (sum(section_shares) / len(section_shares) if section_shares else 0.0)
    if missing and overall_share < 1.0:
        issues.append("the report never mentions " + ", ".join(f"“{word}”" for word in missing) + " from the question")

    titled = sum(1 for position in covered if position in order) / len(covered) if covered else 0.0
    in_order = 1.0 if order == sorted(order) and len(order) == len(set(order)) else 0.0
    claims_per = [
        sum(len(section.claims) for section in grouped[position]) for position in covered if position in grouped
    ]
    balanced = 1.0
    if len(claims_per) >= 3 and max(claims_per) > MAX_SECTION_SHARE * sum(claims_per):
        balanced = 0.0
        issues.append("one section holds most of the report: give each sub-question its share")
    if titled < 1.0:
        issues.append("give every answered sub-question its own section, titled “<number>. <sub-question>”")
    if in_order < 1.0:
        issues.append("put the sections in the order of the plan, one per sub-question")
    structure = (titled + in_order + balanced) / 3 if covered else 0.0

    parts = {
        "citation_correctness": citation,
        "plan_coverage": coverage,
        "query_relevance": relevance,
        "structure": structure,
    }
    findings: list[QualityFinding] = report_findings(response, plan, question, evidence)
    soundness = 1.0
    for finding in findings:
        if finding.kind not in MILD_KINDS:
            soundness *= 1.0 - SEVERITY[finding.kind]
    for kind in MILD_KINDS & {finding.kind for finding in findings}:  # once per report, however many sections
        soundness *= 1.0 - SEVERITY[kind]
    issues += [f"section {finding.section or '(outside the plan)'}: {finding.detail}" for finding in findings]
    overall = sum(WEIGHTS[name] * value for name, value in parts.items()) * soundness
    return QualityScores(
        attempt=attempt,
        **{name: round(value, 4) for name, value in parts.items()},
        soundness=round(soundness, 4),
        overall=round(overall, 4),
        threshold=threshold,
        passed=overall >= threshold,
        issues=issues,
        findings=findings,
    )


# ---- findings, per section (issue 21) ----------------------------------------------------------------------------
SEVERITY: dict[FindingKind, float] = {
    "memory_echo": 0.6,
    "garbled": 0.5,
    "off_topic": 0.45,
    "uncited": 0.4,
    "unanswered": 0.3,
    "repeated": 0.3,
    "single_source": 0.1,
}
MILD_KINDS: frozenset[FindingKind] = frozenset({"single_source"})  # lower the score once per report
# What the assistant's own answers carry (pipeline/synthesize/_rendering.py): a passage with these words is an
# earlier answer, whatever source it came back from.
ECHO_PHRASES = (
    "no language model wrote",
    "quoted from the sources cited",
    "unsupported: no cited evidence",
    "this answer is extractive",
)
ECHO_WORDS = frozenset({"extractive", "sentences", "quoted", "sources", "cited", "language", "model", "wrote"})
MIN_ECHO_WORDS = 5
MIN_SUPPORT = 0.5  # share of a statement's content words its cited passages hold
MIN_FUNCTION_SHARE = 0.08  # English sentences are a third function words; keyword salad has next to none
MIN_GARBLE_WORDS = 8
MAX_WORD_CHARS = 24
REPEAT_WORDS = 6  # a run of this many words (or a third of the statement) said twice in one statement
OFF_TOPIC_SHARE = 0.3  # of the question's and the sub-question's content words, the section mentions fewer
OFF_TOPIC_LOW = 0.45  # ... or fewer than this and well below the other sections:
OFF_TOPIC_RELATIVE = 0.5
_MOJIBAKE = re.compile(r"Ã.|â€|�")


def echoes_an_answer(text: str) -> bool:
    """Whether ``text`` reads like the assistant's own rendered answer (its notice, in full or as keywords)."""
    folded = " ".join(text.casefold().split())
    if any(phrase in folded for phrase in ECHO_PHRASES):
        return True
    return len(ECHO_WORDS & set(claim_words(folded))) >= MIN_ECHO_WORDS


def is_echo(chunk: ContextChunk) -> bool:
    """A passage that is the assistant's earlier answer: memory that is not evidence (``is_evidence``), any memory
    in a research report but the user's own statements, or text carrying the answer's own notice."""
    if not is_evidence(chunk):
        return True
    if chunk.source_type == MEMORY_SOURCE_TYPE and chunk.metadata.get("recalled_as") != "user_statement":
        return True
    return echoes_an_answer(chunk.content)


def _cites_echo(chunk: ContextChunk | None, citation: Citation) -> bool:
    if chunk is not None:
        return is_echo(chunk)
    if citation.source_type == MEMORY_SOURCE_TYPE and not citation.chunk_id.startswith("memory:said:"):
        return True
    return echoes_an_answer(citation.snippet)


def garbled(text: str) -> str | None:
    """Why ``text`` is not a readable sentence, or None."""
    if _MOJIBAKE.search(text):
        return "broken characters"
    words = claim_words(text)
    if not words:
        return "no words"
    if any(len(word) > MAX_WORD_CHARS and not word.isdigit() for word in words):
        return "words run together"
    if len(words) >= MIN_GARBLE_WORDS and sum(word in STOP_WORDS for word in words) / len(words) < MIN_FUNCTION_SHARE:
        return "a string of keywords, not a sentence"
    return None


def _repeats_itself(text: str) -> bool:
    words = claim_words(text)
    size = max(REPEAT_WORDS, len(words) // 3)  # a long sentence may name a phrase twice; a third of it, never
    grams = [tuple(words[i : i + size]) for i in range(len(words) - size + 1)]
    return len(grams) != len(set(grams)) or any(a == b and not a.isdigit() for a, b in pairwise(words))


def _support(text: str, cited: Sequence[str]) -> float:
    wanted = term_set(text)
    if not wanted:
        return 1.0
    have: frozenset[str] = frozenset().union(*(term_set(passage) for passage in cited)) if cited else frozenset()
    return len(wanted & have) / len(wanted)


class _Reader:
    """The report's citations and evidence, looked up by number."""

    def __init__(self, response: FinalResponse, evidence: Sequence[ContextChunk] | None) -> None:
        self.citations = {citation.number: citation for citation in response.citations}
        self.chunks = {chunk.chunk_id: chunk for chunk in evidence or []}

    def passages(self, number: int) -> list[str]:
        citation = self.citations.get(number)
        if citation is None:
            return []
        found = [self.chunks[chunk_id].content for chunk_id in citation.chunk_ids if chunk_id in self.chunks]
        return found or [citation.snippet, *(passage.snippet for passage in citation.passages)]

    def source(self, number: int) -> str:
        citation = self.citations.get(number)
        if citation is None:
            return f"#{number}"
        return (citation.source_id or citation.url or citation.title or citation.chunk_id).casefold()

    def echo(self, number: int) -> bool:
        citation = self.citations.get(number)
        if citation is None:
            return False
        known = [self.chunks.get(chunk_id) for chunk_id in citation.chunk_ids]
        return any(_cites_echo(chunk, citation) for chunk in known)


def _section_findings(
    position: int | None,
    heading: str,
    sections: Sequence[AnswerSection],
    reader: _Reader,
    said: set[str],
    topics: tuple[float, float] | None,
) -> list[QualityFinding]:
    found: dict[FindingKind, str] = {}
    claims = [claim for section in sections for claim in section.claims]
    uncited = unsupported = 0
    for claim in claims:
        numbers = [n for n in claim.citations if n in reader.citations]
        if claim.flagged or not numbers:
            uncited += 1
        elif _support(claim.text, [p for n in numbers for p in reader.passages(n)]) < MIN_SUPPORT:
            unsupported += 1
        if echoes_an_answer(claim.text) or any(reader.echo(n) for n in numbers):
            found.setdefault("memory_echo", "it quotes the assistant's own earlier answer as evidence")
        why = garbled(claim.text)
        if why:
            found.setdefault("garbled", f"“{claim.text[:80]}” is {why}")
        key = " ".join(claim_words(claim.text))
        # a section whose only statement an earlier one made is answered by the same evidence (``_report`` keeps
        # it so, deliberately): said once more, not repeated text
        if _repeats_itself(claim.text) or (key and key in said and len(claims) > 1):
            found.setdefault("repeated", f"“{claim.text[:80]}” says the same thing twice")
        said.add(key)
    if uncited or unsupported:
        found["uncited"] = (
            f"{uncited + unsupported} of {len(claims)} statement(s) lack a citation that supports them"
            + (f" ({unsupported} cite passages that do not say it)" if unsupported else "")
        )
    if topics is not None and claims:
        sources = {reader.source(n) for claim in claims for n in claim.citations if n in reader.citations}
        if len(sources) == 1:
            found["single_source"] = "it rests on one source: look for a second one"
        share, typical = topics
        if share < OFF_TOPIC_SHARE or (share < OFF_TOPIC_LOW and share < OFF_TOPIC_RELATIVE * typical):
            found["off_topic"] = (
                f"its statements mention {share:.0%} of the words of its sub-question and the question "
                f"(the other sections: {typical:.0%})"
            )
    return [
        QualityFinding(section=position, heading=heading, kind=kind, detail=detail) for kind, detail in found.items()
    ]


def report_findings(
    response: FinalResponse,
    plan: ResearchPlan,
    question: str,
    evidence: Sequence[ContextChunk] | None = None,
) -> list[QualityFinding]:
    """What is wrong with the report, section by section (the kinds are ``SEVERITY``'s)."""
    reader = _Reader(response, evidence)
    grouped, _ = sections_by_position(response.sections)
    question_topics = set(query_topics(question.split("(", 1)[0] if not question.startswith("(") else question))
    findings: list[QualityFinding] = []
    said: set[str] = set()
    shares = {
        position: _share(question_topics | set(query_topics(item.question)), term_set(_claims_text(grouped[position])))
        for position, item in enumerate(plan.items, start=1)
        if _claims_text(grouped.get(position, []))
    }
    for position, item in enumerate(plan.items, start=1):
        sections = grouped.get(position, [])
        heading = next((section.heading for section in sections if section.heading), f"{position}. {item.question}")
        if not _claims_text(sections) and not any(section.claims for section in sections):
            findings.append(
                QualityFinding(
                    section=position, heading=heading, kind="unanswered", detail=f"“{item.question}” is not answered"
                )
            )
            continue
        others = [share for other, share in shares.items() if other != position]
        topics = (shares.get(position, 0.0), sum(others) / len(others) if others else 1.0)
        findings += _section_findings(position, heading, sections, reader, said, topics)
    inside = {id(section) for sections in grouped.values() for section in sections}
    outside = [section for section in response.sections if id(section) not in inside and section.claims]
    for section in outside:
        # a disagreement quotes its sides, which a section may have said too: not a repetition
        findings += _section_findings(None, section.heading, [section], reader, set(said), None)
    return findings
