"""Scheduled batch research: jobs (many questions, defaults, a schedule, a webhook), their runs, and the places
runs execute — in process (``jobs run``, the embedded scheduler) or on Redis-backed taskiq workers.

The operations are one async API, ``researchcrew.jobs.api.Jobs``, on the process's ``Runtime``; the CLI, the SDK
(``ResearchAssistant.jobs``) and the HTTP routers all call it. This package's ``__init__`` imports nothing, so
that the memory store's models can load the job tables (``tables.py``) without loading the rest.
"""
