"""The one way a model's reply is read: find the JSON in it and validate it with a pydantic model.

Models asked for "JSON only" still wrap it: in a ```json fence, after "Sure, here it is:", after crewAI's
"Final Answer:", before "Hope this helps". ``parse_reply`` tries, in order, the whole reply, the contents of each
code fence, and every top-level JSON value that starts at a ``{`` or ``[`` in the text (decoded by the standard
library's ``JSONDecoder.raw_decode``, which knows where strings and nesting end; a value inside another is part of
it, not another answer), and returns the first one that validates as the given model. A reply that is already a
dict or a pydantic model is validated directly.

Failures are one documented error, ``ReplyParseError``, whose message names the most telling problem (a value
that did not validate, else JSON that did not decode); nothing else escapes, whatever the reply holds. Trailing
commas and other JSON5 liberties are not repaired (no parser here ever accepted them): such a reply fails, and
the caller asks again or falls back.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from researchcrew.errors import ResearchCrewError
from researchcrew.llm.calls import complete

M = TypeVar("M", bound=BaseModel)

MAX_STARTS = 64  # JSON starts tried inside prose: enough for any real reply, a bound for a hostile one
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_START = re.compile(r"[{\[]")
_DECODER = json.JSONDecoder(strict=False)  # models put raw newlines and tabs inside strings
_NO_VALUE = object()


class ReplyParseError(ResearchCrewError, ValueError):
    """A model reply holds no JSON value that validates as the expected model. The message says why."""


def parse_reply(
    reply: object,
    model: type[M],
    *,
    list_field: str | None = None,
    check: Callable[[M], str | None] | None = None,
) -> M:
    """The first JSON value in ``reply`` that validates as ``model`` (see the module docstring).

    ``list_field``: a bare JSON list is read as ``{list_field: list}`` (a model asked for ``{"sections": [...]}``
    may answer with the list alone). ``check`` returns a problem with a valid value ("no statements") to try the
    next candidate instead. Raises ``ReplyParseError`` and nothing else.
    """
    if isinstance(reply, model):
        problem = check(reply) if check else None
        if problem is None:
            return reply
        raise ReplyParseError(problem)
    invalid: str | None = None
    undecodable: str | None = None
    for candidate in _candidates(reply):
        if isinstance(candidate, str):
            try:
                data = _decode(candidate)
            except (ValueError, RecursionError) as error:  # JSONDecodeError is a ValueError; so is a 5,000-digit int
                if candidate.lstrip().startswith(("{", "[")):  # meant as JSON; prose is just not JSON
                    undecodable = undecodable or _decode_problem(error)
                continue
        else:
            data = candidate
        if isinstance(data, list) and list_field is not None:
            data = {list_field: data}
        try:
            value = model.model_validate(data)
        except (ValidationError, RecursionError) as error:
            invalid = invalid or _validation_problem(error)
            continue
        problem = check(value) if check else None
        if problem is None:
            return value
        invalid = invalid or problem
    if invalid or undecodable:
        raise ReplyParseError(invalid or undecodable)
    raise ReplyParseError(f"no JSON in the reply ({_describe(reply)})")


def _candidates(reply: object) -> Iterator[object]:
    """What may hold the value, most likely first: the reply as a whole, code fences, JSON starts in the text."""
    if isinstance(reply, BaseModel):
        yield reply.model_dump()
        return
    if isinstance(reply, dict | list):
        yield reply
        return
    if not isinstance(reply, str):
        return
    text = reply.strip()
    if "Final Answer:" in text:  # crewAI's ReAct format: the answer follows the marker
        text = text.split("Final Answer:", 1)[1].strip()
    if not text:
        return
    yield text
    yield from _FENCE.findall(text)
    # Top-level values only: a part of a JSON value (an inner object) is not another answer, even when it happens
    # to validate (a model whose fields all have defaults accepts almost any object).
    covered = 0
    for count, start in enumerate(_START.finditer(text)):
        if count >= MAX_STARTS:
            break
        if start.start() < covered:
            continue
        value, end = _value_at(text, start.start())
        if value is not _NO_VALUE:
            covered = end
            yield value


def _decode(text: str) -> Any:
    return _DECODER.decode(text.strip())


def _value_at(text: str, index: int) -> tuple[object, int]:
    """The JSON value that starts at ``text[index]`` and where it ends, or ``_NO_VALUE`` when none starts there."""
    try:
        value, end = _DECODER.raw_decode(text, index)
    except (ValueError, RecursionError):
        return _NO_VALUE, index
    return value, end


def _decode_problem(error: BaseException) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f"not valid JSON ({error.msg} at line {error.lineno} column {error.colno})"
    if isinstance(error, RecursionError):
        return "not valid JSON (nested too deeply)"
    return f"not valid JSON ({str(error)[:200]})"


def _validation_problem(error: BaseException) -> str:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        return f"JSON does not match the required format: {first['msg']} at {first['loc']}"
    return "JSON does not match the required format (nested too deeply)"


def _describe(reply: object) -> str:
    if isinstance(reply, str):
        return "an empty reply" if not reply.strip() else f"text starting {reply.strip()[:80]!r}"
    return f"a reply of type {type(reply).__name__}"


async def ask_for(llm: Any, messages: list[dict[str, str]], model: type[M], *, timeout_s: float) -> M:
    """One call to ``llm`` (a crewAI ``BaseLLM``) under ``timeout_s``, its reply read into ``model``. Raises what
    the provider raises, ``TimeoutError``, or ``ReplyParseError``: callers fall back to their rule-based path."""
    async with asyncio.timeout(timeout_s):
        reply = await complete(llm, messages)
    return parse_reply(reply, model)


__all__ = ["MAX_STARTS", "ReplyParseError", "ask_for", "parse_reply"]
