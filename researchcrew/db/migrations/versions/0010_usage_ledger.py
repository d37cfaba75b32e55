"""What each answer spent (``usage_answers``): tokens and their cost in US dollars, per user and time.

The per-user usage view (``GET /v1/usage``, ``researchcrew usage``) and the monthly budget read it by
``(user_id, at)``. ``cost_usd`` is NULL when the model's price is unknown. The downgrade drops the table.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "usage_answers",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.String(256), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("response_id", sa.String(256), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("model", sa.String(255), nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_usage_answers_user_at", "usage_answers", ["user_id", "at"])


def downgrade() -> None:
    op.drop_index("ix_usage_answers_user_at", table_name="usage_answers")
    op.drop_table("usage_answers")
