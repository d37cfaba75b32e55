"""Batch jobs: ``jobs``, ``job_runs`` and ``job_run_items`` (one row, and so one result, per question of a run).

``job_runs`` is unique on ``(job_id, slot_key)`` so that a schedule slot creates one run however many schedulers
fire it. New tables only: existing data is untouched, and the downgrade drops them again.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(JSONB(), "postgresql")


def _timestamp(name: str, *, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("owner", sa.String(256), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        _timestamp("created_at", nullable=False),
        sa.Column("source", sa.String(1024), nullable=False),
        sa.Column("questions", _JSON, nullable=False),
        sa.Column("columns", _JSON, nullable=False),
        sa.Column("options", _JSON, nullable=False),
        sa.Column("schedule_cron", sa.String(120), nullable=True),
        sa.Column("schedule_tz", sa.String(64), nullable=True),
        sa.Column("webhook_url", sa.String(2048), nullable=True),
        sa.Column("webhook_secret", sa.String(128), nullable=True),
        sa.Column("remember", sa.Boolean(), nullable=False),
        sa.UniqueConstraint("owner", "name", name="uq_jobs_owner_name"),
    )
    op.create_table(
        "job_runs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("job_id", sa.String(32), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("owner", sa.String(256), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("slot_key", sa.String(64), nullable=True),
        _timestamp("slot_at"),
        sa.Column("executor", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        _timestamp("created_at", nullable=False),
        _timestamp("started_at"),
        _timestamp("finished_at"),
        _timestamp("cancel_requested_at"),
        _timestamp("dispatch_until"),
        _timestamp("dispatched_at"),
        sa.Column("webhook_state", sa.String(16), nullable=False),
        sa.Column("webhook_attempts", sa.Integer(), nullable=False),
        sa.Column("webhook_error", sa.Text(), nullable=True),
        sa.UniqueConstraint("job_id", "slot_key", name="uq_job_runs_job_slot"),
    )
    op.create_index("ix_job_runs_owner_created", "job_runs", ["owner", "created_at"])
    op.create_index("ix_job_runs_job_created", "job_runs", ["job_id", "created_at"])
    op.create_index("ix_job_runs_status", "job_runs", ["status"])
    op.create_table(
        "job_run_items",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("job_runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("idx", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("options", _JSON, nullable=False),
        sa.Column("carried", _JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(128), nullable=True),
        _timestamp("lease_until"),
        _timestamp("started_at"),
        _timestamp("finished_at"),
        sa.Column("answered_by", sa.String(128), nullable=True),
        sa.Column("response", _JSON, nullable=True),
        sa.Column("failure", _JSON, nullable=True),
        sa.Column("confidence_level", sa.String(16), nullable=True),
        sa.Column("citation_count", sa.Integer(), nullable=False),
        sa.Column("sources_used", _JSON, nullable=False),
        sa.Column("sources_failed", _JSON, nullable=False),
    )
    op.create_index("ix_job_run_items_run_status", "job_run_items", ["run_id", "status"])


def downgrade() -> None:
    op.drop_index("ix_job_run_items_run_status", table_name="job_run_items")
    op.drop_table("job_run_items")
    for index in ("ix_job_runs_status", "ix_job_runs_job_created", "ix_job_runs_owner_created"):
        op.drop_index(index, table_name="job_runs")
    op.drop_table("job_runs")
    op.drop_table("jobs")
