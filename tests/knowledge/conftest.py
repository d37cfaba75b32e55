"""Fixtures for the knowledge-base tests: the real embedding model (loaded once), Milvus Lite in tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from researchcrew.embedding.embedder import Embedder, SentenceTransformerEmbedder, resolve_model_path
from researchcrew.knowledge._tokens import TokenCounter, token_counter_for
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.knowledge.documents import Document
from researchcrew.settings import Settings


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The packaged all-MiniLM-L6-v2 on torch, once per test session (loading takes seconds)."""
    return SentenceTransformerEmbedder()


@pytest.fixture(scope="session")
def token_counter() -> TokenCounter:
    return token_counter_for(resolve_model_path("all-MiniLM-L6-v2"))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path)


@pytest.fixture
def kb(settings: Settings, embedder: Embedder) -> Iterator[KnowledgeBase]:
    with KnowledgeBase(settings, embedder=embedder) as knowledge_base:
        yield knowledge_base


CORPUS = [
    Document(
        source_key="notes/photosynthesis.md",
        title="Photosynthesis in plants",
        text="# Light reactions\n\nChlorophyll in the thylakoid membranes absorbs sunlight and splits water, "
        "releasing oxygen.\n\n# Calvin cycle\n\nThe enzyme RuBisCO fixes carbon dioxide into sugars in the stroma.",
        source_date=datetime(2019, 3, 1),
        metadata={"category": "biology"},
    ),
    Document(
        source_key="notes/transformers.md",
        title="Attention is all you need",
        text="The Transformer architecture relies entirely on self-attention to draw global dependencies between "
        "input and output tokens, dispensing with recurrence and convolutions.",
        source_date=datetime(2017, 6, 12),
        metadata={"category": "cs.CL"},
    ),
    Document(
        source_key="notes/vaccines.md",
        title="mRNA vaccine efficacy",
        text="Randomised trials in 2021 showed that mRNA vaccines reduced symptomatic COVID-19 infection by about "
        "95 percent in adults.",
        source_date=datetime(2021, 2, 1),
        metadata={"category": "medicine"},
    ),
    Document(
        source_key="notes/vaccines-2015.md",
        title="Influenza vaccine efficacy",
        text="Seasonal influenza vaccines reduced laboratory-confirmed infection by about 60 percent in adults "
        "during the 2014 season.",
        source_date=datetime(2015, 9, 1),
        metadata={"category": "medicine"},
    ),
    Document(
        source_key="notes/volcanoes.md",
        title="Volcanic eruptions",
        text="Magma rises through the crust; explosive eruptions eject ash columns into the stratosphere, cooling "
        "the climate for a year or two.",
        metadata={"category": "geology"},
    ),
]
