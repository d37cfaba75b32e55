"""Named shared document collections and their members, in the memory database (``kb_collections``,
``kb_collection_members``, Alembic revision 0010); the rules of who reads what are in ``knowledge/access.py``.

``readable(user_id)`` is asked on every knowledge-base search (one indexed query), so a change of members takes
effect with the next search. Changes take the acting user: ``None`` is the machine's operator (the command line),
who may do anything; a user of the HTTP service may change or remove only the collections they own (made over
HTTP), sees only the collections they read, and is told "not found" about the others.

Open it on the runtime's memory store: ``CollectionsStore(store.engine)``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Select, delete, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from researchcrew.db.failures import guarded
from researchcrew.db.models import KbCollectionMemberRow, KbCollectionRow
from researchcrew.db.session import Sessions
from researchcrew.errors import (
    CollectionConflictError,
    CollectionError,
    CollectionForbiddenError,
    CollectionNotFoundError,
)
from researchcrew.knowledge.access import (
    MEMBER_PATTERN,
    SHARED,
    check_shared_name,
    implicit_readable,
    private_collection,
)

logger = logging.getLogger(__name__)


class CollectionInfo(BaseModel):
    """A document collection as ``collections list`` and ``GET /v1/collections`` show it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The collection's name: `shared`, `user:<id>` or a named shared collection.")
    kind: Literal["shared", "private", "named"] = Field(
        description="`shared`: everyone reads it; `private`: only its user; `named`: its owner and members."
    )
    owner_id: str | None = Field(default=None, description="Who may change it (None: the operator, on the CLI).")
    members: list[str] = Field(default_factory=list, description="Users who read it (named collections).")
    created_at: datetime | None = Field(default=None, description="When it was made (named collections, UTC).")


def named_readable(user_id: str) -> Select[str]:
    """The names of the named collections ``user_id`` reads (owns or is a member of), as a query: ``readable`` runs
    it, and the documents' listing uses it as a subquery (``document_store.readable_by``)."""
    member = select(KbCollectionMemberRow.collection).where(KbCollectionMemberRow.user_id == user_id)
    return select(KbCollectionRow.name).where(
        or_(KbCollectionRow.owner_id == user_id, KbCollectionRow.name.in_(member))
    )


def check_member(user_id: str) -> str:
    if not MEMBER_PATTERN.match(user_id):
        raise CollectionError(f"{user_id!r} is not a valid user id for a member (1-256 characters, no commas)")
    return user_id


class CollectionsStore:
    """Named shared collections and their members; implements ``access.CollectionAccess``."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._read, self._write = Sessions.of(engine)

    @guarded("reading the collections a user may read")
    async def readable(self, user_id: str | None) -> list[str]:
        """``shared``, the user's private collection, and the named ones they own or are a member of."""
        names = implicit_readable(user_id)
        if not user_id:
            return names
        async with self._read() as session:
            rows = await session.execute(named_readable(user_id))
            return [*names, *sorted(str(name) for name in rows.scalars())]

    async def may_store(self, user_id: str, collection: str) -> bool:
        """Whether a user of the service may store documents into ``collection``: their own private one, or a
        named one they read. ``shared`` is filled by the operator (`researchcrew ingest`), not over HTTP."""
        if collection == SHARED:
            return False
        if collection == private_collection(user_id):
            return True
        return not collection.startswith("user:") and collection in await self.readable(user_id)

    @guarded("adding a collection")
    async def create(self, name: str, *, members: Iterable[str] = (), owner_id: str | None = None) -> CollectionInfo:
        check_shared_name(name)
        readers = sorted({check_member(member) for member in members})
        now = datetime.now(UTC)
        try:
            async with self._write.begin() as session:
                if await session.get(KbCollectionRow, name) is not None:
                    raise CollectionConflictError(f"collection {name!r} exists already; change its members instead")
                session.add(KbCollectionRow(name=name, owner_id=owner_id, created_at=now))
                await session.flush()
                session.add_all(KbCollectionMemberRow(collection=name, user_id=m, added_at=now) for m in readers)
        except IntegrityError as error:  # made by someone else at the same moment
            raise CollectionConflictError(f"collection {name!r} was added by someone else just now") from error
        logger.info("added collection %s (owner %s, %d members)", name, owner_id or "operator", len(readers))
        return CollectionInfo(name=name, kind="named", owner_id=owner_id, members=readers, created_at=now)

    @guarded("changing a collection's members")
    async def change_members(
        self, name: str, *, add: Iterable[str] = (), remove: Iterable[str] = (), acting_user: str | None = None
    ) -> CollectionInfo:
        adding = {check_member(member) for member in add}
        removing = {check_member(member) for member in remove}
        now = datetime.now(UTC)
        async with self._write.begin() as session:
            row = await self._changeable(session, name, acting_user)  # first: an unknown collection is not found
            if adding & removing:
                raise CollectionError(f"{sorted(adding & removing)} cannot be both added and removed")
            held: set[str] = set(await self._members(session, name))
            session.add_all(
                KbCollectionMemberRow(collection=name, user_id=m, added_at=now) for m in sorted(adding - held)
            )
            if removing:
                await session.execute(
                    delete(KbCollectionMemberRow).where(
                        KbCollectionMemberRow.collection == name, KbCollectionMemberRow.user_id.in_(sorted(removing))
                    )
                )
            members = sorted((held | adding) - removing)
        logger.info("collection %s: added %s, removed %s", name, sorted(adding - held), sorted(removing & held))
        return CollectionInfo(
            name=name, kind="named", owner_id=row.owner_id, members=members, created_at=row.created_at
        )

    @guarded("checking a collection's owner")
    async def check_owner(self, name: str, *, acting_user: str | None) -> None:
        """Nothing when ``acting_user`` may change the collection; ``CollectionForbiddenError`` for a member,
        ``CollectionNotFoundError`` for anyone else (or no such collection)."""
        async with self._read() as session:
            await self._changeable(session, name, acting_user)

    @guarded("removing a collection")
    async def remove(self, name: str, *, acting_user: str | None = None) -> None:
        """Forget the collection and its members (its documents' chunks are the knowledge base's to delete)."""
        async with self._write.begin() as session:
            await self._changeable(session, name, acting_user)
            await session.execute(delete(KbCollectionMemberRow).where(KbCollectionMemberRow.collection == name))
            await session.execute(delete(KbCollectionRow).where(KbCollectionRow.name == name))
        logger.info("removed collection %s", name)

    @guarded("reading a collection")
    async def get(self, name: str, *, acting_user: str | None = None) -> CollectionInfo:
        """One collection as the acting user may see it (``CollectionNotFoundError`` when they may not read it)."""
        if name == SHARED or (acting_user is not None and name == private_collection(acting_user)):
            return _implicit(name)
        listed = {info.name: info for info in await self.list_collections(acting_user)}
        if name not in listed:
            raise CollectionNotFoundError(f"no collection {name!r}; `researchcrew collections list` shows them")
        return listed[name]

    @guarded("listing collections")
    async def list_collections(self, user_id: str | None = None) -> list[CollectionInfo]:
        """The collections ``user_id`` reads (with ``shared`` and their private one); every named one for None."""
        async with self._read() as session:
            query = select(KbCollectionRow).order_by(KbCollectionRow.name)
            if user_id is not None:
                member = select(KbCollectionMemberRow.collection).where(KbCollectionMemberRow.user_id == user_id)
                query = query.where(or_(KbCollectionRow.owner_id == user_id, KbCollectionRow.name.in_(member)))
            rows = (await session.execute(query)).scalars().all()
            members: dict[str, list[str]] = {}
            if rows:
                found = await session.execute(
                    select(KbCollectionMemberRow.collection, KbCollectionMemberRow.user_id)
                    .where(KbCollectionMemberRow.collection.in_([row.name for row in rows]))
                    .order_by(KbCollectionMemberRow.user_id)
                )
                for collection, member_id in found:
                    members.setdefault(collection, []).append(member_id)
        implicit = [_implicit(name) for name in implicit_readable(user_id)]
        named = [
            CollectionInfo(
                name=row.name,
                kind="named",
                owner_id=row.owner_id,
                members=members.get(row.name, []),
                created_at=row.created_at,
            )
            for row in rows
        ]
        return [*implicit, *named]

    async def _changeable(self, session: AsyncSession, name: str, acting_user: str | None) -> KbCollectionRow:
        row = await session.get(KbCollectionRow, name)
        if row is not None and (acting_user is None or row.owner_id == acting_user):
            return row
        if row is not None and acting_user in await self._members(session, name):
            raise CollectionForbiddenError(f"only the owner of collection {name!r} may change it")
        if name == SHARED or name.startswith("user:"):
            raise CollectionForbiddenError(
                f"{name!r} cannot be changed or removed: everyone reads `shared`, and only its user a private one"
            )
        raise CollectionNotFoundError(f"no collection {name!r}; `researchcrew collections list` shows them")

    @staticmethod
    async def _members(session: AsyncSession, name: str) -> list[str]:
        rows = await session.execute(
            select(KbCollectionMemberRow.user_id).where(KbCollectionMemberRow.collection == name)
        )
        return [str(member) for member in rows.scalars()]


def _implicit(name: str) -> CollectionInfo:
    if name == SHARED:
        return CollectionInfo(name=name, kind="shared")
    return CollectionInfo(name=name, kind="private", owner_id=name.split(":", 1)[1])
