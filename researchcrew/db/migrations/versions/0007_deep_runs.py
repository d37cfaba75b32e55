"""Deep research runs (issue 14): ``memory_deep_runs``, one row per run with its status, the Flow state and
pending-feedback context of its last pause, the answer or decision waiting to be applied, and the report.

A paused run lives here rather than in crewAI's default SQLite file, so that it survives a restart and can be
resumed from another process (the chat service's workers share the PostgreSQL memory database).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "memory_deep_runs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.String(256), nullable=False),
        sa.Column("session_id", sa.String(256), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("awaiting", sa.String(32), nullable=True),
        sa.Column("state", JSON, nullable=True),
        sa.Column("pending", JSON, nullable=True),
        sa.Column("feedback", sa.Text(), nullable=True),
        sa.Column("report", JSON, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.Column("expires_at", TIMESTAMP, nullable=True),
        sa.Column("lease_until", TIMESTAMP, nullable=True),
    )
    op.create_index("ix_memory_deep_runs_user_created", "memory_deep_runs", ["user_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_memory_deep_runs_user_created", table_name="memory_deep_runs")
    op.drop_table("memory_deep_runs")
