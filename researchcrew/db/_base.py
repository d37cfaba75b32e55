"""The declarative ``Base`` every table of researchcrew's database is declared on, and the column types they share.

Portability between SQLite and PostgreSQL:
* timestamps go through ``UTCDateTime``: ``timestamptz`` on PostgreSQL, naive-UTC text on SQLite (so that string
  order is time order), and always timezone-aware UTC in Python;
* JSON columns are ``JSON`` (``JSONB`` on PostgreSQL);
* embeddings are little-endian float32 bytes in a ``LargeBinary`` column (``bytea`` / ``BLOB``);
* integer ids never repeat (``sqlite_autoincrement``), which the recall cache relies on to detect new rows.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import JSON, DateTime, Dialect, MetaData, TypeDecorator
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase

ID_LENGTH = 256  # matches contracts._base.Identifier


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend (naive values are taken as UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        # SQLite stores datetimes as text without an offset: store UTC wall time so comparisons stay correct.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


PortableJSON = JSON().with_variant(JSONB(), "postgresql")


def utcnow() -> datetime:
    return datetime.now(UTC)


NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UTCDateTime(),
        dict[str, Any]: PortableJSON,
        list[Any]: PortableJSON,
    }
