"""Alembic migrations of researchcrew's database (memory, deep runs, service accounts and sessions, jobs); run
programmatically by ``researchcrew.db.engine.upgrade``."""
