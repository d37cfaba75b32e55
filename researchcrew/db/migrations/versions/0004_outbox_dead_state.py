"""A "dead" state for outbox writes the destination refused for good (``memory_outbox.dead_at``).

Until now such a write was parked: due again on 9999-01-01, its ``last_error`` prefixed "permanent: ". The
upgrade turns those rows into dead ones (``dead_at`` set to the time of the upgrade, the prefix dropped, the due
date set back to when the write was created); every other row is kept as it is. The downgrade parks dead rows the
old way again, so the previous release still never retries them.

Revision ID: 0004
Revises: 0003
Create Date: 2025-03-05
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# What revisions 0002-0003's code wrote for a parked row (memory/outbox.py of that release).
PARKED_PREFIX = "permanent: "
PARKED_UNTIL = datetime(9999, 1, 1, tzinfo=UTC)
# Any due date from here on was a parked row. Not "= PARKED_UNTIL": on SQLite the stored text may be spelt with or
# without microseconds depending on the writer, and "9999-01-01 00:00:00" sorts before "9999-01-01 00:00:00.000000".
PARKED_FROM = datetime(9000, 1, 1, tzinfo=UTC)


def _timestamp(value: datetime) -> datetime:
    # SQLite stores naive UTC text (see models.UTCDateTime); PostgreSQL a timestamptz.
    return value.replace(tzinfo=None) if op.get_bind().dialect.name == "sqlite" else value


def _outbox() -> sa.TableClause:
    return sa.table(
        "memory_outbox",
        sa.column("created_at", sa.DateTime(timezone=True)),
        sa.column("next_attempt_at", sa.DateTime(timezone=True)),
        sa.column("last_error", sa.Text()),
        sa.column("delivered_at", sa.DateTime(timezone=True)),
        sa.column("dead_at", sa.DateTime(timezone=True)),
    )


def upgrade() -> None:
    op.add_column("memory_outbox", sa.Column("dead_at", sa.DateTime(timezone=True), nullable=True))
    outbox = _outbox()
    op.execute(
        outbox.update()
        .where(
            outbox.c.delivered_at.is_(None),
            outbox.c.next_attempt_at >= _timestamp(PARKED_FROM),
            outbox.c.last_error.like(PARKED_PREFIX + "%"),
        )
        .values(
            dead_at=_timestamp(datetime.now(UTC)),
            last_error=sa.func.substr(outbox.c.last_error, len(PARKED_PREFIX) + 1),
            next_attempt_at=outbox.c.created_at,
        )
    )


def downgrade() -> None:
    outbox = _outbox()
    op.execute(
        outbox.update()
        .where(outbox.c.dead_at.is_not(None), outbox.c.delivered_at.is_(None))
        .values(
            next_attempt_at=_timestamp(PARKED_UNTIL),
            last_error=sa.literal(PARKED_PREFIX) + sa.func.coalesce(outbox.c.last_error, ""),
        )
    )
    # SQLite (>= 3.35) drops a column in place when no index or constraint uses it, as here.
    op.drop_column("memory_outbox", "dead_at")
