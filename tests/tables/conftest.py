"""Fixtures of the answer-table tests: a migrated SQLite memory store (a copy of the session's template)."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from researchcrew.memory.store import MemoryStore


@pytest.fixture
async def memory(migrated_sqlite_file: Path, tmp_path: Path) -> AsyncIterator[MemoryStore]:
    path = tmp_path / "memory.db"
    shutil.copyfile(migrated_sqlite_file, path)
    store = await MemoryStore.open(f"sqlite+aiosqlite:///{path}")
    try:
        yield store
    finally:
        await store.close()
