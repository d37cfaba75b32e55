"""The documents table (revision 0010): one row per document a user uploaded or had fetched over HTTP.

The file itself is kept in the data folder (``documents/<id>/<file name>``, so that a reindex can read it again and
a citation names the file), its chunks are in Milvus under the source keys listed in the row. Its repository is
``knowledge/document_store.py``. ``collection`` is the collection the document belongs to (``user:<owner>`` by
default); who may read it is decided in one place, ``knowledge.document_store.readable_by``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from researchcrew.db._base import ID_LENGTH, Base

DOCUMENT_ID_LENGTH = 32  # uuid4 hex


class DocumentRow(Base):
    """A document of the knowledge base added over HTTP: who owns it, where it is, and how its ingestion went."""

    __tablename__ = "kb_documents"
    __table_args__ = (
        Index("ix_kb_documents_owner_created", "owner", "created_at"),
        Index("ix_kb_documents_collection", "collection"),
        Index("ix_kb_documents_status", "status"),
    )

    id: Mapped[str] = mapped_column(String(DOCUMENT_ID_LENGTH), primary_key=True)
    owner: Mapped[str] = mapped_column(String(ID_LENGTH))
    collection: Mapped[str] = mapped_column(String(ID_LENGTH))
    filename: Mapped[str] = mapped_column(String(255))
    format: Mapped[str] = mapped_column(String(16))  # pdf, html, markdown, text, jsonl
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    source_url: Mapped[str | None] = mapped_column(String(2048), default=None)
    status: Mapped[str] = mapped_column(String(16))  # queued, ingesting, ready, failed
    error: Mapped[str | None] = mapped_column(Text, default=None)
    records: Mapped[int] = mapped_column(Integer, default=0)  # documents the loader found (pages, JSONL records)
    chunks: Mapped[int] = mapped_column(Integer, default=0)
    source_keys: Mapped[list[Any]]  # the knowledge base's keys of its chunks: what a delete removes
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
