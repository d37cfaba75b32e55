"""The memory store (SQLite and PostgreSQL), recall, MemoryTool and the `memory` CLI."""
