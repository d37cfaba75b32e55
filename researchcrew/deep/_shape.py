"""Report length and type (issue 21 item 5): what ``DeepOptions.length`` and ``report_type`` change.

Length — brief, standard, detailed — sets how many sub-questions the plan holds (unless ``max_subquestions`` is
given), how each sub-question is answered (the pipeline's response format and word limit, which the extractive
synthesizer turns into sentences and the LLM's prompt states) and, for brief reports, how many statements a
section keeps. Type — report, literature_review, comparison — sets the plan's wording by rule (themes from what the
probe found; one aspect per item naming every subject compared), the order of a section's statements (by source;
by subject), and what the report adds: a literature review's sources per theme, a comparison's table (subjects as
columns, aspects as rows). With an LLM, ``guidance`` is the sentence the plan and report prompts carry.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from researchcrew.contracts import UserPreferences
from researchcrew.contracts.deep import (
    ComparisonRow,
    ComparisonTable,
    DeepOptions,
    ReportLength,
    ReportType,
    ResearchPlan,
    ReviewTheme,
)
from researchcrew.contracts.synthesizer import DraftSection, FinalResponse
from researchcrew.deep._quality import section_number, sections_by_position
from researchcrew.deep._shape_plan import comparison_subjects
from researchcrew.text.terms import term_set

PLAN_ITEMS: dict[ReportLength, int | None] = {"brief": 3, "standard": None, "detailed": 10}  # None: the settings'
SECTION_STATEMENTS: dict[ReportLength, int | None] = {"brief": 2, "standard": None, "detailed": None}
ANSWER_WORDS: dict[ReportLength, int | None] = {"brief": 150, "standard": None, "detailed": 900}
MAX_TABLE_SOURCES = 3  # a comparison without named subjects compares this many of its most cited sources
_GUIDANCE_LENGTH = {
    "brief": "Keep it brief: at most 3 sub-questions and two or three sentences per section.",
    "standard": "Standard length: a short paragraph per section.",
    "detailed": "Make it detailed: up to 10 sub-questions and several paragraphs per section.",
}


@dataclass(frozen=True)
class ReportShape:
    """The length and type of one run's report, and the subjects a comparison compares."""

    length: ReportLength = "standard"
    report_type: ReportType = "report"
    subjects: tuple[str, ...] = ()

    @classmethod
    def of(cls, options: DeepOptions, question: str) -> ReportShape:
        subjects = comparison_subjects(question) if options.report_type == "comparison" else ()
        return cls(options.length, options.report_type, subjects)

    def plan_size(self, explicit: int | None, default: int) -> int:
        """How many sub-questions the plan may hold: ``explicit`` when the caller gave it, else by length."""
        if explicit is not None:
            return explicit
        by_length = PLAN_ITEMS[self.length]
        if by_length is None:
            return default
        return min(by_length, default) if self.length == "brief" else max(by_length, default)

    def preferences(self, preferences: UserPreferences) -> UserPreferences:
        """How each sub-question is answered: brief answers are concise and short, detailed ones long."""
        words = ANSWER_WORDS[self.length]
        if words is None:
            return preferences
        if self.length == "brief":
            update = {"response_format": "concise", "max_response_length": min(words, preferences.max_response_length)}
            return preferences.model_copy(update={**update, "min_response_length": 0})
        style = "technical" if preferences.response_format == "technical" else "detailed"
        return preferences.model_copy(
            update={"response_format": style, "max_response_length": max(words, preferences.max_response_length)}
        )

    def guidance(self) -> str:
        """What the LLM's plan and report prompts say about the report's length and type."""
        if self.report_type == "comparison":
            compared = " versus ".join(self.subjects) if self.subjects else "the approaches the sources describe"
            kind = (
                f"This is a comparison of {compared}: make each sub-question one aspect on which they are compared, "
                "name every subject in it, and contrast them side by side in each section."
            )
        elif self.report_type == "literature_review":
            kind = (
                "This is a literature review: make each sub-question one theme of the literature, and in each section "
                "say what each source reports on that theme, source by source."
            )
        else:
            kind = "This is a research report: one section per sub-question."
        return f"Report type: {self.report_type}. {kind} Report length: {self.length}. {_GUIDANCE_LENGTH[self.length]}"

    # ---- the report's sections -----------------------------------------------------------------------------------
    def subject_of(self, text: str) -> int | None:
        """The subject ``text`` speaks of most (its position in ``subjects``), or None."""
        terms = term_set(text)
        overlaps = [len(term_set(subject) & terms) for subject in self.subjects]
        best = max(overlaps, default=0)
        return overlaps.index(best) if best and overlaps.count(best) == 1 else None  # a tie names neither

    def sections(self, sections: Sequence[DraftSection]) -> list[DraftSection]:
        """The assembled sections shaped: each sub-question's sections merged (literature review, comparison)
        with statements ordered by source or by subject; brief reports keep the first statements only."""
        cap = SECTION_STATEMENTS[self.length]
        if cap is None and self.report_type == "report":
            return list(sections)
        shaped: list[DraftSection] = []
        kept_for: dict[int, int] = {}
        current: int | None = None
        for section in sections:
            position = section_number(section.heading) if section.heading else current
            current = position
            if position is None or section.perspective:
                shaped.append(section)
                continue
            claims = list(section.claims)
            if cap is not None:
                claims = claims[: max(0, cap - kept_for.get(position, 0))]
                kept_for[position] = kept_for.get(position, 0) + len(claims)
            merge = self.report_type != "report" and shaped and _position(shaped[-1]) == position
            if merge:
                shaped[-1].claims += claims
            elif claims:
                shaped.append(DraftSection(heading=section.heading, perspective=None, claims=claims))
        for section in shaped:
            if self.report_type == "literature_review" and not section.perspective:
                section.claims.sort(key=lambda claim: min(claim.citations, default=0))
            elif self.report_type == "comparison" and self.subjects and not section.perspective:
                section.claims.sort(key=lambda claim: _rank(self.subject_of(claim.text), len(self.subjects)))
        return shaped

    # ---- what the report adds ------------------------------------------------------------------------------------
    def table(self, response: FinalResponse, plan: ResearchPlan) -> ComparisonTable | None:
        """A comparison's table: per aspect, per subject, the first statement on it (or, without named subjects,
        per most cited source, the first statement citing it)."""
        if self.report_type != "comparison":
            return None
        grouped, _ = sections_by_position(response.sections)
        titles = {
            citation.number: citation.title or citation.label or f"Source {citation.number}"
            for citation in response.citations
        }
        by_source = not self.subjects
        if by_source:
            counts = Counter(
                n for section in response.sections for claim in section.claims for n in set(claim.citations)
            )
            columns = [number for number, _ in counts.most_common(MAX_TABLE_SOURCES)]
            subjects = [f"[{number}] {titles.get(number, '')}".strip() for number in columns] or ["The sources"]
        else:
            columns, subjects = [], list(self.subjects)
        rows = []
        for position, item in enumerate(plan.items, start=1):
            claims = [claim for section in grouped.get(position, []) for claim in section.claims if claim.citations]
            cells: list[str] = []
            cited: list[list[int]] = []
            for column in range(len(subjects)):
                if by_source:
                    found = next((c for c in claims if columns and columns[column] in c.citations), None)
                else:
                    found = next((c for c in claims if self.subject_of(c.text) == column), None)
                cells.append(found.text if found else "")
                cited.append(list(found.citations) if found else [])
            rows.append(ComparisonRow(aspect=item.question, cells=cells, citations=cited))
        return ComparisonTable(subjects=subjects, rows=rows)

    def themes(self, response: FinalResponse, plan: ResearchPlan) -> list[ReviewTheme]:
        """A literature review's themes (its sub-questions) and the sources each section cites."""
        if self.report_type != "literature_review":
            return []
        grouped, _ = sections_by_position(response.sections)
        return [
            ReviewTheme(
                theme=item.question,
                sources=sorted({n for s in grouped.get(position, []) for claim in s.claims for n in claim.citations}),
            )
            for position, item in enumerate(plan.items, start=1)
        ]


def _position(section: DraftSection) -> int | None:
    return section_number(section.heading) if section.heading else None


def _rank(subject: int | None, count: int) -> int:
    return count if subject is None else subject
