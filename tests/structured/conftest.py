"""Fixtures for the structured-evidence tests: the real embedding model (once), one Milvus Lite file per module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from researchcrew.embedding.embedder import Embedder
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.settings import Settings


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The default embedder (int8 ONNX), exported once per machine and shared with the end-to-end tests."""
    from tests.e2e.support import shared_embedder

    return shared_embedder()


@pytest.fixture(scope="module")
def module_kb(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[KnowledgeBase]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("structured"))
    with KnowledgeBase(settings, embedder=embedder) as kb:
        yield kb


CORPUS: dict[str, str] = {
    "receipt-1042.html": (
        "<html><head><title>Receipt 1042</title></head><body><article><h1>Receipt 1042</h1>"
        "<p>Vendor: Tire World. Date: 2024-03-02. Parts bought for the field station truck.</p>"
        "<table><thead><tr><th>Item</th><th>Qty</th><th>Price</th></tr></thead><tbody>"
        "<tr><td>All-season tires</td><td>4</td><td>$89.50</td></tr>"
        "<tr><td>Wiper blades</td><td>2</td><td>$12.00</td></tr></tbody></table>"
        "<p>Total: $382.00</p></article></body></html>"
    ),
    "receipt-2001.md": (
        "# Receipt 2001\n\nVendor: Office Depot\n\nDate: 2023-11-20\n\n| Item | Qty | Price |\n|---|---|---|\n"
        "| Printer paper | 10 | $5.99 |\n| Toner | 1 | $64.00 |\n\nTotal: $123.90\n"
    ),
    "panels.csv": (
        "Model,Width,Height,Power\nSunMax 400,1.134 m,1.722 m,400 W\nHelio 350,45 in,68 in,350 W\n"
        "BrightRay 500,1310 mm,2094 mm,500 W\nOddPanel,1.1 furlongs,2 m,300 W\n"
    ),
    "study-a.md": "# Pooled testing in schools\n\nSample size: 1,204\n\nReagent cost per test: $2.35\n",
    "study-b.md": "# Pooled testing in clinics\n\nSample size: 640\n\nReagent cost per test: $3.15\n",
    "study-c.md": (
        "# Mass screening by pooling\n\n**Sample size:** 5,310 participants\n\nReagent cost per test: $1.10\n"
    ),
}


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    for name, text in CORPUS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder
