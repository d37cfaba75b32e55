"""`researchcrew ask "question"`: research a question and print the cited answer, its sources, and what each
source did (used, or failed and why). ``--json`` prints the whole FinalResponse for scripts.

Each ``ask`` starts a fresh session (``cli-<time>-<random>``, printed after the answer) unless ``--continue``
continues the user's last session or ``--session ID`` names one; in a continued session a follow-up question
("What are its limitations?") is rewritten from the conversation before it is researched, and the answer says so.
"""

from __future__ import annotations

import logging
import secrets
from collections import Counter
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from researchcrew.cli._common import (
    echo_json,
    load_settings,
    local_option,
    read_question,
    route_for,
    with_runtime,
    with_service,
)

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
@click.argument("question", required=False)
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
    default=None,
    envvar="RESEARCHCREW_SESSION",
    help="The conversation this question belongs to (default: a new one, printed after the answer).",
)
@click.option(
    "--continue",
    "continue_session",
    is_flag=True,
    help="Continue the user's last session: follow-up questions are understood from it.",
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
@local_option
def ask(
    question: str | None,
    user_id: str,
    session_id: str | None,
    continue_session: bool,
    response_format: str | None,
    preferred_sources: tuple[str, ...],
    exclude_sources: tuple[str, ...],
    deadline_s: float | None,
    as_json: bool,
    local: bool,
) -> None:
    """Ask a research question and print a cited answer. QUESTION `-` (or none, with a question piped in) reads it
    from stdin."""
    from pydantic import ValidationError

    from researchcrew.contracts.request import ResearchRequest, ResponseOptions

    if continue_session and session_id is not None:
        raise click.UsageError("use either --continue (the last session) or --session ID, not both")
    question = read_question(question)
    try:
        request = ResearchRequest(
            question=question,
            user_id=user_id,
            session_id=session_id or new_session_id(),
            preferred_sources=list(preferred_sources) or None,
            exclude_sources=list(exclude_sources) or None,
            deadline_s=deadline_s,
            response=ResponseOptions(**({"response_format": response_format} if response_format else {})),
        )
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise click.ClickException(f"invalid request: {problems}") from error
    settings = load_settings()
    route = route_for(settings, local=local, user_id=user_id)
    if route.mode == "service":  # the running service of this data folder answers, warm (researchcrew.client)
        response = with_service(route, lambda client: client.ask(request, continue_session=continue_session))
        _print_answer(response, as_json)
        return
    if logging.getLogger().getEffectiveLevel() >= logging.WARNING:
        # Each failed source is logged as a warning, and the answer lists it under "Sources searched:" with its reason;
        # without -v, say it once, in the answer.
        logging.getLogger("researchcrew.tools").setLevel(logging.ERROR)
        # A knowledge base or memory store that cannot be opened is reported in the answer the same way.
        logging.getLogger("researchcrew.runtime").setLevel(logging.ERROR)

    async def research(runtime: Runtime) -> FinalResponse:
        if not continue_session:
            return await runtime.ask(request)
        last = await runtime.last_session(request.user_id)
        if last is None:
            raise click.ClickException(
                f"user {request.user_id!r} has no earlier session to continue; ask without --continue to start one"
            )
        return await runtime.ask(request.model_copy(update={"session_id": last}))

    _print_answer(with_runtime(research, settings), as_json)


def _print_answer(response: FinalResponse, as_json: bool) -> None:
    if as_json:
        echo_json(response.model_dump(mode="json"))
    else:
        click.echo(render_answer(response))
        if response.table is not None:  # issue 22: the whole table, paged or as CSV
            session, table = response.query.session_id, response.table
            click.echo(
                f"Table: {table.table_id}, {table.total_rows} rows (researchcrew tables show {session} "
                f"{table.table_id} --csv -o table.csv)"
            )
        click.echo(f"Session: {response.query.session_id} (ask a follow-up with --continue)")


def new_session_id() -> str:
    """A fresh session id for one ``ask``: readable, sortable by time, unique (``cli-20261126-101500-3f9a1c``)."""
    return f"cli-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def _source_line(citation: Citation) -> str:
    """``[n] Title — where, date, location (source type)``.

    "Where" is what a reader can follow (``Citation.label``): a knowledge-base file by its name, a web page or paper
    by its URL, else the source's id — never the content hash the index keys documents by. The location names every
    cited passage of the source ("§ Methods, passages 2 and 4 of 5"). A recalled exchange's id means nothing to a
    person, so a memory citation names the conversation instead.
    """
    from researchcrew.contracts.chunks import MEMORY_SOURCE_TYPE

    date = f", {citation.source_date:%Y-%m-%d}" if citation.source_date else ""
    title = citation.title or "(untitled)"
    if citation.source_type == MEMORY_SOURCE_TYPE and not citation.url:
        where, location = citation.location or "your conversation memory", ""
    else:
        where = citation.label or citation.url or citation.source_id or citation.chunk_id
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
    lines += [header]
    if response.final_reason:
        lines.append(f"Why: {response.final_reason}")
    if response.rewrite is not None:
        lines.append(f"Researched as: {response.rewrite.standalone}")
    if response.route is not None:  # issue 22: which route answered, and the fallbacks it took
        tried = " → ".join(response.route.tried)
        lines.append(f"Route: {response.route.route}" + (f" (tried {tried})" if len(response.route.tried) > 1 else ""))
    lines += ["", response.answer.strip(), ""]
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
    if response.quality is not None and response.quality.original_chunk_count:
        quality = response.quality
        reasons = Counter(removal.reason.replace("_", " ") for removal in response.removals)
        removed = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
        lines.append(
            f"Evidence: {quality.original_chunk_count} found, {quality.filtered_chunk_count} kept"
            + (f" ({removed} removed)" if removed else "")
            + (f"; retrieval {response.retrieval_status}" if response.retrieval_status else "")
        )
    from researchcrew.contracts.follow_up import USAGE_STAGES
    from researchcrew.pipeline.responses import source_caveats

    already_shown = set(source_caveats(response.source_reports))  # failures are listed under "Sources searched"
    notes = [f"  - {caveat}" for caveat in response.caveats if caveat not in already_shown]
    usage = response.token_usage
    if usage.total.calls:
        spent = ", ".join(
            f"{name.replace('_', '-')} {usage.stage(name).total_tokens}"
            for name in USAGE_STAGES
            if usage.stage(name).calls
        )
        notes.append(
            f"  - language model: {usage.total.total_tokens} tokens ({usage.total.prompt_tokens} prompt, "
            f"{usage.total.completion_tokens} completion; {spent}); cost: {response.cost.summary()}"
        )
    if response.citation_stats.removed or response.citation_stats.claims_removed:
        stats = response.citation_stats
        notes.append(
            f"  - citation check removed {stats.removed} invalid citation(s) and {stats.claims_removed} "
            "unsupported claim(s)"
        )
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines).rstrip() + "\n"
