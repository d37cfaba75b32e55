"""Units of work: the sessions a repository reads and writes with.

A repository holds ``Sessions.of(engine)`` and opens one session per unit of work:

* ``async with sessions.read() as session`` — reads (a consistent snapshot across its statements);
* ``async with sessions.write.begin() as session`` — one transaction, committed at the end of the block and rolled
  back on an exception. On SQLite it starts with ``BEGIN IMMEDIATE`` (``engine.write_engine``), so a
  read-modify-write takes the write lock up front instead of failing with "database is locked" half-way.

Objects stay readable after the commit (``expire_on_commit=False``): repositories return plain records built from
them, never live ORM objects.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from researchcrew.db.engine import write_engine


class Sessions(NamedTuple):
    """The read and the write session factory over one engine (unpacks as ``read, write``)."""

    read: async_sessionmaker[AsyncSession]
    write: async_sessionmaker[AsyncSession]

    @classmethod
    def of(cls, engine: AsyncEngine) -> Sessions:
        return cls(
            async_sessionmaker(engine, expire_on_commit=False),
            async_sessionmaker(write_engine(engine), expire_on_commit=False),
        )


async def ping(engine: AsyncEngine) -> None:
    """One round trip to the database (``SELECT 1``); the driver's exception when it does not answer."""
    async with engine.connect() as connection:
        await connection.execute(text("SELECT 1"))
