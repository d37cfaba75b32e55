"""Conversation history: exchanges (with their recall embedding) and the message pair of each.

Revision ID: 0001
Revises:
Create Date: 2025-01-15
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Migrations spell their types out instead of importing the models: a revision must keep meaning what it meant
# when it was written, whatever the models look like later.
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "memory_exchanges",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("response_id", sa.String(256), nullable=False),
        sa.Column("user_id", sa.String(256), nullable=False),
        sa.Column("session_id", sa.String(256), nullable=False),
        sa.Column("query_id", sa.String(256), nullable=False),
        sa.Column("asked_at", TIMESTAMP, nullable=False),
        sa.Column("answered_at", TIMESTAMP, nullable=False),
        sa.Column("stored_at", TIMESTAMP, nullable=False),
        sa.Column("sources_used", JSON, nullable=False),
        sa.Column("source_reports", JSON, nullable=False),
        sa.Column("citations", JSON, nullable=False),
        sa.Column("context", JSON, nullable=True),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("answer_kind", sa.String(32), nullable=False),
        sa.Column("embedding", sa.LargeBinary(), nullable=True),
        sa.Column("embedding_model", sa.String(512), nullable=True),
        sa.UniqueConstraint("response_id", name="uq_memory_exchanges_response_id"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_memory_exchanges_user_id_id", "memory_exchanges", ["user_id", "id"])
    op.create_index("ix_memory_exchanges_user_session_asked", "memory_exchanges", ["user_id", "session_id", "asked_at"])
    op.create_table(
        "memory_messages",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("message_id", sa.String(64), nullable=False),
        sa.Column("exchange_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.String(256), nullable=False),
        sa.Column("session_id", sa.String(256), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.UniqueConstraint("message_id", name="uq_memory_messages_message_id"),
        sa.ForeignKeyConstraint(
            ["exchange_id"],
            ["memory_exchanges.id"],
            ondelete="CASCADE",
            name="fk_memory_messages_exchange_id_memory_exchanges",
        ),
    )
    op.create_index("ix_memory_messages_exchange_id", "memory_messages", ["exchange_id"])


def downgrade() -> None:
    op.drop_table("memory_messages")
    op.drop_table("memory_exchanges")
