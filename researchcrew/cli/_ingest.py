"""`researchcrew ingest PATH...`: load files, folders and globs into the knowledge base.

Prints a progress bar (documents, documents/s and chunks/s) on stderr and a one-screen summary, or with ``--json``
the whole report for scripts. Exits non-zero only when nothing could be ingested (every input failed, or the store
or model failed); problems with single files are listed and the rest is ingested.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from researchcrew.cli._common import echo_json, load_settings, local_option, route_for, with_runtime, with_service

if TYPE_CHECKING:
    from researchcrew.client import Route
    from researchcrew.knowledge.ingest import IngestReport
    from researchcrew.runtime import Runtime

_SHOWN_ERRORS = 10


@click.command()
@click.argument("paths", nargs=-1, type=str)
@click.option("--demo", is_flag=True, help="Ingest the bundled demo corpus (105 arXiv abstracts, CC0).")
@click.option(
    "--field",
    "fields",
    multiple=True,
    metavar="NAME=SOURCE",
    help="JSONL field mapping, e.g. --field id=_id --field text=body (names: id, title, text, date, url, "
    "authors; dotted sources reach into objects). Repeatable. Common layouts are detected.",
)
# 1024 is ingest.DEFAULT_BATCH_SIZE, written out so that `researchcrew --help` does not import the loaders.
@click.option(
    "--batch-size",
    type=click.IntRange(min=1, max=10_000),
    default=1024,
    show_default=True,
    help="Documents handed to the knowledge base per batch.",
)
@click.option(
    "--keep-missing",
    is_flag=True,
    help="Keep documents that disappeared from a file (default: remove them from the knowledge base).",
)
@click.option(
    "--collection",
    default="shared",
    show_default=True,
    help="The document collection to store into: `shared` (everyone reads it), `user:<id>` (only that user), or "
    "a named one from `researchcrew collections add`.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (for scripts).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@local_option
def ingest(
    paths: tuple[str, ...],
    demo: bool,
    fields: tuple[str, ...],
    batch_size: int,
    keep_missing: bool,
    collection: str,
    as_json: bool,
    no_progress: bool,
    local: bool,
) -> None:
    """Load files, folders or globs into the knowledge base.

    Markdown, plain text, PDF, HTML (main text) and JSONL records. Unchanged documents are skipped without any
    work; a changed file replaces its old version. Examples:

    \b
      researchcrew ingest --demo
      researchcrew ingest notes/ papers/*.pdf
      researchcrew ingest corpus.jsonl --field id=_id --field text=text
      researchcrew ingest team-notes/ --collection team-x
    """
    targets = list(paths)
    if demo:
        from researchcrew.data import demo_corpus_path

        targets.append(str(demo_corpus_path()))
    if not targets:
        raise click.UsageError("give at least one PATH (file, folder or glob), or --demo")
    from researchcrew.knowledge.loaders import FieldMapError, parse_field_map

    try:
        field_map = parse_field_map(fields)
    except FieldMapError as error:
        raise click.BadParameter(str(error), param_hint="--field") from error

    show = not (no_progress or as_json)
    # On a terminal a progress bar; in a log file or a pipe plain lines, at most one every PROGRESS_EVERY_S.
    progress: bool | Callable[[int, int, int], None] = show and (sys.stderr.isatty() or _PlainProgress())

    async def load(runtime: Runtime) -> IngestReport:
        await _check_collection(runtime, collection)
        knowledge_base = await runtime.knowledge_base()
        report: IngestReport = await asyncio.to_thread(
            knowledge_base.ingest,
            targets,
            field_map=field_map,
            batch_size=batch_size,
            progress=progress,
            remove_missing=not keep_missing,
            collection=collection,
        )
        return report

    settings = load_settings()
    route = route_for(settings, local=local)
    if route.mode == "service":
        report = _through_service(route, targets, list(fields), batch_size, keep_missing)
    else:
        report = with_runtime(load, settings)
    if as_json:
        echo_json({**report.model_dump(mode="json"), "succeeded": report.succeeded})
    else:
        click.echo(render_report(report))
    if not report.succeeded:
        raise SystemExit(1)


async def _check_collection(runtime: Runtime, name: str) -> None:
    """A valid name; a named shared collection must have been made (`collections add`) before it is filled."""
    from researchcrew.knowledge.access import SHARED, check_collection, is_private

    check_collection(name)
    if name != SHARED and not is_private(name):
        from researchcrew.knowledge.collections_store import CollectionsStore

        await CollectionsStore((await runtime.memory_store()).engine).get(name)


PROGRESS_EVERY_S = 10.0


def _through_service(route: Route, targets: list[str], fields: list[str], batch_size: int, keep_missing: bool) -> Any:
    """The ingest done by the running service of the data folder. It reads the files itself: the paths go as
    absolute ones (relative to this command's folder), and the report names them as they were given. The service
    runs as the socket's owner, the only user (with root) who may connect, so it reads what this user can read."""
    from researchcrew.knowledge.ingest import IngestReport

    here = os.getcwd()
    absolute = [os.path.join(here, os.path.expanduser(target)) for target in targets]
    options = {"fields": fields, "batch_size": batch_size, "remove_missing": not keep_missing}
    found = with_service(route, lambda client: client.ingest(absolute, **options))
    report = IngestReport.model_validate(found)
    prefix = os.path.join(here, "")
    relative = any(not os.path.isabs(os.path.expanduser(target)) for target in targets)
    if relative:  # the issues as the in-process command words them: the paths as given
        errors = [issue.model_copy(update={"file": issue.file.removeprefix(prefix)}) for issue in report.errors]
        report = report.model_copy(update={"errors": errors})
    return report


class _PlainProgress:
    """Progress as plain lines on stderr (no carriage returns): one when work starts, then at most one every
    ``PROGRESS_EVERY_S``, and one at the end."""

    def __init__(self) -> None:
        self._last: float | None = None

    def __call__(self, done: int, total: int, chunks: int) -> None:
        now = time.monotonic()
        if self._last is not None and now - self._last < PROGRESS_EVERY_S and done < total:
            return
        self._last = now
        click.echo(f"ingesting: {done}/{total} documents, {chunks} chunks", err=True)


def render_report(report: IngestReport) -> str:
    """A one-screen summary: what changed, how fast, and the first problems."""
    lines = [
        f"Files: {report.files_seen} read"
        + (f", {report.files_failed} failed" if report.files_failed else "")
        + (f", {report.files_ignored} ignored (unsupported type)" if report.files_ignored else ""),
        f"Documents: {report.documents_added} added, {report.documents_replaced} replaced, "
        f"{report.documents_unchanged} unchanged, {report.documents_failed} failed"
        + (f", {report.documents_removed} removed" if report.documents_removed else ""),
        f"Chunks: {report.chunks_added} added"
        + (f", {report.chunks_removed} removed" if report.chunks_removed else ""),
        f"Time: {report.seconds:.1f} s ({report.setup_seconds:.1f} s opening the knowledge base and model); "
        f"{report.documents_per_second:.1f} documents/s, {report.chunks_per_second:.1f} chunks/s",
    ]
    if report.aborted:
        lines.append(f"Stopped early: {report.aborted}")
    if report.errors:
        lines.append(f"Problems ({len(report.errors)}):")
        lines.extend(f"  {issue}" for issue in report.errors[:_SHOWN_ERRORS])
        if len(report.errors) > _SHOWN_ERRORS:
            lines.append(f"  ... and {len(report.errors) - _SHOWN_ERRORS} more (--json lists them all)")
    if not report.succeeded:
        lines.append("Nothing was ingested.")
    return "\n".join(lines)
