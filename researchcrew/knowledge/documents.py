"""What goes into the knowledge base: documents as loaded, and the chunks they are cut into."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from pydantic import Field

from researchcrew.contracts._base import Contract


class Document(Contract):
    """One document as a loader produced it, before chunking.

    ``source_key`` identifies where the document lives (a file path, or ``path#record-id`` for a JSONL record); a
    later ingest of the same key with different content replaces the old chunks. ``doc_id`` is derived from the
    content, so unchanged content is recognised and skipped.
    """

    source_key: str = Field(min_length=1, max_length=2_048, description="Where the document lives (path or key).")
    text: str = Field(min_length=1, description="The document's main text.")
    title: str | None = Field(default=None, description="Title, when the source has one.")
    url: str | None = Field(default=None, description="Link to the document, when it has one.")
    source_date: datetime | None = Field(default=None, description="Publication/update date.")
    authors: list[str] = Field(default_factory=list, description="Authors, in order.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Anything else the loader knows (JSON-able).")

    @property
    def content_hash(self) -> str:
        """A hash of everything that ends up in the index; equal hashes mean nothing to re-ingest."""
        digest = hashlib.sha256()
        for part in (self.title or "", self.url or "", self.source_date.isoformat() if self.source_date else ""):
            digest.update(part.encode())
            digest.update(b"\x00")
        digest.update(self.text.encode())
        return digest.hexdigest()

    @property
    def doc_id(self) -> str:
        return self.content_hash[:32]


class Chunk(Contract):
    """A window of a document sized for the embedder, with where it sits in the document."""

    chunk_id: str = Field(description="`<doc_id>:<position>`.")
    doc_id: str = Field(description="The document it came from.")
    source_key: str = Field(description="The document's source key.")
    text: str = Field(min_length=1, description="The chunk text that is embedded and indexed.")
    position: int = Field(ge=0, description="Index of the chunk within its document.")
    heading: str | None = Field(default=None, description="The section heading the chunk sits under.")
    title: str | None = Field(default=None, description="The document's title.")
    url: str | None = Field(default=None, description="The document's link.")
    source_date: datetime | None = Field(default=None, description="The document's date.")
    authors: list[str] = Field(default_factory=list, description="The document's authors.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="The document's metadata.")
