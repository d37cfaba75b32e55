"""`researchcrew research "question"`: deep research — clarifying questions, a plan you approve, each
sub-question researched (references followed), one checked report.

In a terminal the command asks you: it shows the clarifying questions and waits for your reply (Enter: "just
answer"), then shows the plan and waits for a decision — Enter approves; ``cut 2``, ``order 3,1,2``,
``edit 2 <new wording>``, ``add <new sub-question>`` (several separated by ``;``) change it; ``cancel`` ends the run.
``--yes`` asks nothing (the plan is approved as proposed), as do batch jobs.

Without a terminal (a script, a pipe) the run pauses and the command prints its id; continue it later, from any
process sharing the memory database, with ``--run ID`` and ``--answer``, ``--approve`` or the plan edits
(``--cut``, ``--order``, ``--edit N=TEXT``, ``--add``), or ``--cancel``. ``--run ID`` alone shows the run.

``--length brief|standard|detailed`` and ``--type report|literature_review|comparison`` shape the report;
``-o report.pdf`` (or .md, .html, .docx; ``--format`` to say it) also writes the finished report to a file, and
``--run ID -o report.docx`` exports a completed run's report again.

With a `researchcrew serve` of the data folder running, the run is the service's (it owns the knowledge base): the
command sends it to ``/v1/deep-runs`` over the folder's Unix socket and follows each working segment's events, with
the same output, prompts and exit codes; ``--local`` keeps it in this process (``researchcrew.client``).
"""

from __future__ import annotations

import asyncio
import re
import sys
from typing import TYPE_CHECKING, Protocol

import click

from researchcrew.cli._common import (
    echo_json,
    load_settings,
    local_option,
    question_is_piped,
    read_question,
    route_for,
    with_runtime,
    with_service,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from researchcrew.client import ServiceClient
    from researchcrew.contracts.deep import DeepOptions, DeepProgressEvent, DeepRun, PlanDecision, ResearchPlan
    from researchcrew.contracts.request import ResearchRequest
    from researchcrew.deep.runner import DeepResearch
    from researchcrew.runtime import Runtime

    OnEvent = Callable[[DeepProgressEvent], None] | None

_PLAN_HELP = (
    "Enter approves. Or: cut 2 | order 3,1,2 | edit 2 <new wording> | add <new sub-question> | cancel "
    "(several separated by ';')"
)


class _Decision(click.ClickException):
    """A plan command the user typed that cannot be read."""


def parse_plan_commands(text: str, plan: ResearchPlan) -> PlanDecision:
    """A decision from the commands typed at the plan prompt (see ``_PLAN_HELP``); empty approves."""
    from researchcrew.contracts.deep import PlanDecision

    cut: list[int] = []
    order: list[int] = []
    reword: dict[int, str] = {}
    add: list[str] = []
    for command in (part.strip() for part in text.split(";")):
        if not command:
            continue
        verb, _, rest = command.partition(" ")
        verb, rest = verb.lower(), rest.strip()
        if verb == "cancel":
            return PlanDecision(action="cancel")
        if verb in ("approve", "ok", "yes", "y"):
            continue
        if verb == "cut":
            cut += _numbers(rest, command)
        elif verb == "order":
            order = _numbers(rest, command)
        elif verb == "edit":
            number, _, wording = rest.partition(" ")
            if not number.isdigit() or not wording.strip():
                raise _Decision(f"“{command}”: write edit <number> <new wording>")
            reword[int(number)] = wording.strip()
        elif verb == "add":
            if not rest:
                raise _Decision(f"“{command}”: write add <new sub-question>")
            add.append(rest)
        else:
            raise _Decision(f"“{command}” is not a plan command. {_PLAN_HELP}")
    if not (cut or order or reword or add):
        return PlanDecision()
    return PlanDecision.edits(plan, cut=cut, order=order, reword=reword, add=add)


def _numbers(text: str, command: str) -> list[int]:
    parts = [part for part in re.split(r"[\s,]+", text) if part]
    if not parts or not all(part.isdigit() for part in parts):
        raise _Decision(f"“{command}”: give item numbers, e.g. 2 or 3,1,2")
    return [int(part) for part in parts]


def _edits(
    cut: tuple[int, ...], order: str | None, edit: tuple[str, ...], add: tuple[str, ...], plan: ResearchPlan
) -> PlanDecision:
    reword: dict[int, str] = {}
    for item in edit:
        number, separator, wording = item.partition("=")
        if not separator or not number.strip().isdigit() or not wording.strip():
            raise click.UsageError(f"--edit {item!r}: write --edit N=new wording")
        reword[int(number)] = wording.strip()
    ordering = _numbers(order, f"--order {order}") if order else []
    from researchcrew.contracts.deep import PlanDecision

    return PlanDecision.edits(plan, cut=list(cut), order=ordering, reword=reword, add=list(add))


def render_run(run: DeepRun) -> str:
    """A run as a person reads it in a terminal."""
    from researchcrew.cli._ask import render_answer

    lines = [f"Deep research run {run.run_id} — {run.status}"]
    if run.status == "awaiting_human_feedback" and run.awaiting == "clarification" and run.clarification:
        lines += ["", run.clarification.message]
    elif run.status == "awaiting_human_feedback" and run.plan is not None:
        lines += ["", f"Proposed plan for: {run.plan.question}"]
        lines += [f"  {position}. {item.question}" for position, item in enumerate(run.plan.items, start=1)]
        lines += [f"  ({run.plan.note})"] if run.plan.note else []
    if run.status == "awaiting_human_feedback":
        what = "--answer TEXT" if run.awaiting == "clarification" else "--approve (or --cut/--order/--edit/--add)"
        lines += ["", f"Continue with: researchcrew research --run {run.run_id} {what}   (or --cancel)"]
    if run.error:
        lines.append(f"Error: {run.error}")
    report = run.report
    if report is None:
        return "\n".join(lines) + "\n"
    lines += ["", render_answer(report.response).rstrip(), "", "Plan:"]
    for position, sub in enumerate(report.sub_questions, start=1):
        extra = f", {sub.references_kept} reference(s) followed" if sub.references_kept else ""
        lines.append(f"  {position}. [{sub.status}] {sub.item.question} ({sub.citations} citation(s){extra})")
    kept = [reference for reference in report.references if reference.outcome == "kept"]
    if report.references:
        counts = {
            outcome: sum(1 for r in report.references if r.outcome == outcome)
            for outcome in ("kept", "rejected", "unresolved", "skipped")
        }
        lines += ["", "References: " + ", ".join(f"{count} {outcome}" for outcome, count in counts.items() if count)]
        lines += [f"  followed {reference.kind} {reference.target[:90]} — {reference.reason}" for reference in kept]
    quality = report.quality[-1] if report.remediated else report.quality[0]
    lines += [
        "",
        "Quality: " + f"overall {quality.overall:.2f} (citations {quality.citation_correctness:.2f}, coverage "
        f"{quality.plan_coverage:.2f}, relevance {quality.query_relevance:.2f}, structure {quality.structure:.2f})"
        + (" after one remediation retry" if report.remediated else "")
        + ("" if quality.passed else f", below the threshold {quality.threshold:.2f}"),
        *[
            f"  section {finding.section or '(outside the plan)'}: {finding.kind.replace('_', ' ')} — {finding.detail}"
            for finding in quality.findings
        ],
        *[
            f"  revised: section {revision.section or '(outside the plan)'} {revision.outcome}"
            for revision in report.revisions
        ],
        f"Budget: {report.budget.elapsed_s:.1f} of {report.budget.deadline_s:.0f} s"
        + (
            f", {report.budget.tokens_used} of {report.budget.token_budget} tokens"
            if report.budget.token_budget
            else ""
        ),
    ]
    if report.not_done:
        lines += ["Not done:"] + [f"  - {note}" for note in report.not_done]
    return "\n".join(lines) + "\n"


def _progress(event: DeepProgressEvent) -> None:
    """One line on stderr for the events a person wants to follow."""
    if event.stage_event is not None:
        return
    detail = event.detail
    if event.phase == "research" and event.status == "started":
        click.echo(f"… researching {event.sub_question}: {detail.get('question', '')}", err=True)
    elif event.phase == "references" and detail.get("outcome") == "kept":
        click.echo(f"  ↳ followed {detail.get('kind')} {str(detail.get('target', ''))[:80]}", err=True)
    elif event.phase == "quality" and event.status == "finished" and "overall" in detail:
        click.echo(f"… quality {detail['overall']:.2f}" + (" → retrying once" if detail.get("retry") else ""), err=True)
    elif event.phase in ("clarify", "plan", "report") and event.status == "started":
        click.echo(f"… {event.phase}", err=True)


class _Door(Protocol):
    """Where the run works: this process's ``DeepResearch``, or the data folder's running service (its
    ``/v1/deep-runs`` routes over the Unix socket). An answer or a decision is stored and the run resumed at once."""

    async def research(self, request: ResearchRequest, options: DeepOptions) -> DeepRun: ...
    async def get(self, run_id: str) -> DeepRun: ...
    async def cancel(self, run_id: str) -> DeepRun: ...
    async def answer(self, run_id: str, answer: str) -> DeepRun: ...
    async def decide(self, run_id: str, decision: PlanDecision) -> DeepRun: ...
    async def export(self, run_id: str, format: str, output: str) -> tuple[str, int]: ...


class _InProcess:
    def __init__(self, deep: DeepResearch, user_id: str, on_event: OnEvent) -> None:
        self.deep, self.user_id, self.on_event = deep, user_id, on_event

    async def research(self, request: ResearchRequest, options: DeepOptions) -> DeepRun:
        return await self.deep.research(request, options, on_event=self.on_event)

    async def get(self, run_id: str) -> DeepRun:
        return await self.deep.get_research_run(run_id, user_id=self.user_id)

    async def cancel(self, run_id: str) -> DeepRun:
        return await self.deep.cancel_research(run_id, user_id=self.user_id)

    async def answer(self, run_id: str, answer: str) -> DeepRun:
        await self.deep.answer_clarification(run_id, user_id=self.user_id, answer=answer)
        return await self.deep.resume_research(run_id, user_id=self.user_id, on_event=self.on_event)

    async def decide(self, run_id: str, decision: PlanDecision) -> DeepRun:
        await self.deep.decide_plan(run_id, user_id=self.user_id, decision=decision)
        return await self.deep.resume_research(run_id, user_id=self.user_id, on_event=self.on_event)

    async def export(self, run_id: str, format: str, output: str) -> tuple[str, int]:
        exported = await self.deep.export_report(run_id, user_id=self.user_id, format=format)
        exported.write(output)
        return exported.format, len(exported.content)


class _ThroughService:
    def __init__(self, client: ServiceClient, user_id: str, on_event: OnEvent) -> None:
        self.client, self.user_id, self.on_event = client, user_id, on_event

    async def _until_paused(self, segment: AsyncIterator[DeepProgressEvent | DeepRun]) -> DeepRun:
        """The segment's events to ``on_event`` as they come; the run it ends with (paused or finished)."""
        from researchcrew.contracts.deep import DeepRun
        from researchcrew.errors import ServiceError

        run: DeepRun | None = None
        async for item in segment:
            if isinstance(item, DeepRun):
                run = item
            elif self.on_event is not None:
                self.on_event(item)
        if run is None:
            raise ServiceError(f"the service at {self.client.url} ended the deep run's stream without the run")
        return run

    async def research(self, request: ResearchRequest, options: DeepOptions) -> DeepRun:
        return await self._until_paused(self.client.deep_research(request, options))

    async def get(self, run_id: str) -> DeepRun:
        return await self.client.deep_run(self.user_id, run_id)

    async def cancel(self, run_id: str) -> DeepRun:
        return await self.client.cancel_deep_run(self.user_id, run_id)

    async def answer(self, run_id: str, answer: str) -> DeepRun:
        return await self._until_paused(self.client.answer_clarification(self.user_id, run_id, answer))

    async def decide(self, run_id: str, decision: PlanDecision) -> DeepRun:
        return await self._until_paused(self.client.decide_plan(self.user_id, run_id, decision))

    async def export(self, run_id: str, format: str, output: str) -> tuple[str, int]:
        content = await self.client.deep_report(self.user_id, run_id, format)
        await asyncio.to_thread(_write_file, output, content)
        return format, len(content)


def _write_file(path: str, content: bytes) -> None:
    """Write ``content`` to ``path``, its folders made as needed (as ``ExportedReport.write`` does in process)."""
    from pathlib import Path

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)


async def _interact(door: _Door, run: DeepRun) -> DeepRun:
    """Ask the person at the terminal for each pause's answer or decision, until the run ends."""
    from researchcrew.errors import PlanDecisionError, ServiceError

    while run.status == "awaiting_human_feedback":
        if run.awaiting == "clarification" and run.clarification is not None:
            click.echo(run.clarification.message + "\n", err=True)
            answer = await asyncio.to_thread(
                click.prompt, "Your reply (Enter: just answer)", default="", show_default=False, err=True
            )
            run = await door.answer(run.run_id, answer or "just answer")
        elif run.plan is not None:
            click.echo(render_run(run).split("\n\nContinue with:", 1)[0] + "\n", err=True)
            while True:
                text = await asyncio.to_thread(click.prompt, _PLAN_HELP, default="", show_default=False, err=True)
                try:
                    run = await door.decide(run.run_id, parse_plan_commands(text, run.plan))
                    break
                except (_Decision, PlanDecisionError) as error:
                    click.echo(f"Error: {error}", err=True)
                except ServiceError as error:  # the service checked the decision against the plan: 422, as above
                    if error.status != 422:
                        raise
                    click.echo(f"Error: {error.detail}", err=True)
        else:  # paused for something this command cannot answer: show the run as it is
            break
    return run


@click.command()
@click.argument("question", required=False)
@click.option("--user", "user_id", default="local", show_default=True, envvar="RESEARCHCREW_USER", help="Whose run.")
@click.option(
    "--session", "session_id", default="cli", show_default=True, envvar="RESEARCHCREW_SESSION", help="Conversation."
)
@click.option("-y", "--yes", "approve", is_flag=True, help="Ask nothing: approve the proposed plan as it is.")
@click.option("--max-items", type=click.IntRange(1, 20), default=None, help="Most sub-questions (default 8).")
@click.option("--deadline", "deadline_s", type=click.FloatRange(1, 7200), default=None, help="Seconds of research.")
@click.option("--token-budget", type=click.IntRange(1000), default=None, help="LLM tokens for the whole run.")
@click.option("--no-clarify", is_flag=True, help="Do not ask clarifying questions first.")
@click.option("--no-references", is_flag=True, help="Do not follow references found in the evidence.")
@click.option("--source", "preferred_sources", multiple=True, metavar="TYPE", help="Put this source type first.")
@click.option("--exclude", "exclude_sources", multiple=True, metavar="TYPE", help="Do not search this source type.")
@click.option("--run", "run_id", default=None, metavar="ID", help="Continue or show a paused run.")
@click.option("--answer", default=None, help="With --run: the reply to its clarifying questions.")
@click.option("--approve", "approve_plan", is_flag=True, help="With --run: approve its plan as proposed.")
@click.option("--cut", multiple=True, type=int, metavar="N", help="With --run: cut plan item N (repeatable).")
@click.option("--order", default=None, metavar="N,N,…", help="With --run: research these plan items first, in order.")
@click.option("--edit", multiple=True, metavar="N=TEXT", help="With --run: reword plan item N (repeatable).")
@click.option("--add", multiple=True, metavar="TEXT", help="With --run: add a sub-question (repeatable).")
@click.option("--cancel", is_flag=True, help="With --run: cancel the paused run.")
@click.option(
    "--length",
    type=click.Choice(["brief", "standard", "detailed"]),
    default="standard",
    show_default=True,
    help="How long the report is: fewer or more sub-questions and statements per section.",
)
@click.option(
    "--type",
    "report_type",
    type=click.Choice(["report", "literature_review", "comparison"]),
    default="report",
    show_default=True,
    help="report; literature_review (themes with their sources); comparison (contrasts per aspect, a table).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Also write the finished report to this file (.md, .html, .pdf or .docx).",
)
@click.option(
    "--format",
    "export_format",
    type=click.Choice(["md", "html", "pdf", "docx"]),
    default=None,
    help="With -o: the file's format (default: from its extension).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
@local_option
def research(
    question: str | None,
    user_id: str,
    session_id: str,
    approve: bool,
    max_items: int | None,
    deadline_s: float | None,
    token_budget: int | None,
    no_clarify: bool,
    no_references: bool,
    preferred_sources: tuple[str, ...],
    exclude_sources: tuple[str, ...],
    run_id: str | None,
    answer: str | None,
    approve_plan: bool,
    cut: tuple[int, ...],
    order: str | None,
    edit: tuple[str, ...],
    add: tuple[str, ...],
    cancel: bool,
    length: str,
    report_type: str,
    output: str | None,
    export_format: str | None,
    as_json: bool,
    local: bool,
) -> None:
    """Deep research: clarifying questions, a plan you approve, each sub-question researched, one checked report."""
    from pydantic import ValidationError

    from researchcrew.contracts.deep import DeepOptions, PlanDecision
    from researchcrew.contracts.request import ResearchRequest

    steering = answer is not None or approve_plan or cut or order or edit or add or cancel
    if run_id is None and question_is_piped(question):
        question = read_question(question, missing="give a QUESTION, or --run ID to continue a paused run")
    if run_id is None and not question:
        raise click.UsageError("give a QUESTION, or --run ID to continue a paused run")
    if run_id is not None and question:
        raise click.UsageError("give either a QUESTION or --run ID, not both")
    if run_id is None and steering:
        raise click.UsageError("--answer, --approve, --cut, --order, --edit, --add and --cancel need --run ID")
    if export_format is not None and output is None:
        raise click.UsageError("--format needs -o/--output PATH")
    if output is not None:
        from researchcrew.deep.export import format_for
        from researchcrew.errors import ConfigurationError

        try:
            chosen_format = format_for(output, export_format)
        except ConfigurationError as error:
            raise click.UsageError(str(error)) from error
    interactive = not approve and not as_json and sys.stdin.isatty()
    on_event = None if as_json else _progress
    if run_id is None:
        try:
            request = ResearchRequest(
                question=question or "",
                user_id=user_id,
                session_id=session_id,
                preferred_sources=list(preferred_sources) or None,
                exclude_sources=list(exclude_sources) or None,
            )
            options = DeepOptions(
                auto_approve=approve,
                max_subquestions=max_items,
                deadline_s=deadline_s,
                token_budget=token_budget,
                clarify=not no_clarify,
                follow_references=not no_references,
                length=length,
                report_type=report_type,
            )
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
            raise click.ClickException(f"invalid request: {problems}") from error

    async def start(door: _Door) -> DeepRun:
        run = await door.research(request, options)
        return await _interact(door, run) if interactive else run

    async def steer(door: _Door) -> DeepRun:
        assert run_id is not None  # noqa: S101 - checked above
        run = await door.get(run_id)
        if cancel:
            return await door.cancel(run_id)
        if answer is not None:
            run = await door.answer(run_id, answer)
        elif approve_plan or cut or order or edit or add:
            if run.plan is None or run.awaiting != "plan_approval":
                raise click.ClickException(f"run {run_id} is not waiting for a plan decision ({run.status})")
            decision = (
                PlanDecision()
                if approve_plan and not (cut or order or edit or add)
                else _edits(cut, order, edit, add, run.plan)
            )
            run = await door.decide(run_id, decision)
        else:
            return run
        return await _interact(door, run) if interactive else run

    async def work(door: _Door) -> DeepRun:
        run = await (steer if run_id is not None else start)(door)
        if output is not None and run.status == "completed":
            written, size = await door.export(run.run_id, chosen_format, output)
            click.echo(f"Report written to {output} ({written}, {size} bytes)", err=True)
        elif output is not None:
            click.echo(
                f"Run {run.run_id} is {run.status}: the report is written once it completes "
                f"(continue with --run {run.run_id} ... -o {output})",
                err=True,
            )
        return run

    async def in_process(runtime: Runtime) -> DeepRun:
        return await work(_InProcess(await runtime.deep_research(), user_id, on_event))

    async def in_service(client: ServiceClient) -> DeepRun:
        return await work(_ThroughService(client, user_id, on_event))

    settings = load_settings()
    route = route_for(settings, local=local, user_id=user_id)
    if route.mode == "service":
        run: DeepRun = with_service(route, in_service, user_id=user_id)
    else:
        run = with_runtime(in_process, settings)
    if as_json:
        echo_json(run.model_dump(mode="json"))
    else:
        click.echo(render_run(run))
