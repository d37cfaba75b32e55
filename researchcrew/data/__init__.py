"""Data files shipped inside the package (see each folder's ATTRIBUTION)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["demo_corpus_path"]


def demo_corpus_path() -> Path:
    """The bundled demo corpus: 105 arXiv records (CC0 metadata) as JSONL; see ``demo_corpus/ATTRIBUTION``."""
    return Path(__file__).resolve().parent / "demo_corpus" / "arxiv_abstracts.jsonl"
