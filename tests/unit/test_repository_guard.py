"""``db.failures.guarded``, the one guard of every repository (accounts, sessions, documents, jobs, deep runs,
memory): what a failure says, and what a cancellation does to the operation under way."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from researchcrew.db.failures import guarded
from researchcrew.errors import MemoryStoreError, MemoryStoreUnavailableError

_SECRET_VALUE = "the-users-private-note"


class _Repository:
    def __init__(self) -> None:
        self.finished: list[str] = []
        self.started = asyncio.Event()

    @guarded("job store claim")
    async def locked_write(self) -> None:
        raise OperationalError(
            "UPDATE items SET note = ?", (_SECRET_VALUE,), sqlite3.OperationalError("database is locked")
        )

    @guarded("job store store result")
    async def refused_write(self) -> None:
        raise IntegrityError("INSERT INTO items VALUES (?)", (_SECRET_VALUE,), sqlite3.IntegrityError("UNIQUE failed"))

    @guarded("memory store write exchange")
    async def slow_write(self) -> None:
        self.started.set()
        await asyncio.sleep(0.2)
        self.finished.append("write")

    @guarded("memory store recall", finish_when_cancelled=False)
    async def slow_read(self) -> None:
        self.started.set()
        await asyncio.sleep(30)
        self.finished.append("read")


async def test_a_failure_names_the_operation_and_the_drivers_words_never_the_statement_or_its_values() -> None:
    with pytest.raises(MemoryStoreUnavailableError) as outage:
        await _Repository().locked_write()
    assert str(outage.value) == (
        "job store claim failed: the database cannot be reached (OperationalError: database is locked)"
    )
    with pytest.raises(MemoryStoreError) as refused:
        await _Repository().refused_write()
    assert not isinstance(refused.value, MemoryStoreUnavailableError)
    assert str(refused.value) == "job store store result failed: IntegrityError: UNIQUE failed"
    for message in (str(outage.value), str(refused.value)):
        assert "UPDATE" not in message and "INSERT" not in message and _SECRET_VALUE not in message


async def test_a_cancelled_write_ends_first_and_a_cancelled_deadline_read_stops_at_once() -> None:
    repository = _Repository()
    write = asyncio.create_task(repository.slow_write())
    await repository.started.wait()
    write.cancel()
    with pytest.raises(asyncio.CancelledError):
        await write
    assert repository.finished == ["write"]  # the write ran to its end before the cancellation was passed on

    repository.started.clear()
    read = asyncio.create_task(repository.slow_read())
    await repository.started.wait()
    read.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(read, timeout=5)  # not the read's 30 s: a deadline read stops when cut
    assert repository.finished == ["write"]
