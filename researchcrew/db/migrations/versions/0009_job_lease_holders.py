"""Who holds a question's lease (``job_run_items.lease_host``, ``lease_pid``, ``lease_boot``, ``lease_process``).

A process on the same host as a lease's holder can tell that the holder died (its pid is gone, the machine
rebooted) and take the question back at once instead of waiting for the lease to run out (``jobs/_leases.py``).
An index on ``(status, lease_until)`` serves the periodic sweep for leases that ran out. Leases taken before this
revision have no holder and simply run out; the downgrade drops the index and the columns.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    ("lease_host", sa.String(255)),
    ("lease_pid", sa.Integer()),
    ("lease_boot", sa.String(64)),
    ("lease_process", sa.String(64)),
)


def upgrade() -> None:
    with op.batch_alter_table("job_run_items") as batch:
        for name, kind in _COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))
    op.create_index("ix_job_run_items_status_lease", "job_run_items", ["status", "lease_until"])


def downgrade() -> None:
    op.drop_index("ix_job_run_items_status_lease", table_name="job_run_items")
    with op.batch_alter_table("job_run_items") as batch:
        for name, _ in reversed(_COLUMNS):
            batch.drop_column(name)
