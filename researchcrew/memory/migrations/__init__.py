"""Alembic migrations of the memory store; run programmatically by ``researchcrew.memory.db.upgrade``."""
