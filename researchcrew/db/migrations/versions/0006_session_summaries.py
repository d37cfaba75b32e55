"""Rolling session summaries (``memory_session_summaries``): what follow-up questions are rewritten from.

One row per (user, session), written by the Memory stage after every exchange and read by the Flow's follow-up
stage before retrieval. Nothing is backfilled: a session without a row is summarised from its latest exchanges
when it is next read, and gets its row with its next exchange.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "memory_session_summaries",
        sa.Column("user_id", sa.String(256), primary_key=True),
        sa.Column("session_id", sa.String(256), primary_key=True),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("summary", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("memory_session_summaries")
