"""Data files shipped inside the package (see each folder's ATTRIBUTION)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["demo_corpus_path", "reference_corpus_path"]


def demo_corpus_path() -> Path:
    """The bundled demo corpus: 105 arXiv records (CC0 metadata) as JSONL; see ``demo_corpus/ATTRIBUTION``."""
    return Path(__file__).resolve().parent / "demo_corpus" / "arxiv_abstracts.jsonl"


def reference_corpus_path() -> Path:
    """The bundled reference corpus: six Markdown notes that cite each other and four arXiv papers by arXiv id, DOI,
    numbered reference list and quoted title (``documents/``), and recorded-format arXiv responses for the cited
    papers (``arxiv/``); see ``reference_corpus/ATTRIBUTION``."""
    return Path(__file__).resolve().parent / "reference_corpus"
