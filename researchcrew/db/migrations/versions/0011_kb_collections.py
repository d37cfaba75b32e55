"""Document collections with named readers (``kb_collections``, ``kb_collection_members``; issue 19 item 4).

A named shared collection has a row (its owner, when it was made over HTTP) and one row per member; a member
lookup by user is indexed. ``shared`` and users' private collections exist without rows. Removing a collection
removes its members (``ON DELETE CASCADE``; the repository also deletes them itself, SQLite enforces foreign keys
only when asked). Nothing existing changes; the downgrade drops both tables.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "kb_collections",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("owner_id", sa.String(256), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "kb_collection_members",
        sa.Column("collection", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.String(256), primary_key=True),
        sa.Column("added_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["collection"],
            ["kb_collections.name"],
            ondelete="CASCADE",
            name="fk_kb_collection_members_collection_kb_collections",
        ),
    )
    op.create_index("ix_kb_collection_members_user_id", "kb_collection_members", ["user_id"])


def downgrade() -> None:
    op.drop_index("ix_kb_collection_members_user_id", table_name="kb_collection_members")
    op.drop_table("kb_collection_members")
    op.drop_table("kb_collections")
