"""What every route's input is checked for before the route's own validation, so no route can forget it.

* A path or query parameter holding a character no store can keep (NUL, a lone surrogate) is a 422 naming it
  (``path.session_id``): the same on SQLite and PostgreSQL, and never a database error. Body fields get the same
  check from their models (``researchcrew.contracts._base.StorableInput``).
* A JSON body nested deeper than the one JSON reader allows (``researchcrew.text.json_input``) is a 422 naming the
  body, before anything walks it.

``check_request_input`` is an app-level dependency (``FastAPI(dependencies=...)``): a route added later is covered
without doing anything. Its failures are ``RequestValidationError``s, answered in the service's one problem shape
(and in OpenAI's on the OpenAI-compatible routes).
"""

from __future__ import annotations

from email.message import Message
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError

from researchcrew.contracts._base import unstorable_character
from researchcrew.text.json_input import JsonInputError, check_json_depth

_BODILESS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})


async def check_request_input(request: Request) -> None:
    """Raise ``RequestValidationError`` for an unstorable parameter or a JSON body nested too deeply."""
    errors: list[dict[str, Any]] = []
    for location, items in (("path", request.path_params.items()), ("query", request.query_params.multi_items())):
        for name, value in items:
            for text in (name, value):
                problem = unstorable_character(text) if isinstance(text, str) else None
                if problem is not None:
                    errors.append(_error(location, name, f"contains {problem}, which cannot be stored"))
                    break
    if errors:
        raise RequestValidationError(errors)
    if request.method not in _BODILESS and _is_json(request.headers.get("content-type")):
        try:
            check_json_depth(await request.body())
        except JsonInputError as error:
            raise RequestValidationError([_error("body", None, error.reason)]) from None


def _error(location: str, name: str | None, message: str) -> dict[str, Any]:
    loc = (location,) if name is None else (location, name)
    return {"type": "value_error", "loc": loc, "msg": message, "input": None}


def _is_json(content_type: str | None) -> bool:
    if not content_type:
        return False
    message = Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))
