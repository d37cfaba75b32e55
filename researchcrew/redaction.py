"""Credentials never reach a user: masking for URLs and for free text that may quote one.

Failure messages travel far: into ``SourceReport``s, the answer's caveats, ``ask --json``, logs, the coming HTTP
API. Whatever a driver or SDK put into an exception (a connection URL with its password, an ``Authorization``
header, a ``?token=`` query parameter) must not travel with it. Two functions:

* ``mask_url(url)``: the URL with the password of its user-info part and secret-looking query parameters replaced
  by ``***`` (the same shape SQLAlchemy's ``render_as_string(hide_password=True)`` gives the memory store's URL);
* ``redact(text, secrets=())``: every URL inside ``text`` masked that way, ``Bearer``/``Api-Key``/``Basic``
  credentials masked, and each of ``secrets`` (values a caller knows to be secret, e.g. configured API keys)
  replaced wherever it appears.

Both are pure string functions (no imports beyond ``re``): cheap enough to run on every failure message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "***"

# scheme://user:password@host — the password is everything up to the last "@" before the host part.
_USERINFO = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]*):(?P<password>[^\s@/]+)@")
# ?token=... &api_key=... (query parameters whose name says they carry a secret)
_SECRET_PARAMETER = re.compile(
    r"(?P<head>[?&;](?:[\w\-]*(?:token|key|password|passwd|pwd|secret|signature|sig|auth)[\w\-]*)=)(?P<value>[^&;\s#'\"]+)",
    re.IGNORECASE,
)
# Authorization header values quoted in messages: "Bearer sk-...", "Api-Key abc", "Basic dXNlcjpwYXNz".
_SCHEME_CREDENTIAL = re.compile(r"\b(?P<head>Bearer|Api-Key|Basic|Token)\s+(?P<value>[A-Za-z0-9._~+/=\-]{6,})")
_MIN_SECRET_CHARS = 4  # shorter "secrets" would mask ordinary words


def mask_url(url: str) -> str:
    """``url`` with its password and secret-looking query parameters replaced by ``***``; other text unchanged."""
    masked = _USERINFO.sub(lambda match: f"{match['head']}:{MASK}@", url)
    return _SECRET_PARAMETER.sub(lambda match: f"{match['head']}{MASK}", masked)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with credentials masked: passwords in URLs, secret query parameters, ``Bearer``/``Api-Key``
    values, and every occurrence of each of ``secrets`` (values of at least four characters)."""
    for secret in sorted({s for s in secrets if s and len(s) >= _MIN_SECRET_CHARS}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    text = mask_url(text)
    return _SCHEME_CREDENTIAL.sub(lambda match: f"{match['head']} {MASK}", text)


__all__ = ["MASK", "mask_url", "redact"]
