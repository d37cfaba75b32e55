"""Reading conversation history: synchronous SQLAlchemy Core functions, run by ``db.Reader``.

Synchronous on purpose: on SQLite, ``Reader`` runs one of them in a worker thread on a plain pysqlite connection —
one thread hop for the whole function, where aiosqlite makes several per statement, each a wait for a thread on a
busy machine (benchmarks/README.md has the figures). On PostgreSQL the same function runs through
``AsyncConnection.run_sync`` on asyncpg. Rows are read as Core rows (no ORM identity map to build).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, and_, func, select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import aliased

from researchcrew.db.models import ExchangeRow, MessageRow, UserStateRow
from researchcrew.memory.recall import CacheState, Row, VectorDelta
from researchcrew.memory.records import ExchangeRecord

_EXCHANGE: Any = ExchangeRow.__table__
_USERS: Any = UserStateRow.__table__
_USER_MSG = aliased(MessageRow, name="user_message")
_ASSISTANT_MSG = aliased(MessageRow, name="assistant_message")
_RECORD_COLUMNS = [column for column in _EXCHANGE.c if column.name not in ("id", "embedding", "embedding_model")]


def exchange_select() -> Select[Any]:
    """Exchanges joined with their two messages: one row per exchange, everything an ExchangeRecord needs."""
    return (
        select(
            _EXCHANGE.c.id,
            *_RECORD_COLUMNS,
            _USER_MSG.content.label("question"),
            _USER_MSG.message_id.label("user_message_id"),
            _ASSISTANT_MSG.content.label("answer"),
            _ASSISTANT_MSG.message_id.label("assistant_message_id"),
        )
        .select_from(_EXCHANGE)
        .join(_USER_MSG, and_(_USER_MSG.exchange_id == _EXCHANGE.c.id, _USER_MSG.role == "user"))
        .join(_ASSISTANT_MSG, and_(_ASSISTANT_MSG.exchange_id == _EXCHANGE.c.id, _ASSISTANT_MSG.role == "assistant"))
    )


def record(row: Any) -> ExchangeRecord:
    return ExchangeRecord.model_validate({key: value for key, value in row._mapping.items() if key != "id"})


def by_response_id(connection: Connection, response_id: str) -> ExchangeRecord | None:
    found = connection.execute(exchange_select().where(_EXCHANGE.c.response_id == response_id)).first()
    return record(found) if found is not None else None


def by_ids(connection: Connection, user_id: str, ids: list[int]) -> dict[int, ExchangeRecord]:
    """The user's exchanges with these row ids (ids of other users are never returned)."""
    stmt = exchange_select().where(_EXCHANGE.c.id.in_(ids), _EXCHANGE.c.user_id == user_id)
    return {row.id: record(row) for row in connection.execute(stmt)}


def latest(connection: Connection, user_id: str, session_id: str | None, limit: int) -> list[ExchangeRecord]:
    """The latest ``limit`` exchanges (of one session, or of all), oldest first."""
    stmt = exchange_select().where(_EXCHANGE.c.user_id == user_id)
    if session_id is not None:
        stmt = stmt.where(_EXCHANGE.c.session_id == session_id)
    stmt = stmt.order_by(_EXCHANGE.c.asked_at.desc(), _EXCHANGE.c.id.desc()).limit(limit)
    return [record(row) for row in reversed(connection.execute(stmt).all())]


def vector_delta(connection: Connection, user_id: str, known: CacheState | None) -> VectorDelta:
    """What changed for the user since ``known`` (see recall.py): nothing, new rows only, or everything.

    The user's version row decides in one primary-key read. Without that row (exchanges written by hand, or a
    user with none) it falls back to ``count(*), max(id)``: correct, but O(number of exchanges).
    """
    version_row = connection.execute(
        select(_USERS.c.epoch, _USERS.c.generation).where(_USERS.c.user_id == user_id)
    ).first()
    if version_row is not None:
        version = (version_row.epoch, version_row.generation)
        if known is not None and known.version == version:
            return VectorDelta(full=False, rows=[], version=version)
        if known is not None and known.version is not None and known.version[0] == version_row.epoch:
            new_rows = _vector_rows(connection, user_id, after_id=known.max_id)
            return VectorDelta(full=False, rows=new_rows, version=version)
        return VectorDelta(full=True, rows=_vector_rows(connection, user_id, after_id=0), version=version)
    count, max_id = connection.execute(
        select(func.count(), func.coalesce(func.max(_EXCHANGE.c.id), 0)).where(_EXCHANGE.c.user_id == user_id)
    ).one()
    if known is not None and known.version is None:
        if known.rows_seen == count and known.max_id == max_id:
            return VectorDelta(full=False, rows=[], version=None)
        if max_id > known.max_id:
            rows = _vector_rows(connection, user_id, after_id=known.max_id)
            if known.rows_seen + len(rows) == count:
                return VectorDelta(full=False, rows=rows, version=None)
    return VectorDelta(full=True, rows=_vector_rows(connection, user_id, after_id=0), version=None)


LEXICAL_ANSWER_CHARS = 2_000  # the lexical side of recall reads the question and the answer's opening


def _vector_rows(connection: Connection, user_id: str, *, after_id: int) -> list[Row]:
    """(id, session, embedding, text) of the user's exchanges after ``after_id``: what recall indexes, dense and
    lexical (the text is the question and the answer's opening)."""
    stmt = (
        select(
            _EXCHANGE.c.id,
            _EXCHANGE.c.session_id,
            _EXCHANGE.c.embedding,
            _USER_MSG.content,
            func.substr(_ASSISTANT_MSG.content, 1, LEXICAL_ANSWER_CHARS),
        )
        .select_from(_EXCHANGE)
        .outerjoin(_USER_MSG, and_(_USER_MSG.exchange_id == _EXCHANGE.c.id, _USER_MSG.role == "user"))
        .outerjoin(
            _ASSISTANT_MSG, and_(_ASSISTANT_MSG.exchange_id == _EXCHANGE.c.id, _ASSISTANT_MSG.role == "assistant")
        )
        .where(_EXCHANGE.c.user_id == user_id, _EXCHANGE.c.id > after_id)
        .order_by(_EXCHANGE.c.id)
    )
    return [
        (row_id, session_id, blob, f"{question or ''}\n{answer or ''}")
        for row_id, session_id, blob, question, answer in connection.execute(stmt)
    ]
