"""Remediation of a flawed report (issue 21): each section the quality check found wrong is researched once more,
with its sub-question reformulated, or dropped with the reason stated; the report is then put together again and
rescored, and ``Revision`` records say what changed.

* A plan section with findings (off-topic, garbled, repeated, uncited, one source, memory echo) or left unanswered
  is researched again with a reformulated sub-question: the sub-question narrowed to the question's own topic words
  it lacks ("What results are reported? — metamorphic testing"). The new answer replaces the old one when it answers
  with cited statements; otherwise the section is dropped, and the report's caveats say why.
* A section outside the plan (a disagreement across sub-questions) is not researched; one that quotes the
  assistant's earlier answer is dropped (the report's assembly no longer sets evidence against an echo, ``_report``).

Each sub-question is researched again at most once per run; the caller decides whether there is time for it. A
section whose only finding is mild (one source) is remedied only when the report fails the threshold.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from researchcrew.contracts.deep import (
    MAX_SUBQUESTION_CHARS,
    FindingKind,
    PlanItem,
    QualityFinding,
    ResearchPlan,
    Revision,
)
from researchcrew.deep._quality import MILD_KINDS
from researchcrew.deep._research import SubQuestionResult
from researchcrew.text.terms import query_topics

ResearchAgain = Callable[[int, PlanItem], Awaitable[SubQuestionResult | None]]


def reformulate(sub_question: str, question: str) -> str:
    """The sub-question asked again in other words: when it shares no topic word with the question, narrowed to the
    question's topic ("What limits it, in pooled testing?"); otherwise as a plain search for its own topic words
    (the question's other words belong to other sub-questions)."""
    own = query_topics(sub_question)
    topic = query_topics(question)
    if not set(own) & set(topic):
        text = f"{sub_question.rstrip(' ?')}, in {' '.join(topic.values())}?"
    else:
        text = "What does the evidence say about " + " ".join(own.values()) + "?"
    return text[:MAX_SUBQUESTION_CHARS]


def flawed_sections(findings: Sequence[QualityFinding], *, failed: bool) -> dict[int | None, list[FindingKind]]:
    """Kinds found, per plan position (None: sections outside the plan), in first-found order: the sections to
    remedy. A section whose only finding is mild (one source) is remedied only when the report ``failed``."""
    kinds: dict[int | None, list[FindingKind]] = {}
    for finding in findings:
        found = kinds.setdefault(finding.section, [])
        if finding.kind not in found:
            found.append(finding.kind)
    return {position: found for position, found in kinds.items() if failed or not set(found) <= MILD_KINDS}


async def remediate(
    question: str,
    plan: ResearchPlan,
    results: Sequence[SubQuestionResult],
    findings: Sequence[QualityFinding],
    research_again: ResearchAgain,
    *,
    failed: bool = True,
) -> tuple[list[SubQuestionResult], list[Revision]]:
    """The results with each flawed sub-question researched again (or dropped), and what was done. A section the
    run has no time for (``research_again`` gives None) stays as it was, without a revision."""
    updated = list(results)
    revisions: list[Revision] = []
    headings = {finding.section: finding.heading for finding in findings}
    for position, kinds in flawed_sections(findings, failed=failed).items():
        if position is None:
            revisions.append(
                Revision(
                    section=None,
                    heading=headings[None],
                    kinds=kinds,
                    action="dropped",
                    outcome="a section outside the plan is not researched again; it is left out of the report",
                )
            )
            continue
        if not 1 <= position <= len(updated):
            continue
        old = updated[position - 1]
        item = plan.items[position - 1]
        asked = reformulate(item.question, question)
        again = await research_again(position, PlanItem(id=item.id, question=asked, rationale=item.rationale))
        what = ", ".join(kind.replace("_", " ") for kind in kinds)
        if again is None:
            continue
        if again.status == "answered":
            seen = {scored.chunk.chunk_id for scored in again.evidence}
            updated[position - 1] = again.model_copy(
                update={
                    "item": item,
                    # what the first research gathered (references followed included) stays available
                    "evidence": [*again.evidence, *(s for s in old.evidence if s.chunk.chunk_id not in seen)],
                    "references": [*old.references, *again.references],
                    "elapsed_ms": old.elapsed_ms + again.elapsed_ms,
                    "tokens": old.tokens + again.tokens,
                }
            )
            revisions.append(
                Revision(
                    section=position,
                    heading=headings[position],
                    kinds=kinds,
                    action="researched_again",
                    question=asked,
                    outcome=f"researched again as “{asked}” ({what}); its section now rests on "
                    f"{len(again.evidence)} piece(s) of evidence",
                )
            )
        else:
            why = "researching it again found no cited answer either"
            updated[position - 1] = old.model_copy(
                update={"status": "not_researched", "note": f"dropped by the quality check ({what}): {why}"}
            )
            revisions.append(
                Revision(
                    section=position,
                    heading=headings[position],
                    kinds=kinds,
                    action="dropped",
                    question=asked,
                    outcome=f"dropped ({what}): {why}",
                )
            )
    return updated, revisions


def revision_note(revisions: Sequence[Revision]) -> str:
    """One caveat line for the report: "Revisions: section 2 ...; section 3 ..."."""
    parts = [f"section {revision.section or '(across sub-questions)'} {revision.outcome}" for revision in revisions]
    return "Revisions after the quality check: " + "; ".join(parts) + "."
