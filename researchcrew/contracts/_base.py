"""Shared base for every contract model and the small value types contracts reuse."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

# A source type names where a chunk came from: "rag", "web", "arxiv", "memory" for the built-in tools; custom
# tools may use their own lower-case identifier.
SourceType = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_\-]*$")
]
Identifier = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256)]
UnitFloat = Annotated[float, Field(ge=0.0, le=1.0)]
NonNegativeMs = Annotated[float, Field(ge=0.0)]


class Contract(BaseModel):
    """Base of every contract: unknown fields are rejected, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)
