"""Small measurements kept beside a knowledge base in its data directory (a JSON file of entries by key), read and
written by whoever measured them: the confidence stage's null cosine (``pipeline/_null.py``) is one. Writes are
atomic (a temporary file renamed over the old one) and keep the other keys; a missing or foreign file reads as
empty. Best effort: a failure is logged, never raised — the value is measured again."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


class KeptValues:
    """One JSON file of ``key → entry`` (an entry is a dict of plain JSON values)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self, key: str) -> dict[str, Any] | None:
        entry = self._entries().get(key)
        return entry if isinstance(entry, dict) else None

    def write(self, key: str, entry: dict[str, Any]) -> None:
        entries = self._entries()
        entries[key] = entry
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.stem}-", suffix=".json")
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                json.dump(entries, file)
            os.replace(temporary, self.path)
        except OSError as error:
            logger.info("keeping a value in %s failed: %s", self.path, error)

    def _entries(self) -> dict[str, Any]:
        try:
            entries = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # no file yet, or not one this version wrote
        return entries if isinstance(entries, dict) else {}
