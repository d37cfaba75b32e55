"""``ingest_paths``: files, folders and globs → the knowledge base, doing only the work that changed.

1. **Load** every file (``researchcrew.knowledge.loaders``); problems become ``IngestIssue``s, never exceptions.
2. **Skip unchanged documents before any chunking or embedding**: the knowledge base's index (source key → doc id
   of complete documents) is read once, and a document whose content hash is already there costs nothing more.
   Re-ingesting an unchanged folder embeds zero chunks.
3. **Add the rest in batches** through ``KnowledgeBase.add_documents``, which chunks, embeds and upserts, and
   replaces a source key's old chunks only after the new ones are in. A crash leaves at worst an incomplete
   document that the next run detects and finishes.
4. **Drop what disappeared from a file** (a JSONL record deleted, a PDF that lost pages) — only for files that
   were read completely, so a bad line never deletes its record's previous version.
"""

from __future__ import annotations

import bisect
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import Field

from researchcrew.contracts._base import Contract
from researchcrew.errors import KnowledgeBaseError, ModelUnavailableError
from researchcrew.knowledge._schema import SHARED
from researchcrew.knowledge.access import check_collection
from researchcrew.knowledge.documents import Chunk, Document
from researchcrew.knowledge.loaders import IngestIssue, discover, load_file, parse_field_map
from researchcrew.knowledge.loaders._base import file_key

if TYPE_CHECKING:
    from pathlib import Path

logger = logging.getLogger(__name__)

# Documents per ``add_documents`` call. Each call looks up its keys' state once (a collection scan on Milvus Lite):
# 1,024 takes SciFact in 6 scans instead of 41 (~9 s less). Embedding still goes in groups of ~256 chunks.
DEFAULT_BATCH_SIZE = 1024
ProgressCallback = Callable[[int, int, int], None]  # (documents done, documents to add, chunks added)


class _AddReport(Protocol):
    documents_added: int
    documents_replaced: int
    documents_skipped: int
    chunks_added: int


class KnowledgeBaseLike(Protocol):
    """The part of ``KnowledgeBase`` that ingestion uses."""

    def add_documents(
        self,
        documents: Sequence[Document],
        *,
        progress: Callable[[int, int], None] | None = None,
        collection: str = SHARED,
        chunked: Callable[[Document, list[Chunk]], None] | None = None,
    ) -> _AddReport: ...

    def document_index(self, collection: str | None = None) -> dict[str, str]: ...

    def remove(
        self,
        *,
        source_keys: Sequence[str] = (),
        doc_ids: Sequence[str] = (),
        collection: str | None = None,
        derived: bool = True,
    ) -> int: ...

    def reindex_keywords(self) -> Any: ...


class IngestReport(Contract):
    """What one ingest did, for the CLI summary and ``--json``."""

    files_seen: int = Field(default=0, ge=0, description="Files found from the paths, folders and globs given.")
    files_failed: int = Field(default=0, ge=0, description="Files that produced no document at all.")
    files_ignored: int = Field(default=0, ge=0, description="Files in folders with an unsupported extension.")
    documents_added: int = Field(default=0, ge=0, description="New documents indexed.")
    documents_replaced: int = Field(default=0, ge=0, description="Documents whose content changed, re-indexed.")
    documents_unchanged: int = Field(default=0, ge=0, description="Documents already indexed as they are: no work.")
    documents_failed: int = Field(default=0, ge=0, description="Documents or records that could not be ingested.")
    documents_removed: int = Field(default=0, ge=0, description="Documents gone from their file, removed.")
    chunks_added: int = Field(default=0, ge=0, description="Chunks embedded and written.")
    chunks_removed: int = Field(default=0, ge=0, description="Chunks deleted with removed documents.")
    annotations_added: int = Field(default=0, ge=0, description="Facts and table rows extracted (issue 22).")
    annotation_seconds: float = Field(default=0.0, ge=0, description="Part of the wall time spent on annotations.")
    annotation_notes: list[str] = Field(
        default_factory=list, description="What the annotation caps cut (rows, columns, cells), per document."
    )
    summaries_added: int = Field(
        default=0, ge=0, description="Summaries of long documents and their sections written (issue 22)."
    )
    summary_seconds: float = Field(default=0.0, ge=0, description="Part of the wall time spent on summaries.")
    errors: list[IngestIssue] = Field(default_factory=list, description="What could not be ingested, and why.")
    aborted: str | None = Field(default=None, description="Why the ingest stopped early (store or model failure).")
    seconds: float = Field(default=0.0, ge=0, description="Wall time of the whole ingest.")
    setup_seconds: float = Field(
        default=0.0, ge=0, description="Part of it spent opening the knowledge base and loading the model (once)."
    )
    documents_per_second: float = Field(
        default=0.0,
        ge=0,
        description="Documents added or replaced per second: read, chunk, embed, insert (setup not counted).",
    )
    chunks_per_second: float = Field(default=0.0, ge=0, description="Chunks written per second (setup not counted).")

    @property
    def documents_indexed(self) -> int:
        return self.documents_added + self.documents_replaced

    @property
    def succeeded(self) -> bool:
        """Something is in the knowledge base for the input: added, replaced or already there unchanged."""
        return self.aborted is None and (self.documents_indexed + self.documents_unchanged) > 0


def ingest_paths(
    kb: KnowledgeBaseLike,
    paths: Iterable[str | os.PathLike[str]] | str | Path,
    *,
    field_map: Mapping[str, str] | Sequence[str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: bool | ProgressCallback = True,
    remove_missing: bool = True,
    collection: str = SHARED,
) -> IngestReport:
    """Ingest files, folders (recursive) and globs into ``kb``; see the module docstring for what is done.

    ``field_map`` maps JSONL fields (``{"id": "_id", "text": "body"}`` or ``["id=_id", "text=body"]``).
    ``progress``: ``True`` shows a progress bar on stderr when it is a terminal (nothing otherwise: a bar's
    carriage-return frames do not belong in log files), ``False`` nothing, a callable is called with
    (documents done, documents to add, chunks added). ``collection``: which document collection the documents go
    into (``knowledge/access.py``). Raises for usage mistakes (a bad field mapping, a batch size below 1, an invalid
    collection name) and ``KnowledgeBaseError`` when the store cannot be read at all; everything about the input,
    and a store or model failure part-way, is reported in the returned ``IngestReport``.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    check_collection(collection)  # CollectionError for a bad name: fail before any work
    mapping = parse_field_map(field_map)  # FieldMapError (a ValueError) for a bad mapping: fail before any work
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    started = time.perf_counter()
    report = IngestReport()
    found = discover(paths)
    report.errors.extend(found.issues)
    report.documents_failed += len(found.issues)
    report.files_seen = len(found.files)
    report.files_ignored = len(found.ignored)
    if found.ignored:
        logger.info("ignored %d file(s) with unsupported extensions, e.g. %s", len(found.ignored), found.ignored[0])

    setup_started = time.perf_counter()
    # A knowledge base whose keyword-search text an older version wrote is brought up to date first (no
    # re-embedding; a no-op when it is current): the ingest writes into it either way.
    kb.reindex_keywords()
    index = kb.document_index(collection)  # once: everything below is decided against it
    report.setup_seconds = time.perf_counter() - setup_started
    known_keys = sorted(index)

    pending: list[Document] = []
    unchanged: list[Document] = []  # annotated when their annotations are missing (made before annotations existed)
    stale: list[str] = []
    for path in _reading(found.files, progress):
        result = load_file(path, field_map=mapping)
        report.errors.extend(result.issues)
        report.documents_failed += len(result.issues)
        if not result.documents:
            report.files_failed += 1
            continue
        present = set()
        for document in result.documents:
            present.add(document.source_key)
            if index.get(document.source_key) == document.doc_id:
                report.documents_unchanged += 1
                unchanged.append(document)
            else:
                pending.append(document)
        if remove_missing and result.complete:
            stale.extend(key for key in keys_of_file(known_keys, file_key(path)) if key not in present)

    if pending:
        report.setup_seconds += _load_model(kb)
    chunks: dict[str, list[Chunk]] = {}  # source key → the chunks just written: annotations and summaries reuse them
    _add(kb, pending, report, batch_size=batch_size, progress=progress, collection=collection, chunks=chunks)
    _annotate(kb, pending, unchanged, stale, report, collection=collection, chunks=chunks)
    _summarise(kb, [*pending, *unchanged], stale, report, collection=collection, chunks=chunks)
    if stale and report.aborted is None:
        try:
            report.chunks_removed = kb.remove(
                source_keys=stale, collection=collection, derived=False
            )  # derived rows: done above
            report.documents_removed = len(stale)
        except KnowledgeBaseError as error:
            report.aborted = f"removing {len(stale)} deleted document(s) failed: {error}"
    report.seconds = time.perf_counter() - started
    working = report.seconds - report.setup_seconds
    if working > 0:
        report.documents_per_second = report.documents_indexed / working
        report.chunks_per_second = report.chunks_added / working
    logger.info(
        "ingest: %d added, %d replaced, %d unchanged, %d failed, %d chunks in %.1f s",
        report.documents_added,
        report.documents_replaced,
        report.documents_unchanged,
        report.documents_failed,
        report.chunks_added,
        report.seconds,
    )
    return report


def keys_of_file(sorted_keys: Sequence[str], key: str) -> list[str]:
    """The source keys that came from the file with source key ``key``: itself and ``key#...`` (records, pages).

    By prefix, not by splitting at ``#``: file names and record ids may contain ``#`` themselves.
    """
    found: list[str] = []
    for candidate in sorted_keys[bisect.bisect_left(sorted_keys, key) :]:
        if not candidate.startswith(key):
            break
        if len(candidate) == len(key) or candidate[len(key)] == "#":
            found.append(candidate)
    return found


def _interactive() -> bool:
    """Whether stderr is a terminal: a progress bar redraws itself with carriage returns, which in a log file or a
    pipe become thousands of garbled frames, so it is only drawn on a terminal."""
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def _reading(files: list[Path], progress: bool | ProgressCallback) -> Iterable[Path]:
    """The files, with a transient "reading" bar when there are several to read (PDF folders take a while)."""
    if progress is not True or len(files) < 2 or not _interactive():
        return files
    from tqdm import tqdm

    bar: Iterable[Path] = tqdm(files, desc="reading", unit="file", file=sys.stderr, leave=False, dynamic_ncols=True)
    return bar


async def aingest_paths(
    kb: KnowledgeBaseLike, paths: Iterable[str | os.PathLike[str]] | str | Path, **options: Any
) -> IngestReport:
    """``ingest_paths`` on a worker thread: reading, embedding and Milvus calls block, the event loop must not."""
    import asyncio

    return await asyncio.to_thread(ingest_paths, kb, paths, **options)


def _load_model(kb: KnowledgeBaseLike) -> float:
    """Load the knowledge base's embedding model now (it loads lazily), so that throughput excludes a one-off."""
    started = time.perf_counter()
    try:
        getattr(kb, "embedder", None)
    except ModelUnavailableError:
        return 0.0  # reported by the first add, where the ingest stops with the reason
    return time.perf_counter() - started


def _annotate(
    kb: KnowledgeBaseLike,
    written: list[Document],
    unchanged: list[Document],
    stale: list[str],
    report: IngestReport,
    *,
    collection: str,
    chunks: Mapping[str, list[Chunk]],
) -> None:
    """Annotations (issue 22) in the same pass: derived for the documents written (from the chunks ``_add`` made of
    them), and for unchanged ones that have none yet; removed for documents gone from their files. A failure here
    is reported and never undoes the chunks."""
    from researchcrew.knowledge.annotations import index_for

    annotations = index_for(kb)
    if annotations is None or report.aborted is not None:
        return
    started = time.perf_counter()
    try:
        for documents, only_missing in ((written, False), (unchanged, True)):
            for start in range(0, len(documents), DEFAULT_BATCH_SIZE):
                done = annotations.annotate(
                    documents[start : start + DEFAULT_BATCH_SIZE],
                    collection=collection,
                    only_missing=only_missing,
                    chunks=chunks,
                )
                report.annotations_added += done.annotations
                report.annotation_notes.extend(done.notes[: 100 - len(report.annotation_notes)])
        if stale:
            annotations.remove(source_keys=stale, collection=collection)
    except (KnowledgeBaseError, ModelUnavailableError) as error:
        report.errors.append(IngestIssue(file="(annotations)", reason=f"annotations not stored: {error}"))
        logger.error("annotations not stored: %s", error)
    report.annotation_seconds = time.perf_counter() - started


def _summarise(
    kb: KnowledgeBaseLike,
    documents: list[Document],
    stale: list[str],
    report: IngestReport,
    *,
    collection: str,
    chunks: Mapping[str, list[Chunk]],
) -> None:
    """Summaries of the long documents (issue 22's long-text route) in the same pass, after their chunks are stored
    (they are chosen from the chunks' vectors): made for documents whose summaries are missing or out of date
    (a PDF's whole file when one of its pages changed), removed for documents gone. A failure here is reported and
    never undoes the chunks."""
    from researchcrew.knowledge.summaries import summaries_for

    summaries = summaries_for(kb)
    if summaries is None or report.aborted is not None:
        return
    started = time.perf_counter()
    # The documents just written need no chunk count read back: a pass over short documents then reads nothing.
    counts = {(key, written[0].doc_id): len(written) for key, written in chunks.items() if written}
    try:
        if stale:  # first: a file that lost a page is summarised again below, from the pages it still has
            summaries.remove(source_keys=stale, collection=collection)
        for batch in _file_batches(documents, DEFAULT_BATCH_SIZE):
            done = summaries.summarise(batch, collection=collection, only_missing=True, chunk_counts=counts)
            report.summaries_added += done.summaries
    except (KnowledgeBaseError, ModelUnavailableError) as error:
        report.errors.append(IngestIssue(file="(summaries)", reason=f"summaries not stored: {error}"))
        logger.error("summaries not stored: %s", error)
    report.summary_seconds = time.perf_counter() - started


def _file_batches(documents: list[Document], size: int) -> list[list[Document]]:
    """The documents in batches of about ``size`` that never split the pages of one PDF (its summary covers them
    all), pages that changed and pages that did not brought together."""
    from researchcrew.knowledge.summaries import group_of

    files: dict[str, list[Document]] = {}
    for document in documents:
        files.setdefault(group_of(document.source_key), []).append(document)
    batches: list[list[Document]] = [[]]
    for pages in files.values():
        if batches[-1] and len(batches[-1]) + len(pages) > size:
            batches.append([])
        batches[-1].extend(pages)
    return [batch for batch in batches if batch]


def _add(
    kb: KnowledgeBaseLike,
    pending: list[Document],
    report: IngestReport,
    *,
    batch_size: int,
    progress: bool | ProgressCallback,
    collection: str,
    chunks: dict[str, list[Chunk]],
) -> None:
    """Hand ``pending`` to the knowledge base in batches, updating the report (and the progress display); ``chunks``
    gets the chunks of every document written, by source key."""
    display = _Progress(len(pending), progress)
    try:
        for start in range(0, len(pending), batch_size):
            batch = pending[start : start + batch_size]

            def batch_progress(done: int, _total: int, base: int = start) -> None:
                display.at(base + done)

            try:
                added = kb.add_documents(
                    batch,
                    progress=batch_progress,
                    collection=collection,
                    chunked=lambda document, made: chunks.__setitem__(document.source_key, made),
                )
            except (KnowledgeBaseError, ModelUnavailableError) as error:
                report.aborted = str(error)
                logger.error("ingest stopped after %d of %d documents: %s", start, len(pending), error)
                return
            report.documents_added += added.documents_added
            report.documents_replaced += added.documents_replaced
            report.documents_unchanged += added.documents_skipped
            report.chunks_added += added.chunks_added
            empty = len(batch) - added.documents_added - added.documents_replaced - added.documents_skipped
            if empty > 0:  # the knowledge base found nothing to index in them (e.g. only whitespace)
                report.documents_failed += empty
                reason = f"{empty} document(s) had no text left to index after chunking"
                report.errors.append(IngestIssue(file="(batch)", reason=reason))
            display.at(start + len(batch), chunks=report.chunks_added)
    finally:
        display.close()


class _Progress:
    """A tqdm bar (documents, with documents/s and chunks/s) on stderr, a callback, or nothing."""

    def __init__(self, total: int, progress: bool | ProgressCallback) -> None:
        self._callback: ProgressCallback | None = None if isinstance(progress, bool) else progress
        self._bar: Any = None
        self._started = time.perf_counter()
        self._total = total
        self._chunks = 0
        if progress is True and total and _interactive():
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit="doc", desc="ingesting", file=sys.stderr, dynamic_ncols=True)

    def at(self, done: int, *, chunks: int | None = None) -> None:
        if chunks is not None:
            self._chunks = chunks
        if self._callback is not None:
            self._callback(done, self._total, self._chunks)
        if self._bar is not None:
            self._bar.update(max(0, min(done, self._total) - self._bar.n))
            elapsed = max(time.perf_counter() - self._started, 1e-9)
            self._bar.set_postfix_str(f"{self._chunks} chunks, {self._chunks / elapsed:.1f} chunks/s", refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
