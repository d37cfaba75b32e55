"""Fixtures of the deep-research tests."""

from __future__ import annotations

import pytest

from researchcrew.embedding.embedder import get_embedder
from researchcrew.settings import EmbeddingSettings
from tests.e2e.support import MODEL_CACHE_DIR


@pytest.fixture(scope="session")
def embedder_available() -> None:
    """Load the packaged embedding model once (memory remembers exchanges with it)."""
    get_embedder(EmbeddingSettings(cache_dir=MODEL_CACHE_DIR))
