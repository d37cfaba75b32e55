"""The report's quality check (seed 002 phase 4), in code, on four dimensions in [0, 1]:

* **citation correctness** — of the citations written (in the sub-question answers and the report), the share that
  pointed to evidence actually given: the citation check's own counts (``CitationStats``);
* **plan coverage** — the share of approved sub-questions whose section makes at least one cited statement;
* **query relevance** — half: the share of the question's content terms the statements mention; half: per
  answered section, the share of its sub-question's terms it mentions (averaged);
* **structure** — one titled section per answered sub-question, sections in plan order, and no section holding
  most of the report when there are three or more.

``overall`` is their weighted mean (0.35, 0.30, 0.20, 0.15); below the threshold the report is written once more
with the issues below as instructions.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from researchcrew.contracts.deep import QualityScores, ResearchPlan
from researchcrew.contracts.synthesizer import AnswerSection, FinalResponse
from researchcrew.text.terms import query_topics, term_set

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
) -> QualityScores:
    """Score a report (see the module docstring). ``extra_removed``: citations the sub-question answers lost to
    the citation check before the report was put together."""
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
    overall = sum(WEIGHTS[name] * value for name, value in parts.items())
    return QualityScores(
        attempt=attempt,
        **{name: round(value, 4) for name, value in parts.items()},
        overall=round(overall, 4),
        threshold=threshold,
        passed=overall >= threshold,
        issues=issues,
    )
