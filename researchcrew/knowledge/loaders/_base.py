"""What every loader shares: the problem record, reading bytes safely, telling text from binary."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field

from researchcrew.contracts._base import Contract
from researchcrew.errors import IngestError
from researchcrew.knowledge.documents import Document

logger = logging.getLogger(__name__)

_SNIFF_BYTES = 8192


class IngestIssue(Contract):
    """One thing that could not be ingested, said so that the user can fix it."""

    file: str = Field(description="The file (or path/pattern given) concerned.")
    line: int | None = Field(default=None, ge=1, description="The line, for line-based formats (JSONL).")
    reason: str = Field(min_length=1, description="What went wrong, in one line.")

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.reason}"


class LoaderError(IngestError):
    """The whole file cannot be loaded (the message is the reason, without the file name)."""


@dataclass
class LoadResult:
    """Documents a file produced, and the problems met on the way (a file may have both: JSONL with a bad line)."""

    documents: list[Document] = field(default_factory=list)
    issues: list[IngestIssue] = field(default_factory=list)
    # False when part of the file could not be read (e.g. a bad JSONL line): then the documents are not the whole
    # file, and keys that are missing from them must not be taken as deleted.
    complete: bool = True


def read_bytes(path: Path) -> bytes:
    """The file's bytes; a clear ``LoaderError`` when it cannot be read or is empty."""
    try:
        data = path.read_bytes()
    except IsADirectoryError as error:
        raise LoaderError("is a directory, not a file") from error
    except PermissionError as error:
        raise LoaderError("cannot read: permission denied") from error
    except OSError as error:
        raise LoaderError(f"cannot read: {error.strerror or error}") from error
    if not data.strip():
        raise LoaderError("empty file")
    return data


def looks_binary(data: bytes) -> bool:
    """NUL bytes in the first few kilobytes: no text format we read contains them (UTF-16 aside, which is rare)."""
    head = data[:_SNIFF_BYTES]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 with a byte-order mark is text
        return False
    return b"\x00" in head


def decode_text(data: bytes, *, kind: str) -> str:
    """Bytes to text: UTF-8 (with or without BOM), else the encoding charset-normalizer finds; binary refused."""
    if looks_binary(data):
        raise LoaderError(f"binary content, not {kind} text (wrong file extension?)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = _decode_other(data, kind)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise LoaderError("empty file (only whitespace)")
    return text


def _decode_other(data: bytes, kind: str) -> str:
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    if best is None:
        raise LoaderError(f"cannot decode as text (not UTF-8, no other encoding fits); is it really {kind}?")
    logger.info("decoded as %s (not UTF-8)", best.encoding)
    return str(best)


def file_key(path: Path) -> str:
    """A file's source key: its absolute path, so the same file is the same key from any working directory."""
    return str(path.resolve())


def title_from_path(path: Path) -> str:
    """A readable title from a file name when the file has none of its own: `lab_notes-2024` → `lab notes 2024`."""
    return " ".join(path.stem.replace("_", " ").replace("-", " ").split()) or path.name
