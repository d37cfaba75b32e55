"""Conversation memory: stores (SQLite/PostgreSQL), Zep, the outbox and the entity graph."""
