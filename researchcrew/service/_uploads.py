"""Question files sent over HTTP: a raw body with its content type, or a ``multipart/form-data`` upload.

``read_upload(request)`` returns the file's name (its suffix picks the loader: ``.txt``, ``.csv``, ``.jsonl``), its
text, and the text fields of a form. The text is then checked by ``researchcrew.jobs.sources.parse_questions``, the
same loader the CLI uses, so a bad file is refused with the same messages, by line number.

Multipart bodies are read with the standard library's ``email`` parser (the service's body limit has already
bounded them), so the service needs no multipart package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser
from pathlib import PurePosixPath

from fastapi import Request

from researchcrew.jobs.sources import SUFFIXES
from researchcrew.service._problems import ApiProblem

# Content type of a raw body -> the suffix of the file it is read as.
MEDIA_SUFFIXES: dict[str, str] = {
    "text/plain": ".txt",
    "text/csv": ".csv",
    "application/csv": ".csv",
    "application/x-ndjson": ".jsonl",
    "application/jsonl": ".jsonl",
    "application/jsonlines": ".jsonl",
    "application/x-jsonlines": ".jsonl",
}
MULTIPART = "multipart/form-data"
FILE_FIELD = "file"


@dataclass
class Upload:
    """A question file received over HTTP."""

    filename: str
    text: str
    fields: dict[str, str] = field(default_factory=dict)  # the other (text) fields of a form


async def read_upload(request: Request, *, filename: str | None = None) -> Upload:
    """The question file of ``request`` (raises ``ApiProblem`` 415/422 saying what is wrong)."""
    media_type, _, _ = request.headers.get("content-type", "").partition(";")
    media_type = media_type.strip().lower()
    body = await request.body()
    if media_type == MULTIPART:
        return _from_form(request.headers["content-type"], body)
    suffix = MEDIA_SUFFIXES.get(media_type)
    if suffix is None:
        accepted = ", ".join([*MEDIA_SUFFIXES, MULTIPART])
        raise ApiProblem(415, f"Send the questions as one of {accepted}, not {media_type or 'no content type'}.")
    stem = PurePosixPath((filename or "questions").replace("\\", "/")).stem or "questions"
    name = stem + suffix  # the content type says the format, whatever the name's suffix
    return Upload(name, _text(body, name))


@dataclass
class FilePart:
    """A file of a ``multipart/form-data`` body, as sent (bytes: documents may be binary)."""

    filename: str | None
    media_type: str
    content: bytes


def read_form(content_type: str, body: bytes) -> tuple[list[FilePart], dict[str, str]]:
    """The ``file`` parts (in order) and the text fields of a ``multipart/form-data`` body."""
    files: list[FilePart] = []
    fields: dict[str, str] = {}
    for part in _form_parts(content_type, body):
        name = part.get_param("name", header="content-disposition")
        if name == FILE_FIELD or part.get_filename() is not None:
            files.append(FilePart(part.get_filename(), part.get_content_type(), _payload(part)))
        elif isinstance(name, str):
            fields[name] = _text(_payload(part), f"the form field {name!r}")
    return files, fields


def _form_parts(content_type: str, body: bytes) -> list[EmailMessage]:
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1", "replace")
    message = BytesParser(policy=policy.HTTP).parsebytes(head + body)
    if not isinstance(message, EmailMessage) or not message.is_multipart():
        raise ApiProblem(422, "The multipart/form-data body cannot be read (a boundary is missing or wrong).")
    return [part for part in message.iter_parts() if isinstance(part, EmailMessage)]


def _from_form(content_type: str, body: bytes) -> Upload:
    upload: Upload | None = None
    fields: dict[str, str] = {}
    for part in _form_parts(content_type, body):
        name = part.get_param("name", header="content-disposition")
        payload = _payload(part)
        if name == FILE_FIELD:
            media_type = part.get_content_type()
            suffix = MEDIA_SUFFIXES.get(media_type, ".txt")
            filename = _name(part.get_filename(), suffix)
            upload = Upload(filename, _text(payload, filename))
        elif isinstance(name, str):
            fields[name] = _text(payload, f"the form field {name!r}")
    if upload is None:
        raise ApiProblem(422, f"The form has no {FILE_FIELD!r} part with the questions file.")
    upload.fields = fields
    return upload


def _payload(part: Message) -> bytes:
    payload = part.get_payload(decode=True)
    return payload if isinstance(payload, bytes) else b""


def _name(filename: str | None, suffix: str) -> str:
    """The upload's own file name when its suffix is one the loaders read, else ``questions<suffix>``."""
    if filename:
        name = PurePosixPath(filename.replace("\\", "/")).name
        if PurePosixPath(name).suffix.lower() in SUFFIXES:
            return name
    return f"questions{suffix}"


def _text(body: bytes, what: str) -> str:
    try:
        return body.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ApiProblem(422, f"{what}: not UTF-8 text (byte {error.start}: {error.reason})") from None
