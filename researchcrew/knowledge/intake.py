"""The door of the library: a file as a request brought it, written to its folder and read by the loaders.

``check`` keeps a file only when the loaders read all of it: the record to store and the documents to ingest, or a
``DocumentInputError`` with the loader's reason (and the file deleted again). ``reload`` reads a stored file again
(a reindex, or a document still queued when the service stopped). Every document carries its library id, owner and
collection in its metadata, and the URL it was fetched from.
"""

from __future__ import annotations

import hashlib
import shutil
import uuid
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from researchcrew.errors import DocumentInputError
from researchcrew.knowledge.document_store import StoredDocument
from researchcrew.knowledge.documents import Document
from researchcrew.knowledge.loaders import format_of, load_file

MAX_NAME_CHARS = 200
_REASONS_SHOWN = 5


class UploadedFile(BaseModel):
    """A file as a request brought it."""

    filename: str
    content: bytes
    source_url: str | None = None


def safe_name(name: str | None, fallback: str = "document.txt") -> str:
    """A file name that is one path segment and printable: no folders, no control characters, not hidden."""
    base = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = "".join(ch for ch in base if ch.isprintable()).strip().lstrip(".")
    return cleaned[-MAX_NAME_CHARS:] or fallback


def _with_provenance(documents: list[Document], record: StoredDocument) -> list[Document]:
    extra = {"document_id": record.id, "collection": record.collection, "owner": record.owner}
    return [
        document.model_copy(
            update={"metadata": {**document.metadata, **extra}, "url": document.url or record.source_url}
        )
        for document in documents
    ]


def check(folder: Path, user_id: str, collection: str, file: UploadedFile) -> tuple[StoredDocument, list[Document]]:
    """Write ``file`` to ``folder/<new id>/<its name>`` and load it; the record to store and its documents, or
    ``DocumentInputError`` (and no file left)."""
    name = safe_name(file.filename)
    document_id = uuid.uuid4().hex
    path = folder / document_id / name
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.write_bytes(file.content)
        kind = format_of(path)
        result = load_file(path)
        problems = [
            issue.reason if issue.line is None else f"line {issue.line}: {issue.reason}" for issue in result.issues
        ]
        if kind is None or problems or not result.documents:
            reasons = "; ".join(problems[:_REASONS_SHOWN]) or "no text found"
            more = f" (and {len(problems) - _REASONS_SHOWN} more)" if len(problems) > _REASONS_SHOWN else ""
            raise DocumentInputError(f"{name}: {reasons}{more}", unsupported=kind is None)
    except BaseException:
        shutil.rmtree(path.parent, ignore_errors=True)
        raise
    now = datetime.now(UTC)
    record = StoredDocument(
        id=document_id,
        owner=user_id,
        collection=collection,
        filename=name,
        format=kind,
        size_bytes=len(file.content),
        sha256=hashlib.sha256(file.content).hexdigest(),
        source_url=file.source_url,
        status="queued",
        records=len(result.documents),
        source_keys=sorted({document.source_key for document in result.documents}),
        created_at=now,
        updated_at=now,
    )
    return record, _with_provenance(result.documents, record)


def reload(folder: Path, record: StoredDocument) -> list[Document]:
    """The documents of a stored file, read again."""
    result = load_file(folder / record.id / record.filename)
    if result.issues or not result.documents:
        raise DocumentInputError("; ".join(issue.reason for issue in result.issues) or "no text found")
    return _with_provenance(result.documents, record)


__all__ = ["UploadedFile", "check", "reload", "safe_name"]
