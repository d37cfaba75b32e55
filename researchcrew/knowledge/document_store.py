"""The documents users added over HTTP (table ``kb_documents``): the repository, and who may see what.

A document belongs to one user (its owner) and one collection: the owner's private collection ``user:<owner>``
unless the upload named another. Who may do what is decided in three places, all here:

* ``readable_by`` — who may list and read (GET, follow the events of) a document: its owner, and every user who
  reads its collection (``shared``: everyone; ``user:<id>``: that user; a named one: its owner and members, as
  ``collections_store.named_readable`` says). It is a SQL condition, asked in the same query as the rows, so a
  member removed from a collection no longer lists its documents with the next request, and paging counts right.
* ``changeable_by`` — who may delete or reindex it: its owner (the uploader), and the owner of the named collection
  it is in (who may remove the whole collection anyway). Other readers are refused (403), non-readers told 404.
* ``may_write_collection`` — who may add to a collection, when the service has no collections store.

Open it on the memory store's engine: ``DocumentStore(store.engine)``. Every failure of the database is a
``MemoryStoreError`` naming the operation (``researchcrew.db.failures``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import ColumnElement, delete, func, or_, select
from sqlalchemy.ext.asyncio import AsyncEngine

from researchcrew.db.document_tables import DocumentRow
from researchcrew.db.failures import guarded
from researchcrew.db.models import KbCollectionRow
from researchcrew.db.session import Sessions
from researchcrew.errors import DocumentForbiddenError, DocumentNotFoundError, DocumentQuotaError
from researchcrew.knowledge.access import implicit_readable
from researchcrew.knowledge.collections_store import named_readable

logger = logging.getLogger(__name__)


DocumentStatus = Literal["queued", "ingesting", "ready", "failed"]
UNFINISHED: tuple[DocumentStatus, ...] = ("queued", "ingesting")
PRIVATE_PREFIX = "user:"
COLLECTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,255}$")


class StoredDocument(BaseModel):
    """A document as the table holds it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="The document's id.")
    owner: str = Field(description="The user who added it.")
    collection: str = Field(description="The collection it belongs to (`user:<owner>`: the owner's private one).")
    filename: str = Field(description="The file's name; citations of its passages show it.")
    format: str = Field(description="pdf, html, markdown, text or jsonl.")
    size_bytes: int = Field(ge=0, description="The file's size.")
    sha256: str = Field(description="SHA-256 of the file's bytes.")
    source_url: str | None = Field(default=None, description="The URL it was fetched from, when it was.")
    status: DocumentStatus = Field(description="queued, ingesting, ready or failed.")
    error: str | None = Field(default=None, description="Why it failed (the loader's or the store's reason).")
    records: int = Field(default=0, ge=0, description="Documents the loader found in it (pages, JSONL records).")
    chunks: int = Field(default=0, ge=0, description="Chunks of it in the knowledge base.")
    source_keys: list[str] = Field(default_factory=list, description="The knowledge base's keys of its chunks.")
    created_at: datetime = Field(description="When it was added (UTC).")
    updated_at: datetime = Field(description="When its status last changed (UTC).")
    finished_at: datetime | None = Field(default=None, description="When its ingestion ended (UTC).")


def private_collection(user_id: str) -> str:
    """The name of a user's private collection."""
    return f"{PRIVATE_PREFIX}{user_id}"


def readable_by(user_id: str) -> ColumnElement[bool]:
    """The documents ``user_id`` may list and read, as a condition on ``kb_documents``: their own, and those of
    every collection they read (``shared``, their private one, the named ones they own or are a member of)."""
    return or_(
        DocumentRow.owner == user_id,
        DocumentRow.collection.in_(implicit_readable(user_id)),
        DocumentRow.collection.in_(named_readable(user_id)),
    )


def changeable_by(user_id: str) -> ColumnElement[bool]:
    """The documents ``user_id`` may delete or reindex: their own, and those in a named collection they own."""
    owned = select(KbCollectionRow.name).where(KbCollectionRow.owner_id == user_id)
    return or_(DocumentRow.owner == user_id, DocumentRow.collection.in_(owned))


def may_write_collection(user_id: str, collection: str) -> bool:
    """Whether ``user_id`` may add documents to ``collection``: their own private one, or a shared one (no one
    writes into another user's private collection)."""
    if collection.startswith(PRIVATE_PREFIX):
        return collection == private_collection(user_id)
    return True


def _now() -> datetime:
    return datetime.now(UTC)


def _record(row: DocumentRow) -> StoredDocument:
    return StoredDocument(
        id=row.id,
        owner=row.owner,
        collection=row.collection,
        filename=row.filename,
        format=row.format,
        size_bytes=row.size_bytes,
        sha256=row.sha256,
        source_url=row.source_url,
        status=row.status,
        error=row.error,
        records=row.records,
        chunks=row.chunks,
        source_keys=[str(key) for key in row.source_keys],
        created_at=row.created_at,
        updated_at=row.updated_at,
        finished_at=row.finished_at,
    )


class DocumentStore:
    """The ``kb_documents`` table."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._read, self._write = Sessions.of(engine)

    @guarded("adding documents")
    async def add(
        self, documents: Sequence[StoredDocument], *, max_documents: int, max_bytes: int
    ) -> list[StoredDocument]:
        """Store new documents (all or none), unless their owners would then hold more than ``max_documents``
        documents or ``max_bytes`` bytes (``DocumentQuotaError``; checked in the same transaction)."""
        async with self._write.begin() as session:
            for owner in sorted({document.owner for document in documents}):
                mine = [document for document in documents if document.owner == owner]
                held, size = (
                    await session.execute(
                        select(func.count(), func.coalesce(func.sum(DocumentRow.size_bytes), 0)).where(
                            DocumentRow.owner == owner
                        )
                    )
                ).one()
                if int(held) + len(mine) > max_documents:
                    raise DocumentQuotaError(
                        f"you hold {held} document(s); {len(mine)} more would pass the limit of {max_documents} "
                        "(delete some first)"
                    )
                added = sum(document.size_bytes for document in mine)
                if int(size) + added > max_bytes:
                    raise DocumentQuotaError(
                        f"your documents take {int(size)} bytes; {added} more would pass the limit of {max_bytes} "
                        "bytes (delete some first)"
                    )
            for document in documents:
                session.add(DocumentRow(**document.model_dump()))
        return list(documents)

    @guarded("reading a document")
    async def get(self, document_id: str) -> StoredDocument | None:
        async with self._read() as session:
            row = await session.get(DocumentRow, document_id)
            return _record(row) if row is not None else None

    @guarded("reading a document")
    async def get_for(self, user_id: str, document_id: str) -> StoredDocument:
        """The document, when ``user_id`` may read it; ``DocumentNotFoundError`` otherwise (missing or not theirs)."""
        async with self._read() as session:
            query = select(DocumentRow).where(DocumentRow.id == document_id, readable_by(user_id))
            row = (await session.execute(query)).scalar_one_or_none()
        if row is None:
            raise DocumentNotFoundError(f"no document {document_id!r}")
        return _record(row)

    @guarded("reading a document")
    async def get_to_change(self, user_id: str, document_id: str) -> StoredDocument:
        """The document, when ``user_id`` may delete or reindex it; ``DocumentForbiddenError`` when they only read
        it, ``DocumentNotFoundError`` when they may not even read it (or it is missing)."""
        async with self._read() as session:
            query = select(DocumentRow, changeable_by(user_id)).where(
                DocumentRow.id == document_id, readable_by(user_id)
            )
            found = (await session.execute(query)).one_or_none()
        if found is None:
            raise DocumentNotFoundError(f"no document {document_id!r}")
        row, changeable = found
        if not changeable:
            raise DocumentForbiddenError(
                f"document {document_id!r} is {row.owner}'s: only they (or the collection's owner) may change it"
            )
        return _record(row)

    @guarded("reading documents")
    async def changeable_among(self, user_id: str, document_ids: Sequence[str]) -> set[str]:
        """Which of ``document_ids`` ``user_id`` may delete or reindex (``changeable_by``): one query for a page."""
        if not document_ids:
            return set()
        async with self._read() as session:
            query = select(DocumentRow.id).where(DocumentRow.id.in_(list(document_ids)), changeable_by(user_id))
            return set((await session.execute(query)).scalars())

    @guarded("listing documents")
    async def list_readable(
        self, user_id: str, *, limit: int, offset: int = 0, status: DocumentStatus | None = None
    ) -> tuple[list[StoredDocument], int]:
        """A page of the documents ``user_id`` may read (``readable_by``), newest first, and how many in all."""
        condition = [readable_by(user_id)]
        if status is not None:
            condition.append(DocumentRow.status == status)
        async with self._read() as session:
            total = int(
                (await session.execute(select(func.count()).select_from(DocumentRow).where(*condition))).scalar_one()
            )
            rows = (
                await session.execute(
                    select(DocumentRow)
                    .where(*condition)
                    .order_by(DocumentRow.created_at.desc(), DocumentRow.id)
                    .limit(limit)
                    .offset(offset)
                )
            ).scalars()
            return [_record(row) for row in rows], total

    @guarded("listing unfinished documents")
    async def unfinished(self) -> list[StoredDocument]:
        """Documents queued or being ingested (after a restart: to be ingested again), oldest first."""
        async with self._read() as session:
            rows = (
                await session.execute(
                    select(DocumentRow).where(DocumentRow.status.in_(UNFINISHED)).order_by(DocumentRow.created_at)
                )
            ).scalars()
            return [_record(row) for row in rows]

    @guarded("updating a document")
    async def update(self, document_id: str, /, **changes: Any) -> StoredDocument | None:
        """Change fields of a document (``status``, ``error``, ``chunks``, ...); None when it is gone."""
        async with self._write.begin() as session:
            row = await session.get(DocumentRow, document_id)
            if row is None:
                return None
            for name, value in changes.items():
                setattr(row, name, value)
            row.updated_at = _now()
            if changes.get("status") in ("ready", "failed"):
                row.finished_at = row.updated_at
            await session.flush()
            return _record(row)

    @guarded("deleting a document")
    async def delete(self, document_id: str) -> bool:
        async with self._write.begin() as session:
            result = await session.execute(delete(DocumentRow).where(DocumentRow.id == document_id))
            return bool(result.rowcount)  # type: ignore[attr-defined]


__all__ = [
    "DocumentStatus",
    "DocumentStore",
    "StoredDocument",
    "changeable_by",
    "may_write_collection",
    "private_collection",
    "readable_by",
]
