"""The chat service's users, API keys and sessions (``service_users``, ``service_api_keys``, ``service_sessions``).

Users and keys: a key is shown once when it is made; only its SHA-256 is kept, next to a short public key id that
finds the row. Sessions: a conversation's own row (owner, title, created/updated). The exchanges table already
keys on (user_id, session_id); a session row names that pair, so reading a session is one indexed filter there.
Nothing existing changes; the downgrade drops the three tables.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "service_users",
        sa.Column("user_id", sa.String(256), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_table(
        "service_api_keys",
        sa.Column("key_id", sa.String(32), primary_key=True),
        sa.Column("user_id", sa.String(256), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_service_api_keys_user_id", "service_api_keys", ["user_id"])
    op.create_table(
        "service_sessions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("session_id", sa.String(256), nullable=False),
        sa.Column("user_id", sa.String(256), nullable=False),
        sa.Column("title", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("user_id", "session_id", name="uq_service_sessions_user_session"),
    )
    op.create_index("ix_service_sessions_user_updated", "service_sessions", ["user_id", "updated_at"])


def downgrade() -> None:
    op.drop_index("ix_service_sessions_user_updated", table_name="service_sessions")
    op.drop_table("service_sessions")
    op.drop_index("ix_service_api_keys_user_id", table_name="service_api_keys")
    op.drop_table("service_api_keys")
    op.drop_table("service_users")
