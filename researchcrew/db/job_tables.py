"""The batch-job tables (revisions 0005, 0009): jobs, their runs, and one row per question of a run.

They live in researchcrew's one database (SQLite by default, PostgreSQL at scale) and on its ``Base``, so that the
Alembic migrations and ``tests/memory_store/test_migrations.py`` see one schema; their repository is
``jobs/_store.py``. Two constraints carry the
guarantees of issue 12:

* ``job_run_items`` has the primary key ``(run_id, idx)``: a question of a run has exactly one row, and its
  result is written into that row only by the worker holding its lease (see ``jobs/_store.py``), so a question
  redelivered to a second worker can never produce a second result;
* ``job_runs`` is unique on ``(job_id, slot_key)``: a schedule slot creates at most one run, however many
  schedulers fire it (manual runs have no slot key; NULLs never collide).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from researchcrew.db._base import ID_LENGTH, Base, utcnow

JOB_ID_LENGTH = 32  # uuid4 hex


class JobRow(Base):
    """A named set of questions owned by one user, with defaults, an optional schedule and webhook."""

    __tablename__ = "jobs"
    __table_args__ = (UniqueConstraint("owner", "name", name="uq_jobs_owner_name"),)

    id: Mapped[str] = mapped_column(String(JOB_ID_LENGTH), primary_key=True)
    owner: Mapped[str] = mapped_column(String(ID_LENGTH))
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    source: Mapped[str] = mapped_column(String(1024))  # "inline" or the file name the questions came from
    questions: Mapped[list[Any]]  # [{"question", "options", "carried", "line"}] in file order
    columns: Mapped[list[Any]]  # the carried CSV columns, in file order
    options: Mapped[dict[str, Any]]  # the job's default per-question options (QuestionOptions)
    schedule_cron: Mapped[str | None] = mapped_column(String(120), default=None)
    schedule_tz: Mapped[str | None] = mapped_column(String(64), default=None)
    webhook_url: Mapped[str | None] = mapped_column(String(2048), default=None)
    webhook_secret: Mapped[str | None] = mapped_column(String(128), default=None)
    remember: Mapped[bool] = mapped_column(Boolean, default=False)


class RunRow(Base):
    """One execution of a job: manual, or fired by a schedule slot."""

    __tablename__ = "job_runs"
    __table_args__ = (
        UniqueConstraint("job_id", "slot_key", name="uq_job_runs_job_slot"),
        Index("ix_job_runs_owner_created", "owner", "created_at"),
        Index("ix_job_runs_job_created", "job_id", "created_at"),
        Index("ix_job_runs_status", "status"),
    )

    id: Mapped[str] = mapped_column(String(JOB_ID_LENGTH), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    owner: Mapped[str] = mapped_column(String(ID_LENGTH))
    trigger: Mapped[str] = mapped_column(String(16))  # manual | schedule | catch_up
    slot_key: Mapped[str | None] = mapped_column(String(64), default=None)
    slot_at: Mapped[datetime | None] = mapped_column(default=None)
    executor: Mapped[str] = mapped_column(String(16))  # in_process | queue
    status: Mapped[str] = mapped_column(String(16))  # queued | running | completed | partial | failed | cancelled
    total: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    cancel_requested_at: Mapped[datetime | None] = mapped_column(default=None)
    # Queue runs: who is sending the run's question messages (a lease, like a question's) and when it was done,
    # so that a slot fired by two schedulers, or a redelivered dispatch, sends each question once.
    dispatch_until: Mapped[datetime | None] = mapped_column(default=None)
    dispatched_at: Mapped[datetime | None] = mapped_column(default=None)
    webhook_state: Mapped[str] = mapped_column(String(16), default="none")  # none | pending | delivered | failed
    webhook_attempts: Mapped[int] = mapped_column(Integer, default=0)
    webhook_error: Mapped[str | None] = mapped_column(Text, default=None)


class RunItemRow(Base):
    """One question of one run and, once researched, its one result."""

    __tablename__ = "job_run_items"
    __table_args__ = (
        Index("ix_job_run_items_run_status", "run_id", "status"),
        Index("ix_job_run_items_status_lease", "status", "lease_until"),  # the sweep for leases that ran out
    )

    run_id: Mapped[str] = mapped_column(ForeignKey("job_runs.id", ondelete="CASCADE"), primary_key=True)
    idx: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    question: Mapped[str] = mapped_column(Text)
    options: Mapped[dict[str, Any]]  # the merged QuestionOptions this question is researched with
    carried: Mapped[dict[str, Any]]  # the other CSV columns of its row
    status: Mapped[str] = mapped_column(String(16))  # pending | running | answered | uncertain | failed | cancelled
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(128), default=None)
    lease_until: Mapped[datetime | None] = mapped_column(default=None)
    # The lease holder's process (revision 0009, ``jobs/_leases.py``): a process on the same host reclaims the
    # leases of one that is provably dead at once, instead of waiting for ``lease_until``.
    lease_host: Mapped[str | None] = mapped_column(String(255), default=None)
    lease_pid: Mapped[int | None] = mapped_column(Integer, default=None)
    lease_boot: Mapped[str | None] = mapped_column(String(64), default=None)
    lease_process: Mapped[str | None] = mapped_column(String(64), default=None)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    answered_by: Mapped[str | None] = mapped_column(String(128), default=None)  # the process that stored the result
    response: Mapped[dict[str, Any] | None] = mapped_column(default=None)  # the FinalResponse, as JSON
    failure: Mapped[dict[str, Any] | None] = mapped_column(default=None)  # {"kind", "message"} when failed
    confidence_level: Mapped[str | None] = mapped_column(String(16), default=None)
    citation_count: Mapped[int] = mapped_column(Integer, default=0)
    sources_used: Mapped[list[Any]] = mapped_column(default=list)
    sources_failed: Mapped[list[Any]] = mapped_column(default=list)  # [{"source", "kind", "message"}]


JOB_TABLES = (JobRow.__table__, RunRow.__table__, RunItemRow.__table__)
