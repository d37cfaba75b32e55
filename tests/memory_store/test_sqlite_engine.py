"""The embedded SQLite engine: several openers of one new database file all get in, in WAL mode."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from researchcrew.db import engine as db

OPENERS = 8
ROUNDS = 100  # without the retry in db._switch_to_wal, 5 of 6 runs of 60 rounds failed (2 cores)


async def _journal_mode(engine: AsyncEngine) -> str:
    async with engine.connect() as connection:
        return str((await connection.exec_driver_sql("PRAGMA journal_mode")).scalar_one())


async def test_engines_opening_a_new_file_at_once_all_switch_it_to_wal(tmp_path: Path) -> None:
    # SQLite answers "database is locked" at once, ignoring the busy timeout, to a connection that asks for WAL
    # while another is switching the same new file; that is what failed CI (MemoryStore.open from 4 tasks).
    for round_number in range(ROUNDS):
        engines = [db.create_engine(f"sqlite+aiosqlite:///{tmp_path}/round{round_number}.db") for _ in range(OPENERS)]
        try:
            assert await asyncio.gather(*(_journal_mode(engine) for engine in engines)) == ["wal"] * OPENERS
        finally:
            for engine in engines:
                await engine.dispose()
