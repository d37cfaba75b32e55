"""Documents uploaded over HTTP (``kb_documents``): owner, collection, file, status and the chunks' source keys.

Nothing existing changes; the downgrade drops the table.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "kb_documents",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("owner", sa.String(256), nullable=False),
        sa.Column("collection", sa.String(256), nullable=False),
        sa.Column("filename", sa.String(255), nullable=False),
        sa.Column("format", sa.String(16), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("source_url", sa.String(2048), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("records", sa.Integer(), nullable=False),
        sa.Column("chunks", sa.Integer(), nullable=False),
        sa.Column("source_keys", sa.JSON().with_variant(JSONB(), "postgresql"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_kb_documents_owner_created", "kb_documents", ["owner", "created_at"])
    op.create_index("ix_kb_documents_collection", "kb_documents", ["collection"])
    op.create_index("ix_kb_documents_status", "kb_documents", ["status"])


def downgrade() -> None:
    op.drop_index("ix_kb_documents_status", table_name="kb_documents")
    op.drop_index("ix_kb_documents_collection", table_name="kb_documents")
    op.drop_index("ix_kb_documents_owner_created", table_name="kb_documents")
    op.drop_table("kb_documents")
