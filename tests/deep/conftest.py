"""Fixtures of the deep-research tests."""

from __future__ import annotations

import pytest

from tests.e2e.support import shared_embedder


@pytest.fixture(scope="session")
def embedder_available() -> None:
    """Load the packaged embedding model once (memory remembers exchanges with it)."""
    shared_embedder()
