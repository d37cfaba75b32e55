"""``Library``: documents added over HTTP, checked at the door and ingested in the background, one at a time.

* **Checked before anything is stored.** A file is written to ``<data_dir>/documents/<id>/<file name>`` and read
  by the same loaders as ``researchcrew ingest``; a file the loader refuses (wrong type, empty, corrupt PDF, a bad
  JSONL line) is deleted again and the request fails with the loader's reason (``DocumentInputError``): no row,
  no file, nothing in Milvus. The per-user limits are checked in the same transaction that stores the rows.
* **One writer.** Accepted documents are queued; one task ingests them in order on a worker thread (the same
  ``KnowledgeBase.add_documents`` as the CLI), so uploads never write to Milvus side by side. Progress goes to
  subscribers (the SSE route) as ``DocumentEvent``s. A failure part-way removes what was written, and the
  document is ``failed`` with the reason.
* **Delete** removes the document's chunks from Milvus, its row and its file; a document being ingested stops at
  its next batch first. **Reindex** reads the stored file again (unchanged chunks are kept, nothing re-embedded).
* After a restart, documents still queued or ingesting are queued again (their files are on disk).

Files keep their own names on disk, so the knowledge base's source keys and a citation name the file, never a hash.
The collection is recorded in the row and in each chunk's metadata (the Milvus filter field is added with access
control).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from researchcrew.errors import (
    DocumentForbiddenError,
    DocumentInputError,
    DocumentTooLargeError,
    KnowledgeBaseError,
    ModelUnavailableError,
)
from researchcrew.knowledge.document_store import (
    COLLECTION_NAME,
    DocumentStore,
    StoredDocument,
    may_write_collection,
    private_collection,
)
from researchcrew.knowledge.documents import Document
from researchcrew.knowledge.filters import SearchFilters
from researchcrew.knowledge.intake import UploadedFile, check, reload, safe_name

if TYPE_CHECKING:
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.knowledge.collections_store import CollectionsStore
    from researchcrew.settings import Settings

logger = logging.getLogger(__name__)

FOLDER = "documents"
_KEYS_PER_CALL = 1000
_KEPT_LOADED = 8  # queued documents whose loaded text is kept in memory (not read a second time)


class DocumentEvent(BaseModel):
    """Where a document's ingestion is: its status, and while ingesting, how far."""

    id: str = Field(description="The document's id.")
    status: Literal["queued", "ingesting", "ready", "failed", "deleted"] = Field(description="Its status now.")
    done: int = Field(default=0, ge=0, description="Records (pages, JSONL records) handled so far.")
    total: int = Field(default=0, ge=0, description="Records in all.")
    chunks: int = Field(default=0, ge=0, description="Chunks in the knowledge base once ready.")
    error: str | None = Field(default=None, description="Why it failed.")

    @property
    def final(self) -> bool:
        return self.status in ("ready", "failed", "deleted")


class _Stop(Exception):
    """Raised from the progress callback to stop an ingestion (document deleted, or the service stopping)."""


def event_of(document: StoredDocument) -> DocumentEvent:
    return DocumentEvent(id=document.id, status=document.status, chunks=document.chunks, error=document.error)


class Library:
    """The documents of every user of one service process (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        store: DocumentStore,
        knowledge_base: Callable[[], Awaitable[KnowledgeBase]],
        access: CollectionsStore | None = None,
    ) -> None:
        self.settings = settings
        self.access = access  # who may store into a named collection (its owner and members)
        self.limits = settings.documents
        self.store = store
        self.folder = settings.data_dir / FOLDER
        self._knowledge_base = knowledge_base
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._loaded: dict[str, list[Document]] = {}  # read at the door; ingested without reading again
        self._progress: dict[str, DocumentEvent] = {}
        self._subscribers: dict[str, set[asyncio.Queue[DocumentEvent]]] = {}
        self._writer = asyncio.Lock()  # one store writer: an ingestion, or a delete
        self._stop_ids: set[str] = set()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._pending = 0  # queued and not yet done
        self._idle = asyncio.Event()
        self._idle.set()

    # Lifecycle -------------------------------------------------------------------------------------------------
    async def start(self) -> None:
        for document in await self.store.unfinished():
            self._enqueue(document.id)
        self._task = asyncio.create_task(self._work(), name="document-ingestion")

    async def stop(self) -> None:
        """Stop the ingestion under way at its next batch (it is queued again on the next start)."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})
        async with self._writer:  # the worker thread of an ingestion has given the store back
            pass

    # Adding ----------------------------------------------------------------------------------------------------
    async def add(
        self, user_id: str, files: Sequence[UploadedFile], collection: str | None = None
    ) -> list[StoredDocument]:
        """Check, store and queue ``files`` for ``user_id``: all of them, or none (see the module docstring)."""
        collection = collection or private_collection(user_id)
        if not COLLECTION_NAME.match(collection):
            raise DocumentInputError(f"{collection!r} is not a collection name (letters, digits, '_.:@-')")
        may_store = (
            await self.access.may_store(user_id, collection)
            if self.access is not None
            else may_write_collection(user_id, collection)
        )
        if not may_store:
            raise DocumentForbiddenError(f"you may not add documents to the collection {collection!r}")
        for file in files:
            if len(file.content) > self.limits.max_file_bytes:
                raise DocumentTooLargeError(
                    f"{safe_name(file.filename)} is {len(file.content)} bytes; the limit is "
                    f"{self.limits.max_file_bytes} bytes per file"
                )
        accepted: list[tuple[StoredDocument, list[Document]]] = []
        try:
            for file in files:
                accepted.append(await asyncio.to_thread(check, self.folder, user_id, collection, file))
            stored = await self.store.add(
                [record for record, _ in accepted],
                max_documents=self.limits.max_documents_per_user,
                max_bytes=self.limits.max_bytes_per_user,
            )
        except BaseException:
            for record, _ in accepted:
                shutil.rmtree(self.folder / record.id, ignore_errors=True)
            raise
        for record, documents in accepted:
            if len(self._loaded) < _KEPT_LOADED:  # a long queue is read again from disk when its turn comes
                self._loaded[record.id] = documents
            self._enqueue(record.id)
        return stored

    # Changing --------------------------------------------------------------------------------------------------
    async def delete(self, user_id: str, document_id: str) -> StoredDocument:
        """Remove the document's chunks from the knowledge base, its row and its file."""
        document = await self.store.get_to_change(user_id, document_id)
        self._stop_ids.add(document_id)
        try:
            async with self._writer:
                if document.source_keys:
                    knowledge_base = await self._knowledge_base()
                    await asyncio.to_thread(remove_chunks, knowledge_base, document.source_keys)
                await self.store.delete(document_id)
        finally:
            self._stop_ids.discard(document_id)
        self._loaded.pop(document_id, None)
        shutil.rmtree(self.folder / document_id, ignore_errors=True)
        self._publish(DocumentEvent(id=document_id, status="deleted"))
        return document

    async def reindex(self, user_id: str, document_id: str) -> StoredDocument:
        """Ingest the stored file again (a document already queued or ingesting is left as it is)."""
        document = await self.store.get_to_change(user_id, document_id)
        if document.status in ("queued", "ingesting"):
            return document
        updated = await self.store.update(document_id, status="queued", error=None)
        if updated is None:
            return document
        self._enqueue(document_id)
        self._publish(event_of(updated))
        return updated

    # Progress --------------------------------------------------------------------------------------------------
    def progress(self, document: StoredDocument) -> DocumentEvent:
        """The document's latest event: live progress while it is being ingested, else its row."""
        live = self._progress.get(document.id)
        return live if live is not None and document.status == "ingesting" else event_of(document)

    def subscribe(self, document_id: str) -> asyncio.Queue[DocumentEvent]:
        queue: asyncio.Queue[DocumentEvent] = asyncio.Queue()
        self._subscribers.setdefault(document_id, set()).add(queue)
        return queue

    def unsubscribe(self, document_id: str, queue: asyncio.Queue[DocumentEvent]) -> None:
        queues = self._subscribers.get(document_id)
        if queues is not None:
            queues.discard(queue)
            if not queues:
                del self._subscribers[document_id]

    def _publish(self, event: DocumentEvent) -> None:
        if event.status == "ingesting":
            self._progress[event.id] = event
        else:
            self._progress.pop(event.id, None)
        for queue in self._subscribers.get(event.id, ()):
            queue.put_nowait(event)

    # Ingestion -------------------------------------------------------------------------------------------------
    async def wait_idle(self) -> None:
        """Return once every queued document is ingested (tests, benchmarks)."""
        await self._idle.wait()

    def _enqueue(self, document_id: str) -> None:
        self._pending += 1
        self._idle.clear()
        self._queue.put_nowait(document_id)

    async def _work(self) -> None:
        while True:
            document_id = await self._queue.get()
            try:
                async with self._writer:
                    await self._ingest(document_id)
            except asyncio.CancelledError:
                raise
            except Exception:  # one document's failure never stops the queue
                logger.exception("ingesting document %s failed unexpectedly", document_id)
            finally:
                self._pending -= 1
                if self._pending == 0:
                    self._idle.set()

    async def _ingest(self, document_id: str) -> None:
        document = await self.store.get(document_id)
        if document is None or document.status not in ("queued", "ingesting"):
            return
        document = await self.store.update(document_id, status="ingesting", error=None) or document
        self._publish(DocumentEvent(id=document_id, status="ingesting", total=document.records))
        loop = asyncio.get_running_loop()

        def progress(done: int, total: int) -> None:
            if self._stopping or document_id in self._stop_ids:
                raise _Stop
            event = DocumentEvent(id=document_id, status="ingesting", done=done, total=total)
            loop.call_soon_threadsafe(self._publish, event)

        try:
            documents = self._loaded.pop(document_id, None)
            if documents is None:  # queued again after a restart, or reindexed: read the stored file
                documents = await asyncio.to_thread(reload, self.folder, document)
            knowledge_base = await self._knowledge_base()
            chunks = await asyncio.to_thread(self._write, knowledge_base, document, documents, progress)
        except _Stop:
            logger.info("ingestion of document %s stopped", document_id)
            if self._stopping:
                await self.store.update(document_id, status="queued")
            return
        except Exception as error:
            reason = str(error) or type(error).__name__
            logger.warning("document %s (%s) failed: %s", document_id, document.filename, reason)
            await self._remove_quietly(document)
            failed = await self.store.update(document_id, status="failed", error=reason[:2000], chunks=0)
            if failed is not None:
                self._publish(event_of(failed))
            return
        ready = await self.store.update(document_id, status="ready", chunks=chunks)
        if ready is not None:
            self._publish(event_of(ready))

    @staticmethod
    def _write(
        knowledge_base: KnowledgeBase,
        document: StoredDocument,
        documents: list[Document],
        progress: Callable[[int, int], None],
    ) -> int:
        """Add the documents into the document's collection; the number of its chunks in the knowledge base."""
        report = knowledge_base.add_documents(documents, progress=progress, collection=document.collection)
        _annotate(knowledge_base, documents, collection=document.collection)
        if report.documents_skipped == 0:
            chunks = report.chunks_added
        else:  # unchanged records were kept as they are: count what is there
            chunks = sum(
                knowledge_base.store.count(
                    SearchFilters(source_keys=list(batch), collections=[document.collection]).expression()
                )
                for batch in _batches(document.source_keys)
            )
        if chunks == 0:
            raise DocumentInputError("no text left to index after chunking")
        return chunks

    async def _remove_quietly(self, document: StoredDocument) -> None:
        try:
            knowledge_base = await self._knowledge_base()
            await asyncio.to_thread(remove_chunks, knowledge_base, document.source_keys)
        except Exception as error:  # the store is down: the keys stay listed, a delete or reindex tries again
            logger.warning("removing the chunks of failed document %s failed: %s", document.id, error)


def _batches(keys: Sequence[str], size: int = _KEYS_PER_CALL) -> list[Sequence[str]]:
    return [keys[start : start + size] for start in range(0, len(keys), size)]


def _annotate(knowledge_base: KnowledgeBase, documents: list[Document], *, collection: str) -> None:
    """Facts and table rows of an upload, and summaries when it is long (issue 22), as ``ingest_paths`` derives them
    for files: a failure is logged and never fails the upload (its chunks are there; a reindex derives them again)."""
    from researchcrew.knowledge.annotations import index_for
    from researchcrew.knowledge.summaries import summaries_for

    annotations = index_for(knowledge_base)
    if annotations is not None:
        try:
            annotations.annotate(documents, collection=collection)
        except (KnowledgeBaseError, ModelUnavailableError) as error:
            logger.error("the annotations of an upload were not stored: %s", error)
    summaries = summaries_for(knowledge_base)  # the long-text route's summaries, made again on reindex
    if summaries is not None:
        try:
            summaries.summarise(documents, collection=collection)
        except (KnowledgeBaseError, ModelUnavailableError) as error:
            logger.error("the summaries of an upload were not stored: %s", error)


def remove_chunks(knowledge_base: KnowledgeBase, source_keys: Sequence[str]) -> int:
    """Delete every chunk of these source keys (their annotations and summaries go with them, see
    ``KnowledgeBase.remove``), in batches: a filter names at most a few thousand keys."""
    return sum(knowledge_base.remove(source_keys=batch) for batch in _batches(source_keys))


__all__ = ["DocumentEvent", "Library", "event_of", "remove_chunks"]
