"""Session-wide pieces of the end-to-end tests: the embedding model (loaded once) and a small real knowledge base
(Milvus Lite in a temporary directory, filled from the demo corpus), shared read-only by the tests that need one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from researchcrew.embedding.embedder import Embedder
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.memory.store import MemoryStore
from researchcrew.settings import Settings
from tests.e2e.support import demo_documents, offline_settings, shared_embedder

# Demo-corpus records about three testing topics: enough for real retrieval, quick to embed.
KB_TOPICS = ("Metamorphic", "Flaky", "Mutation")


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The packaged all-MiniLM-L6-v2, the same process-wide instance the assistant gets from settings with
    ``embedding.cache_dir=MODEL_CACHE_DIR``."""
    return shared_embedder()


@pytest.fixture(scope="session")
def demo_kb_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return offline_settings(tmp_path_factory.mktemp("demo_kb"))


@pytest.fixture(scope="session")
def demo_kb(demo_kb_settings: Settings, embedder: Embedder) -> Iterator[KnowledgeBase]:
    """A knowledge base of 12 bundled demo-corpus abstracts. Shared: tests must not write to it or close it."""
    knowledge_base = KnowledgeBase(demo_kb_settings, embedder=embedder)
    report = knowledge_base.add_documents(demo_documents(KB_TOPICS))
    assert report.documents_added >= 10
    yield knowledge_base
    knowledge_base.close()


@pytest.fixture
async def memory_store(tmp_path: Path, embedder: Embedder) -> AsyncIterator[MemoryStore]:
    """A fresh SQLite memory store in this test's directory, embedding with the shared model."""
    store = await MemoryStore.open(f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}", embedder=embedder)
    yield store
    await store.close()
