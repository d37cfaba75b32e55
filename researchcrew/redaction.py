"""Credentials never reach a user: one redaction for URLs, free text, problem details, events and log records.

Failure messages travel far: into ``SourceReport``s, the answer's caveats, ``ask --json``, HTTP problem details,
server-sent events, stored job errors and logs. Whatever a driver or SDK put into an exception (a connection URL
with its password, an ``Authorization`` header, a ``?token=`` query parameter, ``password=...``) must not travel
with it. The functions:

* ``mask_url(url)``: the URL with the password of its user-info part and secret-looking query parameters replaced
  by ``***`` (the same shape SQLAlchemy's ``render_as_string(hide_password=True)`` gives the memory store's URL);
* ``redact(text, secrets=())``: every URL inside ``text`` masked that way, ``key=``/``token=``/``password=``
  assignments, ``Bearer``/``Api-Key``/``Basic`` credentials and SQLAlchemy's ``[parameters: ...]`` masked, and
  each of ``secrets`` and of the process's known secrets (``remember_secrets``) replaced wherever it appears;
* ``public_text(text)``: ``redact`` and no SQL statement either: what a client may be shown of a driver message;
* ``remember_settings_secrets(settings)``: the configured secrets (``SecretStr`` values, URL passwords) become
  known secrets, masked even where no pattern would recognise them;
* ``install_log_redaction()``: every log record of the process (any logger, its message and its exception text)
  goes through ``redact`` before any handler sees it. The service, the worker and the scheduler call it at start.

The string functions need nothing beyond ``re`` and ``urllib``: cheap enough to run on every failure message.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote, urlsplit

MASK = "***"

# scheme://user:password@host — the password runs to the last "@" before the host (a raw "@" or ":" inside a
# password is not valid in a URL, but it is what people write).
_USERINFO = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@'\"<>]*):(?P<password>[^\s/'\"<>]+)@")
_CREDENTIAL_NAMES = r"[\w\-]*(?:token|key|password|passwd|pwd|secret)"
# ?token=... &api_key=... (query parameters whose name says they carry a secret)
_SECRET_PARAMETER = re.compile(
    r"(?P<head>[?&;](?:[\w\-]*(?:token|key|password|passwd|pwd|secret|signature|sig|auth)[\w\-]*)=)(?P<value>[^&;\s#'\"]+)",
    re.IGNORECASE,
)
# key=..., api_key='...', password="..." in free text (a DSN's keywords, a repr of keyword arguments)
_SECRET_ASSIGNMENT = re.compile(
    rf"(?P<head>(?<![\w\-?&;])(?:{_CREDENTIAL_NAMES})\s*=\s*['\"]?)(?P<value>[^&;\s#'\",)]+)", re.IGNORECASE
)
# "password": "..." in JSON quoted inside a message
_SECRET_JSON = re.compile(rf"(?P<head>[\"'](?:{_CREDENTIAL_NAMES})[\"']\s*:\s*[\"'])(?P<value>[^\"']+)", re.IGNORECASE)
# Authorization header values quoted in messages: "Bearer sk-...", "Api-Key abc", "Basic dXNlcjpwYXNz".
_SCHEME_CREDENTIAL = re.compile(r"\b(?P<head>Bearer|Api-Key|Basic|Token)\s+(?P<value>[A-Za-z0-9._~+/=\-]{6,})")
# SQLAlchemy's rendering of a failed statement: "[SQL: ...]", "[parameters: ...]", each up to the next part.
_SQL_PARAMETERS = re.compile(r"\[parameters: .*?\](?=\s*(?:\(Background on this error|\Z))", re.DOTALL)
_SQL_STATEMENT = re.compile(r"\[SQL: .*?\](?=\s*(?:\[parameters:|\(Background on this error|\Z))", re.DOTALL)
_MIN_SECRET_CHARS = 4  # shorter "secrets" would mask ordinary words

_known: set[str] = set()
_known_lock = threading.Lock()


def mask_url(url: str) -> str:
    """``url`` with its password and secret-looking query parameters replaced by ``***``; other text unchanged."""
    masked = _USERINFO.sub(lambda match: f"{match['head']}:{MASK}@", url)
    return _SECRET_PARAMETER.sub(lambda match: f"{match['head']}{MASK}", masked)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with credentials masked: passwords in URLs, secret query parameters and assignments, ``Bearer``/
    ``Api-Key`` values, SQL parameters, and every occurrence of each of ``secrets`` and of the known secrets
    (values of at least four characters)."""
    candidates = {s for s in secrets if s and len(s) >= _MIN_SECRET_CHARS} | _known
    for secret in sorted(candidates, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    text = mask_url(text)
    text = _SECRET_ASSIGNMENT.sub(lambda match: f"{match['head']}{MASK}", text)
    text = _SECRET_JSON.sub(lambda match: f"{match['head']}{MASK}", text)
    text = _SQL_PARAMETERS.sub(f"[parameters: {MASK}]", text)
    return _SCHEME_CREDENTIAL.sub(lambda match: f"{match['head']} {MASK}", text)


def public_text(text: str) -> str:
    """What a client may be shown of a message: ``redact``ed, and without the SQL statement a driver quoted."""
    return _SQL_STATEMENT.sub("", redact(text)).replace("\n\n", "\n").strip()


# ---- known secrets -------------------------------------------------------------------------------------------------
def remember_secrets(values: Iterable[str]) -> None:
    """Mask each of ``values`` (of at least four characters) wherever ``redact`` meets it from now on."""
    with _known_lock:
        _known.update(value for value in values if value and len(value) >= _MIN_SECRET_CHARS)


def forget_secrets(values: Iterable[str]) -> None:
    with _known_lock:
        _known.difference_update(values)


def known_secrets() -> frozenset[str]:
    return frozenset(_known)


def remember_settings_secrets(settings: Any) -> None:
    """Remember every secret of ``settings`` (a ``Settings``, or any Pydantic model): ``SecretStr`` values and the
    passwords (raw and percent-decoded) of URL-valued fields, in every nested group."""
    remember_secrets(_secrets_in(settings, depth=0))


def _secrets_in(value: Any, depth: int) -> Iterable[str]:
    if depth > 4 or value is None:
        return
    if hasattr(value, "get_secret_value"):
        secret = value.get_secret_value()
        if isinstance(secret, str):
            yield secret
        return
    if isinstance(value, str):
        if "://" in value and "@" in value:
            try:
                password = urlsplit(value.strip()).password
            except ValueError:
                return
            if password:
                yield password
                yield unquote(password)
        return
    fields = getattr(type(value), "model_fields", None)
    if isinstance(fields, dict):
        for name in fields:
            yield from _secrets_in(getattr(value, name, None), depth + 1)


# ---- log records ---------------------------------------------------------------------------------------------------
_installed_factory: Callable[..., logging.LogRecord] | None = None


def redact_record(record: logging.LogRecord) -> logging.LogRecord:
    """``record`` with its message, exception text and stack redacted (in place)."""
    try:
        message = record.getMessage()
    except Exception:  # a malformed call of a logger: leave it to logging's own error report
        return record
    safe = redact(message)
    if safe != message:
        record.msg, record.args = safe, None
    if record.exc_info and record.exc_info[0] is not None:
        if not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.exc_text = redact(record.exc_text)
    elif record.exc_text:
        record.exc_text = redact(record.exc_text)
    if record.stack_info:
        record.stack_info = redact(record.stack_info)
    return record


def install_log_redaction() -> None:
    """Redact every log record of this process as it is made, whichever logger makes it and whichever handlers
    (files, stderr, pytest's caplog) receive it. Safe to call more than once."""
    global _installed_factory
    current = logging.getLogRecordFactory()
    if _installed_factory is not None and current is _installed_factory:
        return

    def redacting_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return redact_record(current(*args, **kwargs))

    logging.setLogRecordFactory(redacting_factory)
    _installed_factory = redacting_factory


__all__ = [
    "MASK",
    "forget_secrets",
    "install_log_redaction",
    "known_secrets",
    "mask_url",
    "public_text",
    "redact",
    "redact_record",
    "remember_secrets",
    "remember_settings_secrets",
]
