"""Plans by rule for the report types other than "report" (issue 21 item 5; the default plan is ``plan.rule_plan``).

A comparison's plan asks one aspect per item and names every subject in it, so each sub-question retrieves evidence
on all of them; the subjects come from the question ("X vs Y", "compare X and Y", "differences between X, Y and
Z", "X or Y"), and a question that names none compares the sources on its topic. A literature review's plan makes
the facets of what the probe found (``_facets``) its first themes, then the literature's methods, findings and gaps.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from researchcrew.contracts.deep import MAX_SUBQUESTION_CHARS, PlanItem, ReportType, ResearchPlan
from researchcrew.deep._facets import Facet, artefacts, lower_label
from researchcrew.deep._plan import topic_of

if TYPE_CHECKING:
    from researchcrew.pipeline.clarify import EvidenceSummary

MAX_SUBJECTS = 4
_LEADING = re.compile(
    r"\b(?:compare|comparing|comparison\s+(?:of|between)|contrast(?:ing)?|differences?\s+between)"
    r"(?!\s+(?:to|with|against)\b)\s+(.+)",
    re.IGNORECASE,
)
_BETWEEN = re.compile(
    r"(.+?)\s+(?:vs\.?|versus|compared\s+(?:to|with)|compares?\s+(?:to|with|against)|or)\s+(.+)", re.IGNORECASE
)
_SPLIT = re.compile(r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|with|to|versus|vs\.?|against|or)\s+", re.IGNORECASE)
_TRAILER = re.compile(
    r"\s+(?:for|in\s+terms\s+of|when|regarding|with\s+respect\s+to|on|in|at|across|among)\s+.*$", re.IGNORECASE
)


_AUXILIARY = re.compile(
    r"^(?:(?:what|which|who)\s+(?:is|are)\s+|is\s+|are\s+|was\s+|were\s+|does\s+|do\s+|did\s+|should\s+(?:i\s+use\s+)?|"
    r"can\s+)?(?:(?:the|a|an|between)\s+)?",
    re.IGNORECASE,
)
_COMPARATIVE = re.compile(r"\s+(?:better|worse|cheaper|faster|slower|safer|preferable|more\s+\w+|less\s+\w+)$", re.I)


def _subject(text: str) -> str:
    text = _AUXILIARY.sub("", text.strip(" ?.!,;:'\"“”"), count=1)
    return " ".join(_COMPARATIVE.sub("", text).split())


def comparison_subjects(question: str) -> tuple[str, ...]:
    """What a comparison question compares, in its order; () when it names fewer than two things."""
    text = question.strip().rstrip("?.! ")
    leading = _LEADING.search(text)
    if leading:
        parts = _SPLIT.split(leading.group(1))
    else:
        between = _BETWEEN.match(text)
        if between is None:
            return ()
        parts = [topic_of(between.group(1).rsplit(",", 1)[-1]), *_SPLIT.split(between.group(2))]
    if parts:
        parts[-1] = _TRAILER.sub("", parts[-1])
    subjects = list(dict.fromkeys(s for s in (_subject(part) for part in parts) if s and len(s) <= 120))
    return tuple(subjects[:MAX_SUBJECTS]) if len(subjects) >= 2 else ()


def _together(subjects: tuple[str, ...]) -> str:
    return subjects[0] if len(subjects) == 1 else ", ".join(subjects[:-1]) + f" and {subjects[-1]}"


def _comparison_items(
    question: str, subjects: tuple[str, ...], summary: EvidenceSummary | None, facets: Sequence[Facet]
) -> list[tuple[str, str]]:
    if subjects:
        them = _together(subjects)
        items = [
            (f"What are {them}, and how do they differ in scope?", "what is compared"),
            (f"How do the methods of {them} differ?", "aspect: methods"),
            (f"What results have been reported for {them}, and how do they compare?", "aspect: results"),
            (f"What are the costs and practical demands of {them}?", "aspect: cost and practice"),
            (f"What are the limitations of {them}, compared with each other?", "aspect: limitations"),
        ]
        items += [
            (f"How do {them} compare on {lower_label(facet.label)}?", f"an aspect of the evidence: {facet.rationale}")
            for facet in facets[:3]
            if not artefacts(f"How do {them} compare on {facet.label}?", facet.years)
        ]
        return items
    topic = topic_of(question)
    return [
        (f"Which approaches to {topic} do the sources describe, and how do they differ?", "what is compared"),
        (f"How do the sources' methods for {topic} differ?", "aspect: methods"),
        (f"What results do the sources report on {topic}, and where do they disagree?", "aspect: results"),
        (f"What limitations of {topic} do the sources point out?", "aspect: limitations"),
    ]


def _review_items(question: str, facets: Sequence[Facet]) -> list[tuple[str, str]]:
    topic = topic_of(question)
    items = [(facet.question, f"a theme of the literature: {facet.rationale}") for facet in facets[:4]]
    items += [
        (f"Which methods do studies of {topic} use?", "theme: methods"),
        (f"What findings on {topic} do the studies agree or disagree on?", "theme: findings"),
        (f"What gaps and open questions do studies of {topic} leave?", "theme: gaps"),
    ]
    return items


def shaped_rule_plan(
    question: str,
    summary: EvidenceSummary | None,
    report_type: ReportType,
    *,
    subjects: tuple[str, ...],
    max_items: int,
    focus: str | None = None,
    facets: Sequence[Facet] = (),
) -> ResearchPlan | None:
    """The rule plan of a comparison or literature review; None for a plain report (``plan.rule_plan`` then).
    ``facets`` (``plan.plan_facets``: what the probe found) give a review its themes and a comparison its shared
    aspects."""
    if report_type == "comparison":
        candidates = _comparison_items(question, subjects, summary, facets)
    elif report_type == "literature_review":
        candidates = _review_items(question, facets)
    else:
        return None
    items: list[PlanItem] = []
    seen: set[str] = set()
    for text, rationale in candidates:
        wording = " ".join(text.split())
        if focus:
            wording = f"{wording.rstrip('?')} ({focus})?"
        wording = wording[:MAX_SUBQUESTION_CHARS]
        if wording.lower() in seen:
            continue
        seen.add(wording.lower())
        items.append(PlanItem(id=len(items) + 1, question=wording, rationale=rationale))
        if len(items) >= max_items:
            break
    return ResearchPlan(question=question, items=items, max_items=max_items, written_by="rules")
