"""Reading a model's JSON reply into a pydantic model, whatever the model wrapped around it.

Models answer with the JSON object alone, inside a code fence, after a sentence of prose, or (with native
structured output) as an already parsed object. ``parse_reply`` tries, in order: the object itself, each fenced
block, the whole text, then every balanced ``{...}`` in the text, and returns the first candidate the model class
accepts. It raises ``ReplyParseError`` naming the last problem, so a caller can fall back and log why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from researchcrew.errors import ResearchCrewError

M = TypeVar("M", bound=BaseModel)

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
MAX_OBJECT_STARTS = 8


class ReplyParseError(ResearchCrewError):
    """The model's reply holds no JSON object of the required shape."""


def balanced_objects(text: str, limit: int = MAX_OBJECT_STARTS) -> Iterator[str]:
    """Substrings that start at a ``{`` and end at its matching ``}`` (string-aware), for the first ``limit``
    opening braces."""
    starts = [index for index, char in enumerate(text) if char == "{"][:limit]
    for start in starts:
        depth, in_string, escaped = 0, False, False
        for index in range(start, len(text)):
            char = text[index]
            if in_string:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    yield text[start : index + 1]
                    break


def json_candidates(reply: str) -> list[str]:
    """The texts worth trying as JSON, most likely first."""
    text = reply.strip()
    return [*_FENCE.findall(text), text, *balanced_objects(text)]


def parse_reply(reply: Any, model: type[M]) -> M:
    """The ``model`` in a reply (a model instance, a dict, or text with JSON in it)."""
    if isinstance(reply, model):
        return reply
    if isinstance(reply, BaseModel):
        reply = reply.model_dump()
    candidates: list[Any] = [reply] if isinstance(reply, dict) else json_candidates(str(reply))
    problem = "the reply is empty"
    for candidate in candidates:
        try:
            data = json.loads(candidate, strict=False) if isinstance(candidate, str) else candidate
        except json.JSONDecodeError as error:
            problem = f"not valid JSON ({error.msg} at line {error.lineno} column {error.colno})"
            continue
        try:
            return model.model_validate(data)
        except ValidationError as error:
            first = error.errors()[0]
            problem = f"the JSON does not match {model.__name__}: {first['msg']} at {first['loc']}"
    raise ReplyParseError(problem)


async def ask_for(llm: Any, messages: list[dict[str, str]], model: type[M], *, timeout_s: float) -> M:
    """One call to ``llm`` (a crewAI ``BaseLLM``) under ``timeout_s``, its reply parsed into ``model``. Raises what
    the provider raises, ``TimeoutError``, or ``ReplyParseError``: callers fall back to their rule-based path."""
    import asyncio

    async with asyncio.timeout(timeout_s):
        reply = await llm.acall(messages)
    return parse_reply(reply, model)
