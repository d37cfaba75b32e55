"""pymilvus asks Milvus Lite every 20 ms whether an index is built or a load has finished, instead of sleeping half
a second first (``knowledge/_store.py``, ``_poll_lite_quickly``): a new knowledge base opened in 1.03 s, 0.07 s now."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pymilvus.client import grpc_handler

from researchcrew.knowledge._store import _QuickPolls
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.settings import EmbeddingSettings, Settings
from tests.e2e.support import MODEL_CACHE_DIR, shared_embedder


def test_opening_a_lite_file_makes_pymilvus_poll_quickly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grpc_handler, "time", time)  # as in a process that has not opened Milvus Lite yet
    settings = Settings(data_dir=tmp_path, embedding=EmbeddingSettings(cache_dir=MODEL_CACHE_DIR))
    knowledge_base = KnowledgeBase(settings, embedder=shared_embedder())
    try:
        knowledge_base.store.open()  # a new collection: its indexes are built, then it is loaded
        assert isinstance(grpc_handler.time, _QuickPolls)
    finally:
        knowledge_base.close()


def test_only_the_polling_sleeps_are_shortened(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    polls = _QuickPolls()
    for seconds in (0.5, 0.2, 0.01, 3, 5):  # index/flush polls, load polls, a short one; reconnect and flush-all
        polls.sleep(seconds)
    assert slept == [0.02, 0.02, 0.01, 3, 5]
    assert polls.time is time.time and polls.monotonic is time.monotonic  # timeouts are measured as before
