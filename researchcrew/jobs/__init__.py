"""Scheduled batch research: jobs (many questions, defaults, a schedule, a webhook), their runs, and the places
runs execute — in process (``jobs run``, the embedded scheduler) or on Redis-backed taskiq workers.

The operations are one async API, ``researchcrew.jobs.api.Jobs``, on the process's ``Runtime``; the CLI, the SDK
(``ResearchAssistant.jobs``) and the HTTP routers all call it. Its tables are part of the database's schema
(``researchcrew/db/job_tables.py``); its repository is ``_store.py``. This package's ``__init__`` imports nothing.
"""
