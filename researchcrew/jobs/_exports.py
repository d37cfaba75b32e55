"""A run's results as CSV, JSONL or a Markdown report (with what is new since the previous run).

* CSV: one row per question — the question, the carried columns, status, answer, confidence, citation count,
  sources used and failed, the failure reason, and the first three citations' titles and links. The answers quote
  web pages and the carried columns (names and values) come from whoever wrote the question file, so no cell —
  header included — may reach a spreadsheet as a formula or as more than one cell (OWASP, "CSV Injection"):
  every cell is quoted (a quoted cell can hold ``\\r``, ``\\n``, quotes and commas and stays one cell), and a cell
  that starts, after any leading blanks and invisible characters, with ``=``, ``+``, ``-``, ``@``, tab or carriage
  return — judged on its NFKC form, so full-width ``＝＋－＠`` and the other look-alikes that spreadsheets fold
  count too — gets a leading apostrophe. A plain decimal number (``-3``, ``-0.25``) is left as it is: it is no
  formula, and stays a number.
* JSONL: one ``QuestionResult`` per line, with the full ``FinalResponse``. The line separators JSON leaves raw
  inside strings (U+0085, U+2028, U+2029) are written escaped, so splitting the text into lines by any rule
  gives one record per line.
* Markdown: a summary table, **what is new since the previous run** (sources cited now that were not cited for the
  same question then, answers whose confidence level changed, questions new to this run), then each answer with
  its sources. Questions, titles and carried values are text, not Markdown: whitespace is collapsed to one line,
  the characters that would start a link, an HTML tag or a code span are escaped (and ``|`` in table cells), and
  link targets are percent-encoded where they would end the link early. The answers themselves are Markdown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import quote

from researchcrew.contracts.cost import AnswerCost
from researchcrew.contracts.synthesizer import Citation
from researchcrew.jobs.contracts import QuestionResult, RunInfo
from researchcrew.text.csv_cells import csv_table
from researchcrew.text.csv_cells import is_blank as _blank

ExportFormat = Literal["csv", "jsonl", "md"]
CSV_CITATIONS = 3
_MARKDOWN_SPECIAL = re.compile(r"([\\`\[\]<>])")  # what starts a link, an image, an HTML tag or a code span
_TARGET_UNSAFE = frozenset("()<>[]\\\"'`")  # what ends a Markdown link target early


def to_csv(results: Sequence[QuestionResult], columns: Sequence[str]) -> str:
    header = ["index", "question", *columns, "status", "answer", "confidence_level", "confidence", "citation_count"]
    header += ["sources_used", "sources_failed", "failure", "cost_usd"]
    for number in range(1, CSV_CITATIONS + 1):
        header += [f"citation_{number}_title", f"citation_{number}_url"]
    rows: list[list[object]] = []
    for result in results:
        response = result.response
        row: list[object] = [result.index, result.question]
        row += [result.carried.get(column, "") for column in columns]
        row += [
            result.status,
            response.answer.strip() if response is not None else "",
            result.confidence_level or "",
            f"{response.confidence:.2f}" if response is not None else "",
            result.citation_count,
            "; ".join(result.sources_used),
            "; ".join(f"{entry['source']}: {entry['kind']}" for entry in result.sources_failed),
            result.failure.message if result.failure is not None else "",
            _cost_cell(result),
        ]
        citations = list(response.citations[:CSV_CITATIONS]) if response is not None else []
        for number in range(CSV_CITATIONS):
            citation = citations[number] if number < len(citations) else None
            row += [citation.title or "" if citation else "", _link(citation) if citation else ""]
        rows.append(row)
    return csv_table(header, rows)


def run_cost(results: Sequence[QuestionResult]) -> AnswerCost:
    """What the run's answers cost together: unknown when any answer's price is unknown."""
    return sum((result.response.cost for result in results if result.response is not None), AnswerCost())


def _cost_cell(result: QuestionResult) -> str:
    """A question's cost in US dollars; "unknown" when its model has no price; empty without an answer."""
    if result.response is None:
        return ""
    usd = result.response.cost.usd
    return "unknown" if usd is None else f"{usd:.6f}"


def to_jsonl(results: Sequence[QuestionResult]) -> str:
    return "".join(_one_line_json(result.model_dump_json()) + "\n" for result in results)


def _one_line_json(text: str) -> str:
    # JSON escapes the C0 controls but may leave NEL, LINE and PARAGRAPH SEPARATOR raw (inside strings only, so
    # their \u escapes mean the same); str.splitlines and some JSONL readers would cut a record there.
    return text.replace("\x85", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


@dataclass
class QuestionChange:
    """How one question's answer differs from the previous run's."""

    index: int
    question: str
    new_sources: list[Citation] = field(default_factory=list)
    confidence_before: str | None = None
    confidence_now: str | None = None

    @property
    def confidence_changed(self) -> bool:
        return self.confidence_before != self.confidence_now


@dataclass
class RunChanges:
    """What is new in a run compared with the previous one of the same job."""

    changed: list[QuestionChange]
    new_questions: list[QuestionResult]


def compare(current: Sequence[QuestionResult], previous: Sequence[QuestionResult]) -> RunChanges:
    """Questions are matched by their text (and carried columns, so two CSV rows asking the same stay apart)."""
    before = {_identity(result): result for result in previous}
    changed: list[QuestionChange] = []
    new_questions: list[QuestionResult] = []
    for result in current:
        old = before.get(_identity(result))
        if old is None:
            new_questions.append(result)
            continue
        cited_before = {_source_key(c) for c in (old.response.citations if old.response else [])}
        fresh = [
            c for c in (result.response.citations if result.response else []) if _source_key(c) not in cited_before
        ]
        unique_fresh = list({_source_key(c): c for c in fresh}.values())
        change = QuestionChange(
            index=result.index,
            question=result.question,
            new_sources=unique_fresh,
            confidence_before=old.confidence_level or old.status,
            confidence_now=result.confidence_level or result.status,
        )
        if change.new_sources or change.confidence_changed:
            changed.append(change)
    return RunChanges(changed=changed, new_questions=new_questions)


def to_markdown(
    run: RunInfo,
    results: Sequence[QuestionResult],
    *,
    previous: tuple[RunInfo, Sequence[QuestionResult]] | None = None,
) -> str:
    counts = run.counts
    lines = [f"# {run.job_name} — run {run.id[:12]}", ""]
    when = run.finished_at or run.started_at or run.created_at
    slot = f", schedule slot {run.slot_at:%Y-%m-%d %H:%M} UTC" if run.slot_at else ""
    lines += [
        f"- **Status:** {run.status} ({run.trigger}{slot}), {when:%Y-%m-%d %H:%M} UTC",
        f"- **Questions:** {counts.total} — {counts.answered} answered, {counts.uncertain} uncertain, "
        f"{counts.failed} failed" + (f", {counts.cancelled} cancelled" if counts.cancelled else ""),
    ]
    if run.source_failures:
        failures = "; ".join(f"{f.source} {f.kind} ×{f.count}" for f in run.source_failures)
        lines.append(f"- **Sources that failed:** {failures}")
    lines.append(f"- **Cost:** {run_cost(results).summary()}")
    lines += ["", "## Summary", "", "| # | Question | Status | Confidence | Citations | Sources used | Failed |"]
    lines.append("|---|---|---|---|---|---|---|")
    for result in results:
        failed = ", ".join(f"{entry['source']} ({entry['kind']})" for entry in result.sources_failed)
        lines.append(
            f"| {result.index + 1} | {_cell(result.question)} | {result.status} | {result.confidence_level or '—'} | "
            f"{result.citation_count} | {_cell(', '.join(result.sources_used)) or '—'} | {_cell(failed) or '—'} |"
        )
    lines += ["", "## What is new since the previous run", ""]
    lines += _changes_section(results, previous)
    lines += ["", "## Answers", ""]
    for result in results:
        lines += _answer_section(result)
    return "\n".join(lines).rstrip() + "\n"


def _changes_section(
    results: Sequence[QuestionResult], previous: tuple[RunInfo, Sequence[QuestionResult]] | None
) -> list[str]:
    if previous is None:
        return ["This is the job's first finished run: nothing to compare with yet."]
    previous_run, previous_results = previous
    when = previous_run.finished_at or previous_run.created_at
    changes = compare(results, previous_results)
    lines = [f"Compared with run {previous_run.id[:12]} of {when:%Y-%m-%d %H:%M} UTC.", ""]
    if not changes.changed and not changes.new_questions:
        return [*lines, "Nothing new: the same sources are cited and every confidence level is unchanged."]
    for change in changes.changed:
        lines.append(f"- **{change.index + 1}. {_inline(change.question)}**")
        if change.confidence_changed:
            lines.append(f"  - confidence: {change.confidence_before} → {change.confidence_now}")
        for citation in change.new_sources:
            lines.append(f"  - new source: {_citation_line(citation)}")
    for result in changes.new_questions:
        lines.append(f"- **{result.index + 1}. {_inline(result.question)}** — new in this run")
    return lines


def _answer_section(result: QuestionResult) -> list[str]:
    lines = [f"### {result.index + 1}. {_inline(result.question)}", ""]
    if result.carried:
        lines += [", ".join(f"{_inline(key)}: {_inline(value)}" for key, value in result.carried.items()), ""]
    response = result.response
    if result.status in ("failed", "cancelled", "pending", "running") and (response is None or result.failure):
        reason = result.failure.message if result.failure else result.status
        lines += [f"*{result.status}:* {_inline(reason)}", ""]
    if response is None:
        return lines
    lines += [f"*Confidence: {response.confidence_level} ({response.confidence:.2f})*", "", response.answer.strip(), ""]
    if response.citations:
        lines.append("Sources:")
        lines += [f"- [{citation.number}] {_citation_line(citation)}" for citation in response.citations]
        lines.append("")
    return lines


def _citation_line(citation: Citation) -> str:
    title = _inline(citation.title or citation.label or citation.source_id or citation.chunk_id)
    link = _link(citation)
    if link.startswith(("http://", "https://")):
        return f"[{title}]({_link_target(link)})"
    if citation.file_name:
        return f"{title} — {_inline(citation.file_name)} ({citation.source_type})"
    return f"{title} ({citation.source_type})"


def _link_target(link: str) -> str:
    """The link with whatever would end a Markdown link target early (blanks, brackets, quotes) percent-encoded."""
    return "".join(quote(char, safe="") if char in _TARGET_UNSAFE or _blank(char) else char for char in link)


def _link(citation: Citation) -> str:
    return citation.url or citation.source_id or ""


def _source_key(citation: Citation) -> str:
    return citation.url or citation.source_id or f"{citation.source_type}:{citation.title or citation.chunk_id}"


def _identity(result: QuestionResult) -> tuple[str, tuple[tuple[str, str], ...]]:
    return result.question, tuple(sorted((str(k), str(v)) for k, v in result.carried.items()))


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, escaped, ``|`` included."""
    return _inline(text).replace("|", "\\|")


def _inline(text: object) -> str:
    """Text on one Markdown line, shown as written: no link, image, HTML tag or code span can start in it."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))
