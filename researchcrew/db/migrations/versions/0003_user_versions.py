"""Per-user memory versions (``memory_users``), so the recall cache checks freshness in O(1).

Backfills one row per user who already has exchanges: a fresh random epoch and the number of exchanges as the
generation.

Revision ID: 0003
Revises: 0002
Create Date: 2025-02-10
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    users = op.create_table(
        "memory_users",
        sa.Column("user_id", sa.String(256), primary_key=True),
        sa.Column("epoch", sa.String(32), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    counts = op.get_bind().execute(
        sa.text("SELECT user_id, COUNT(*) FROM memory_exchanges GROUP BY user_id ORDER BY user_id")
    )
    # SQLite stores naive UTC text (see models.UTCDateTime); PostgreSQL a timestamptz.
    now = datetime.now(UTC)
    if op.get_bind().dialect.name == "sqlite":
        now = now.replace(tzinfo=None)
    rows = [
        {"user_id": user_id, "epoch": uuid.uuid4().hex, "generation": int(count), "updated_at": now}
        for user_id, count in counts
    ]
    if rows:
        op.bulk_insert(users, rows)


def downgrade() -> None:
    op.drop_table("memory_users")
