"""Who may read which document collection: names, the implicit rules, and the seam the RAG tool asks per search.

Every chunk of the knowledge base belongs to one collection (``schema.COLLECTION``):

* ``shared`` — the default; everyone reads it. Documents ingested from the command line go here, and every chunk of
  a knowledge base made before collections existed is in it.
* ``user:<user id>`` — a user's private collection; it exists implicitly and only that user reads it.
* a named shared collection (``team-x``) — made with ``researchcrew collections add`` or ``POST /v1/collections``;
  read by its owner and the members named (``knowledge/collections_store.py`` keeps them).

``CollectionAccess.readable(user_id)`` is what a search is limited to; the RAG tool calls it on every search, so a
member removed from a collection loses access with the next search (nothing is cached across requests). The limit
goes into the Milvus filter expression (``SearchFilters.collections``), never applied to results afterwards.
"""

from __future__ import annotations

import re
from typing import Protocol

from researchcrew.errors import CollectionError
from researchcrew.knowledge._schema import SHARED

PRIVATE_PREFIX = "user:"
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
MAX_USER_ID = 256  # matches contracts._base.Identifier
# A member's user id: 1-256 characters, no comma (the CLI's --members is comma-separated), no blank at either end.
# An explicit class, not \s: Python's and JSON Schema's \s differ, and the HTTP schema states this same pattern.
MEMBER_PATTERN = re.compile(r"^[^, \t\n\r\f\v](?:[^,]{0,254}[^, \t\n\r\f\v])?$")

__all__ = [
    "PRIVATE_PREFIX",
    "SHARED",
    "CollectionAccess",
    "ImplicitAccess",
    "check_collection",
    "check_shared_name",
    "implicit_readable",
    "is_private",
    "owner_of_private",
    "private_collection",
]


def private_collection(user_id: str) -> str:
    """The name of a user's private collection."""
    return f"{PRIVATE_PREFIX}{user_id}"


def is_private(name: str) -> bool:
    return name.startswith(PRIVATE_PREFIX)


def owner_of_private(name: str) -> str | None:
    """The user a private collection belongs to; None for any other name."""
    return name[len(PRIVATE_PREFIX) :] if is_private(name) else None


def check_shared_name(name: str) -> str:
    """A valid name for a named shared collection (one that can be made, with members); raises otherwise."""
    if name == SHARED:
        raise CollectionError(f"{SHARED!r} is the default collection everyone reads; choose another name")
    if is_private(name):
        raise CollectionError(
            f"{name!r}: names starting with {PRIVATE_PREFIX!r} are users' private collections, which exist without "
            "being made; choose another name"
        )
    if not NAME_PATTERN.match(name):
        raise CollectionError(
            f"{name!r} is not a valid collection name: use 1-64 lower-case letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )
    return name


def check_collection(name: str) -> str:
    """Any valid collection name: ``shared``, ``user:<id>`` or a named one; raises ``CollectionError`` otherwise."""
    if name == SHARED:
        return name
    owner = owner_of_private(name)
    if owner is not None:
        if not owner.strip() or owner != owner.strip() or len(owner) > MAX_USER_ID:
            raise CollectionError(f"{name!r} is not a valid private collection: {PRIVATE_PREFIX}<user id>")
        return name
    return check_shared_name(name)


def implicit_readable(user_id: str | None) -> list[str]:
    """What anyone reads without a membership: ``shared``, and the user's own private collection."""
    return [SHARED] if not user_id else [SHARED, private_collection(user_id)]


class CollectionAccess(Protocol):
    """The collections a user may read, asked on every search (``CollectionsStore`` implements it)."""

    async def readable(self, user_id: str | None) -> list[str]: ...


class ImplicitAccess:
    """Access without a collections store: ``shared`` and the user's own private collection only."""

    async def readable(self, user_id: str | None) -> list[str]:
        return implicit_readable(user_id)
