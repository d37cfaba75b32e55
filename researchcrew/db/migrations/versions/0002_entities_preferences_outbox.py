"""Entity graph (entities, mentions, bidirectional relationships), user preferences and the Zep outbox.

Revision ID: 0002
Revises: 0001
Create Date: 2025-02-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
TIMESTAMP = sa.DateTime(timezone=True)


def _entity_fk(column: str, table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column], ["memory_entities.id"], ondelete="CASCADE", name=f"fk_{table}_{column}_memory_entities"
    )


def upgrade() -> None:
    op.create_table(
        "memory_entities",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.String(256), nullable=False),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("normalized_name", sa.String(512), nullable=False),
        sa.Column("entity_type", sa.String(64), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("mention_count", sa.Integer(), nullable=False),
        sa.Column("first_seen", TIMESTAMP, nullable=False),
        sa.Column("last_seen", TIMESTAMP, nullable=False),
        sa.UniqueConstraint("user_id", "normalized_name", name="uq_memory_entities_user_name"),
    )
    op.create_table(
        "memory_entity_mentions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("entity_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.String(256), nullable=False),
        sa.Column("response_id", sa.String(256), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("context", sa.Text(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.UniqueConstraint("entity_id", "response_id", name="uq_memory_mentions_entity_response"),
        _entity_fk("entity_id", "memory_entity_mentions"),
    )
    op.create_index("ix_memory_entity_mentions_user_id", "memory_entity_mentions", ["user_id"])
    op.create_table(
        "memory_relationships",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.String(256), nullable=False),
        sa.Column("source_entity_id", sa.Integer(), nullable=False),
        sa.Column("target_entity_id", sa.Integer(), nullable=False),
        sa.Column("relation", sa.String(128), nullable=False),
        sa.Column("inverse", sa.Boolean(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("first_seen", TIMESTAMP, nullable=False),
        sa.Column("last_seen", TIMESTAMP, nullable=False),
        sa.Column("last_response_id", sa.String(256), nullable=True),
        sa.UniqueConstraint(
            "user_id", "source_entity_id", "target_entity_id", "relation", "inverse", name="uq_memory_relationships"
        ),
        _entity_fk("source_entity_id", "memory_relationships"),
        _entity_fk("target_entity_id", "memory_relationships"),
    )
    op.create_index("ix_memory_relationships_source", "memory_relationships", ["source_entity_id"])
    op.create_table(
        "memory_preferences",
        sa.Column("user_id", sa.String(256), primary_key=True),
        sa.Column("preferences", JSON, nullable=False),
        sa.Column("counters", JSON, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
    )
    op.create_table(
        "memory_outbox",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("idempotency_key", sa.String(512), nullable=False),
        sa.Column("user_id", sa.String(256), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("next_attempt_at", TIMESTAMP, nullable=False),
        sa.Column("lease_until", TIMESTAMP, nullable=True),
        sa.Column("claim_token", sa.String(64), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("delivered_at", TIMESTAMP, nullable=True),
        sa.UniqueConstraint("idempotency_key", name="uq_memory_outbox_idempotency_key"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_memory_outbox_due", "memory_outbox", ["delivered_at", "next_attempt_at"])
    op.create_index("ix_memory_outbox_user_id", "memory_outbox", ["user_id"])


def downgrade() -> None:
    op.drop_table("memory_outbox")
    op.drop_table("memory_preferences")
    op.drop_table("memory_relationships")
    op.drop_table("memory_entity_mentions")
    op.drop_table("memory_entities")
