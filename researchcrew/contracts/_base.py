"""Shared base for every contract model and the small value types contracts reuse."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, field_validator
from pydantic_core import PydanticCustomError

# A source type names where a chunk came from: "rag", "web", "arxiv", "memory" for the built-in tools; custom
# tools may use their own lower-case identifier.
_SOURCE_TYPE_PATTERN = r"^[a-z][a-z0-9_\-]*$"
SourceType = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64, pattern=_SOURCE_TYPE_PATTERN)
]
# A source type as a mapping's key (tool options by source): taken as written, never stripped. Stripped, " web" would
# fold into a "web" key beside it and one of the two values would be dropped without a word; the schema's key
# pattern refuses the spaces, and so does the door.
SourceTypeKey = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=_SOURCE_TYPE_PATTERN)]
Identifier = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256)]
UnitFloat = Annotated[float, Field(ge=0.0, le=1.0)]
NonNegativeMs = Annotated[float, Field(ge=0.0)]

# Characters no store can keep: NUL (PostgreSQL's text and jsonb refuse it) and lone UTF-16 surrogates (they have
# no UTF-8 encoding, so no driver can send them). SQLite would keep both; they are refused everywhere alike.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable_character(text: str) -> str | None:
    """What makes ``text`` impossible to store, e.g. "a NUL character (U+0000) at position 3"; None if nothing."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    code = ord(found.group())
    kind = "a NUL character" if code == 0 else "a lone surrogate"
    return f"{kind} (U+{code:04X}) at position {found.start()}"


def check_storable(text: str) -> str:
    """``text`` unchanged, or a validation error saying which character cannot be stored and where."""
    problem = unstorable_character(text)
    if problem is not None:
        raise PydanticCustomError("unstorable_text", "contains {problem}, which cannot be stored", {"problem": problem})
    return text


def check_storable_value(value: Any) -> Any:
    """``value`` unchanged, after checking every string in it (dict keys too, at any depth, without recursion)."""
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        where, item = pending.pop()
        if isinstance(item, str):
            problem = unstorable_character(item)
            if problem is not None:
                raise PydanticCustomError(
                    "unstorable_text",
                    "{where}contains {problem}, which cannot be stored",
                    {"where": f"{where} " if where else "", "problem": problem},
                )
        elif isinstance(item, Mapping):
            for key, child in item.items():
                pending.append((f"{where}[{key!r}]", key))
                pending.append((f"{where}[{key!r}]", child))
        elif isinstance(item, list | tuple | set | frozenset):
            pending.extend((f"{where}[{index}]", child) for index, child in enumerate(item))
        elif isinstance(item, BaseModel):
            fields = {**item.__dict__, **(item.__pydantic_extra__ or {})}
            pending.extend((f"{where}.{name}", child) for name, child in fields.items())
    return value


# One string field that must be storable (for a field of a model that is not a ``StorableInput``).
StorableText = Annotated[str, AfterValidator(check_storable)]


class Contract(BaseModel):
    """Base of every contract: unknown fields are rejected, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)


class StorableInput(BaseModel):
    """Mixin of every request model (contracts, service bodies and queries): a string anywhere in any field (list
    items, dict keys and values, nested models) holding a character no store can keep is a validation error on
    that field, so the service answers 422 naming it, the same on SQLite and PostgreSQL."""

    @field_validator("*", mode="after")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        return check_storable_value(value)


class RequestContract(StorableInput, Contract):
    """Base of the contracts a caller sends in: a ``Contract`` whose every string is storable."""
