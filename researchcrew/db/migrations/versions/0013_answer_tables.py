"""Answer tables (``memory_answer_tables``, issue 22): the whole result set of each structured answer, per session,
for "show the rest" and CSV export. Nothing existing changes; the downgrade drops the table.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json = sa.JSON().with_variant(JSONB(), "postgresql")
    op.create_table(
        "memory_answer_tables",
        sa.Column("table_id", sa.String(32), primary_key=True),
        sa.Column("user_id", sa.String(256), nullable=False),
        sa.Column("session_id", sa.String(256), nullable=False),
        sa.Column("response_id", sa.String(256), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("title", sa.String(500), nullable=False),
        sa.Column("columns", json, nullable=False),
        sa.Column("rows", json, nullable=False),
        sa.Column("aggregates", json, nullable=False),
        sa.Column("notes", json, nullable=False),
        sa.Column("total_rows", sa.Integer(), nullable=False),
        sa.Column("page_size", sa.Integer(), nullable=False),
        sa.Column("shown", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(
        "ix_memory_answer_tables_user_session", "memory_answer_tables", ["user_id", "session_id", "created_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_memory_answer_tables_user_session", table_name="memory_answer_tables")
    op.drop_table("memory_answer_tables")
