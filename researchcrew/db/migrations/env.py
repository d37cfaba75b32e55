"""Alembic environment of researchcrew's database (every domain's tables, ``db/models.py``).

Normally run from ``researchcrew.db.engine.upgrade``, which hands over an open connection (already inside a
transaction holding the migration lock) in ``config.attributes["connection"]``. For hand-run Alembic commands
(e.g. ``alembic revision --autogenerate``) set ``sqlalchemy.url`` in the config to an async URL instead.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from researchcrew.db import models as _schema  # noqa: F401  (every table of the schema, on Base.metadata)
from researchcrew.db._base import Base

target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things in place; batch mode recreates the table and copies the rows over.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_with_url(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_run)
    finally:
        await engine.dispose()


def _main() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("set sqlalchemy.url (an async SQLAlchemy URL) or pass a connection in config.attributes")
    if context.is_offline_mode():
        context.configure(url=url, target_metadata=target_metadata, literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    asyncio.run(_run_with_url(url))


_main()
