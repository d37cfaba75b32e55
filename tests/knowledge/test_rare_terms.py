"""Rare names and identifiers in short user files are found (issue 20): "Who wrote QuickCheck?" over a knowledge
base whose only answer is one sentence of a short HTML file returned nothing, because no chunk was close to the
question in meaning (the dense gate) although BM25 ranked the answer first by far.

The class: a person, product or identifier named in a short, undated user file of each loader type (HTML,
Markdown, plain text, JSONL, PDF), asked who / when / what, among unrelated documents; the knowledge-base tool at
its default relevance floor must return the file's passage first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from researchcrew.embedding.embedder import Embedder
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.knowledge.ingest import ingest_paths
from researchcrew.pipeline._support import EmbeddingSupport
from researchcrew.settings import ConfidenceSettings, Settings
from researchcrew.tools.rag import RAGTool
from tests.ingestion.files import write_pdf

from .conftest import CORPUS

PROPERTY_HTML = """<html><head><title>Property-based testing</title></head><body>
<h1>Property-based testing</h1>
<p>Property-based testing checks that a program satisfies general properties for many generated inputs, rather than
a few hand-picked examples.</p>
<p>QuickCheck, released in 1999 for Haskell by Koen Claessen and John Hughes, popularised the approach. Generators
produce random inputs and shrinking reduces a failing input to a minimal counterexample.</p>
<p>Hypothesis brings the same ideas to Python.</p>
</body></html>
"""

MUTATION_MD = """# Mutation testing

Mutation testing measures the quality of a test suite by introducing small changes (mutants) into the program and
checking whether the tests detect them.

## Tools

Most teams use an existing tool rather than writing their own. PITest, maintained by Henry Coles since 2010, is the
usual choice on the JVM; it runs the suite against each mutant in parallel and reports which survived.
"""

NOTES_TXT = (
    "Flaky tests pass and fail on the same code. Common causes are asynchronous waits, concurrency and test order "
    "dependency. The team's quarantine bot, Skerrick, retries a failing test three times before it files a ticket "
    "for the owner of the test.\n"
)

JSONL_RECORDS = [
    {
        "id": "ops-1",
        "title": "Build pipeline notes",
        "text": "Our continuous integration runs on a self-hosted cluster. Builds are cached per branch and the "
        "artifact store keeps thirty days of history. The Vantablack-7 runner image was introduced by Ingrid "
        "Solberg to cut cold-start times for the integration suite.",
    }
]

PDF_PAGE = (
    "Compilers translate source programs into machine code in several passes.\n"
    "Parsing builds a syntax tree; later passes optimise and emit code.\n"
    "The Marlowe optimiser was written by Tove Lindqvist for the Oberon toolchain."
)

CASES = [
    ("Who wrote QuickCheck?", "property.html"),
    ("When was QuickCheck released and who wrote it?", "property.html"),
    ("who created quickcheck", "property.html"),
    ("Who maintains PITest?", "mutation.md"),
    ("What is Skerrick?", "notes.txt"),
    ("Who introduced the Vantablack-7 image?", "ops.jsonl"),
    ("Who wrote the Marlowe optimiser?", "compilers.pdf"),
]


@pytest.fixture(scope="module")
def user_files(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[KnowledgeBase]:
    """The shared test corpus plus one short, undated user file of each loader type (built once: read only)."""
    tmp_path = tmp_path_factory.mktemp("rare-terms")
    with KnowledgeBase(Settings(data_dir=tmp_path / "data"), embedder=embedder) as kb:
        kb.add_documents(CORPUS)
        _add_user_files(kb, tmp_path / "files")
        yield kb


def _add_user_files(kb: KnowledgeBase, folder: Path) -> None:
    folder.mkdir()
    (folder / "property.html").write_text(PROPERTY_HTML)
    (folder / "mutation.md").write_text(MUTATION_MD)
    (folder / "notes.txt").write_text(NOTES_TXT)
    (folder / "ops.jsonl").write_text("\n".join(json.dumps(record) for record in JSONL_RECORDS) + "\n")
    write_pdf(folder / "compilers.pdf", [PDF_PAGE])
    report = ingest_paths(kb, folder, progress=False)
    assert report.documents_added == 5, report


@pytest.mark.parametrize(("question", "file_name"), CASES)
async def test_a_rare_name_in_a_short_user_file_is_found(
    user_files: KnowledgeBase, question: str, file_name: str
) -> None:
    result = await RAGTool(user_files).search(question)  # the default relevance floor (retrieval.min_relevance)
    assert result.ok and result.chunks, f"nothing found for {question!r}"
    best = result.chunks[0]
    assert Path(str(best.metadata["source_key"]).split("#")[0]).name == file_name, [
        c.metadata["source_key"] for c in result.chunks
    ]
    assert best.source_date is None  # undated files are not filtered out by a date reading of "when"
    assert best.metadata.get("exact_terms"), best.metadata


async def test_a_name_the_knowledge_base_does_not_hold_still_finds_nothing(user_files: KnowledgeBase) -> None:
    result = await RAGTool(user_files).search("Who wrote Frobnicator?")
    assert result.ok and result.chunks == []


async def test_the_sentence_naming_the_answer_supports_the_question(
    user_files: KnowledgeBase, embedder: Embedder
) -> None:
    """The passage's cosine (0.28) dilutes the one sentence that answers; support measures that sentence too, so
    the question is answered instead of met with the uncertainty answer."""
    question = "Who wrote QuickCheck?"
    result = await RAGTool(user_files).search(question)
    best = result.chunks[0]
    support = (await EmbeddingSupport(embedder)(question, [best]))[best.chunk_id]
    assert support.score >= ConfidenceSettings().answer_min_support, support
