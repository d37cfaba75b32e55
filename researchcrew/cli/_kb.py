"""`researchcrew kb stats|remove|reindex`: look into the knowledge base, take documents out, upgrade its index."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from researchcrew.cli._common import echo_json, load_settings, local_option, route_for, with_runtime, with_service

if TYPE_CHECKING:
    from researchcrew.client import ServiceClient
    from researchcrew.knowledge.collection import KnowledgeBase, KnowledgeBaseStats
    from researchcrew.runtime import Runtime

_SHOWN_SOURCES = 15
T = TypeVar("T")


@click.group()
def kb() -> None:
    """Inspect and maintain the knowledge base."""


@kb.command()
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@local_option
def stats(as_json: bool, local: bool) -> None:
    """What the knowledge base holds: documents, chunks, sources, model."""
    from researchcrew.knowledge.collection import KnowledgeBaseStats

    route = route_for(load_settings(), local=local)
    if route.mode == "service":
        numbers = KnowledgeBaseStats.model_validate(with_service(route, lambda client: client.kb_stats()))
    else:
        numbers = _on_knowledge_base(lambda base: base.stats())
    if as_json:
        echo_json(numbers.model_dump(mode="json"))
    else:
        click.echo(render_stats(numbers))


@kb.command()
@click.option(
    "--source",
    "source_keys",
    multiple=True,
    metavar="KEY",
    help="A source key as stored (a file path, or path#record-id). Repeatable.",
)
@click.option("--doc", "doc_ids", multiple=True, metavar="ID", help="A document id. Repeatable.")
@click.option(
    "--path",
    "paths",
    multiple=True,
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="Everything ingested from this file or folder (all records/pages of it). Repeatable.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was removed as JSON.")
@local_option
def remove(
    source_keys: tuple[str, ...], doc_ids: tuple[str, ...], paths: tuple[Path, ...], as_json: bool, local: bool
) -> None:
    """Remove documents by source key, document id or path."""
    if not (source_keys or doc_ids or paths):
        raise click.UsageError("say what to remove: --source KEY, --doc ID or --path PATH")
    keys = list(source_keys)

    def matching(index: Callable[[], dict[str, str]]) -> None:
        if paths:
            known = index()
            for path in paths:
                matched = keys_under(known, path)
                if not matched:
                    click.echo(f"nothing ingested from {path}", err=True)
                keys.extend(matched)
        if not keys and not doc_ids:
            raise click.ClickException("no documents match; `researchcrew kb stats` lists the sources")

    def remove_matching(base: KnowledgeBase) -> int:
        matching(base.document_index)
        return base.remove(source_keys=keys, doc_ids=list(doc_ids))

    async def remove_through(client: ServiceClient) -> int:
        known = await client.kb_documents() if paths else {}
        matching(lambda: known)
        return await client.kb_remove(keys, list(doc_ids))

    route = route_for(load_settings(), local=local)
    removed = with_service(route, remove_through) if route.mode == "service" else _on_knowledge_base(remove_matching)
    if removed == 0 and not as_json:
        raise click.ClickException("nothing matched: no chunks were removed (`researchcrew kb stats` lists sources)")
    if as_json:
        echo_json({"chunks_removed": removed, "source_keys": keys, "doc_ids": list(doc_ids)})
    else:
        click.echo(f"Removed {removed} chunk(s) ({len(keys)} source key(s), {len(doc_ids)} document id(s)).")
    if removed == 0:
        raise SystemExit(1)


@kb.command()
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@local_option
def reindex(as_json: bool, local: bool) -> None:
    """Bring the knowledge base up to date after an upgrade of researchcrew.

    Gives a knowledge base made before document collections its collection field (every chunk stays in `shared`),
    and updates the keyword-search (BM25) text when the way text is analysed changed. Both work from the chunks
    already stored; nothing is re-read or re-embedded. Safe to interrupt and rerun.
    """
    from researchcrew.knowledge.collection import ReindexReport
    from researchcrew.knowledge.upgrade import UpgradeReport, upgrade_and_reindex

    route = route_for(load_settings(), local=local)
    if route.mode == "service":
        answer = with_service(route, lambda client: client.kb_reindex())
        upgrade = UpgradeReport.model_validate(answer.pop("collections_upgrade"))
        report = ReindexReport.model_validate(answer)
    else:
        upgrade, report = _on_knowledge_base(upgrade_and_reindex)
    if as_json:
        echo_json({**report.model_dump(mode="json"), "collections_upgrade": upgrade.model_dump(mode="json")})
        return
    if upgrade.upgraded:
        click.echo(
            f"Upgraded the knowledge base to document collections: {upgrade.chunks} chunk(s) copied into 'shared' "
            f"in {upgrade.seconds:.1f} s (nothing re-embedded)."
        )
    if report.chunks == 0:
        click.echo(f"Keyword search is up to date (analyzer {report.analyzer_after}); nothing to do.")
    else:
        click.echo(
            f"Re-analysed {report.chunks} chunk(s) of {report.documents} document(s) for keyword search "
            f"({report.analyzer_before} -> {report.analyzer_after}) in {report.seconds:.1f} s."
        )


def keys_under(index: dict[str, str], path: Path) -> list[str]:
    """Source keys that came from ``path``: the file itself, its records/pages (``file#...``), or a folder's files."""
    from researchcrew.knowledge.ingest import keys_of_file

    target = str(path.expanduser().resolve())
    keys = sorted(index)
    folder = target.rstrip(os.sep) + os.sep  # a folder (or one deleted since): everything below it
    return sorted({*keys_of_file(keys, target), *(key for key in keys if key.startswith(folder))})


def render_stats(numbers: KnowledgeBaseStats) -> str:
    lines = [
        f"Knowledge base: {numbers.uri} (collection {numbers.collection})",
        f"Documents: {numbers.documents}   Chunks: {numbers.chunks}"
        + (
            f"   Incomplete: {numbers.incomplete_documents} (re-run the ingest to finish)"
            if numbers.incomplete_documents
            else ""
        ),
        f"Embedding model: {numbers.embedding_model}" + (f" ({numbers.dimension} dims)" if numbers.dimension else ""),
    ]
    if numbers.sources:
        lines.append("Sources:")
        ranked = sorted(numbers.sources.items(), key=lambda item: (-item[1], item[0]))
        lines.extend(f"  {count:>7}  {source}" for source, count in ranked[:_SHOWN_SOURCES])
        if len(ranked) > _SHOWN_SOURCES:
            lines.append(f"  ... and {len(ranked) - _SHOWN_SOURCES} more (--json lists them all)")
    return "\n".join(lines)


def _on_knowledge_base(action: Callable[[KnowledgeBase], T]) -> T:
    """Run ``action`` on the knowledge base the runtime opens (nothing else is opened); a store failure ends the
    command with one line, not a traceback."""

    async def run(runtime: Runtime) -> T:
        return await asyncio.to_thread(action, await runtime.knowledge_base())

    return with_runtime(run)
