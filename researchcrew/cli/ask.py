"""`researchcrew ask "question"`: research a question and print the cited answer, its sources, and what each
source did (used, or failed and why). ``--json`` prints the whole FinalResponse for scripts."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import click

from researchcrew.cli._common import echo_json, with_runtime

if TYPE_CHECKING:
    from researchcrew.contracts import Citation, FinalResponse
    from researchcrew.runtime import Runtime

_KIND_LABEL = {
    "generated": "",
    "extractive": "extractive answer (quoted from the sources, no language model)",
    "uncertainty": "not enough evidence",
    "refusal": "not researched",
    "clarification": "clarifying questions (reply with `researchcrew ask` in the same session)",
}


@click.command()
@click.argument("question")
@click.option(
    "--user",
    "user_id",
    default="local",
    show_default=True,
    envvar="RESEARCHCREW_USER",
    help="Whose memory this question uses and adds to.",
)
@click.option(
    "--session",
    "session_id",
    default="cli",
    show_default=True,
    envvar="RESEARCHCREW_SESSION",
    help="The conversation this question belongs to.",
)
@click.option(
    "--format",
    "response_format",
    type=click.Choice(["concise", "detailed", "technical"]),
    default=None,
    help="Answer style (default: the user's learned preference, else detailed).",
)
@click.option(
    "--source",
    "preferred_sources",
    multiple=True,
    metavar="TYPE",
    help="Put this source type first (rag, web, arxiv, memory); repeatable.",
)
@click.option(
    "--exclude", "exclude_sources", multiple=True, metavar="TYPE", help="Do not search this source type; repeatable."
)
@click.option(
    "--deadline",
    "deadline_s",
    type=click.FloatRange(min=0.5, max=600),
    default=None,
    help="Seconds for the whole run (default 30).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
def ask(
    question: str,
    user_id: str,
    session_id: str,
    response_format: str | None,
    preferred_sources: tuple[str, ...],
    exclude_sources: tuple[str, ...],
    deadline_s: float | None,
    as_json: bool,
) -> None:
    """Ask a research question and print a cited answer."""
    from pydantic import ValidationError

    from researchcrew.contracts.request import ResearchRequest, ResponseOptions

    try:
        request = ResearchRequest(
            question=question,
            user_id=user_id,
            session_id=session_id,
            preferred_sources=list(preferred_sources) or None,
            exclude_sources=list(exclude_sources) or None,
            deadline_s=deadline_s,
            response=ResponseOptions(**({"response_format": response_format} if response_format else {})),
        )
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise click.ClickException(f"invalid request: {problems}") from error
    if logging.getLogger().getEffectiveLevel() >= logging.WARNING:
        # Each failed source is logged as a warning, and the answer lists it under "Sources searched:" with its reason;
        # without -v, say it once, in the answer.
        logging.getLogger("researchcrew.tools").setLevel(logging.ERROR)

    async def research(runtime: Runtime) -> FinalResponse:
        return await runtime.ask(request)

    response = with_runtime(research)
    if as_json:
        echo_json(response.model_dump(mode="json"))
    else:
        click.echo(render_answer(response))


def _source_line(citation: Citation) -> str:
    """``[n] Title — where, date, location (source type)``.

    "Where" is what a reader can follow: the URL, else the source's id (a file path, a document id). A recalled
    exchange's id means nothing to a person, so a memory citation names the conversation instead.
    """
    from researchcrew.contracts.chunks import MEMORY_SOURCE_TYPE

    date = f", {citation.source_date:%Y-%m-%d}" if citation.source_date else ""
    title = citation.title or "(untitled)"
    if citation.source_type == MEMORY_SOURCE_TYPE and not citation.url:
        where, location = citation.location or "your conversation memory", ""
    else:
        where = citation.url or citation.source_id or citation.chunk_id
        location = f", {citation.location}" if citation.location else ""
    return f"[{citation.number}] {title} — {where}{date}{location} ({citation.source_type})"


def render_answer(response: FinalResponse) -> str:
    """The answer as a person reads it in a terminal: text, numbered sources, then what each source did."""
    lines: list[str] = []
    label = _KIND_LABEL.get(response.answer_kind, "")
    header = f"Confidence: {response.confidence_level} ({response.confidence:.2f})"
    if response.answer_kind == "clarification":
        header = "Before answering: " + label
    elif label:
        header += f" · {label}"
    if response.partial:
        header += " · partial (time limit reached)"
    lines += [header, "", response.answer.strip(), ""]
    if response.citations:
        lines.append("Sources:")
        lines += [f"  {_source_line(citation)}" for citation in response.citations]
        lines.append("")
    if response.source_reports:
        lines.append("Sources searched:")
        for report in response.source_reports:
            if report.status == "failed" and report.failure is not None:
                state = f"failed: {report.failure.kind} — {report.failure.message}"
            elif report.status == "skipped":
                state = "skipped"
            else:
                state = f"used, {report.chunk_count} result(s) in {report.latency_ms:.0f} ms"
            lines.append(f"  {report.source_type:<8} {state}")
    from researchcrew.pipeline.responses import source_caveats

    already_shown = set(source_caveats(response.source_reports))  # failures are listed under "Sources searched"
    notes = [caveat for caveat in response.caveats if caveat not in already_shown]
    if notes:
        lines += ["", "Notes:"] + [f"  - {note}" for note in notes]
    if response.citation_stats.removed or response.citation_stats.claims_removed:
        stats = response.citation_stats
        lines.append(
            f"  - citation check removed {stats.removed} invalid citation(s) and {stats.claims_removed} "
            "unsupported claim(s)"
        )
    return "\n".join(lines).rstrip() + "\n"
