"""Issue 13, items 2 and 8 at the unit level: the confidence settings group, the validation that turns configuration
mistakes into one line, and the answer-confidence arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from researchcrew.contracts import ContextChunk, FinalResponse, Query
from researchcrew.contracts.evaluator import ContradictionRecord, ScoredChunk
from researchcrew.contracts.synthesizer import Citation
from researchcrew.errors import ConfigurationError
from researchcrew.pipeline._assessment import assess_answer, band
from researchcrew.pipeline._support import Support, coverage, relevance_support
from researchcrew.settings import ConfidenceSettings, MemorySettings, Settings, check_memory_url


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("rag,memory", ["rag", "memory"]),
        (" rag , arxiv ", ["rag", "arxiv"]),
        ('["web"]', ["web"]),
        ("RAG,rag", ["rag"]),
    ],
)
def test_enabled_sources_from_the_environment(monkeypatch: pytest.MonkeyPatch, value: str, expected: list[str]) -> None:
    monkeypatch.setenv("RESEARCHCREW_ENABLED_SOURCES", value)
    assert Settings().enabled_sources == expected


@pytest.mark.parametrize(("value", "message"), [("rag,wbe", "unknown source type"), ("", "no source is enabled")])
def test_bad_enabled_sources_fail(monkeypatch: pytest.MonkeyPatch, value: str, message: str) -> None:
    monkeypatch.setenv("RESEARCHCREW_ENABLED_SOURCES", value)
    with pytest.raises(ValidationError, match=message):
        Settings()


@pytest.mark.parametrize(
    "url",
    [
        "sqlite+aiosqlite:////tmp/m.db",
        "sqlite+aiosqlite://",
        "postgresql+asyncpg://u@localhost/db",
        "postgres+asyncpg://h/d",
    ],
)
def test_usable_memory_urls_pass(url: str) -> None:
    assert check_memory_url(url) == url


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://", "names no driver"),
        ("postgresql+psycopg2://u:pw@h/db", "the driver 'psycopg2'"),
        ("postgresql+asyncpg://", "names no server or database"),
        ("sqlite:///", "names no driver"),
        ("mysql+aiomysql://u:pw@h/db", "not 'mysql'"),
        ("memory.db", "is not a database URL"),
    ],
)
def test_unusable_memory_urls_say_why_with_an_example_and_no_password(url: str, message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        MemorySettings(database_url=url)
    text = str(raised.value)
    assert message in text and ("sqlite+aiosqlite:" in text or "postgresql+asyncpg:" in text)
    assert ":pw@" not in text


def test_a_data_dir_under_a_file_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ValidationError, match="is a file, not a folder"):
        Settings(data_dir=blocker / "below")


def test_an_unwritable_data_dir_is_a_configuration_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(data_dir=tmp_path / "new")

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(ConfigurationError, match=r"RESEARCHCREW_DATA_DIR .* cannot be used"):
        settings.ensure_data_dir()


def test_confidence_bands_are_seed_001s_and_must_be_ordered() -> None:
    settings = ConfidenceSettings()
    assert (settings.high, settings.medium, settings.low) == (0.80, 0.70, 0.50)
    assert [band(score, settings) for score in (0.85, 0.75, 0.55, 0.2)] == ["high", "medium", "low", "insufficient"]
    with pytest.raises(ValidationError, match="ordered"):
        ConfidenceSettings(high=0.5, medium=0.7)
    with pytest.raises(ValidationError, match="semantic_full"):
        ConfidenceSettings(semantic_floor=0.6, semantic_full=0.5)


def _chunk(chunk_id: str, content: str, source_type: str = "rag") -> ContextChunk:
    return ContextChunk(chunk_id=chunk_id, source_type=source_type, content=content, semantic_relevance=0.9)


def _response(*cited: str) -> FinalResponse:
    query = Query(text="q", user_id="u", session_id="s")
    citations = [Citation(number=n, chunk_id=c, source_type="rag") for n, c in enumerate(cited, start=1)]
    return FinalResponse(query=query, answer="a", citations=citations)


def _scored(chunk: ContextChunk, quality: float) -> ScoredChunk:
    return ScoredChunk(chunk=chunk, quality_score=quality, source_reputation=0.8, recency=0.5, relevance=0.9)


def test_answer_confidence_follows_support_quality_and_agreement() -> None:
    a, b = _chunk("a", "alpha"), _chunk("b", "beta")
    evidence = [_scored(a, 0.8), _scored(b, 0.6)]
    supports = {"a": Support(1.0, 0.8, 1.0, "embedding"), "b": Support(0.5, 0.5, 0.5, "embedding")}
    settings = ConfidenceSettings()

    strong = assess_answer(_response("a"), evidence, supports, [], settings)
    assert strong.confidence == pytest.approx(0.7 * 1.0 + 0.3 * 0.8)
    assert strong.level == "high" and strong.caveat is None
    assert strong.reason.startswith("confidence_high: 1 cited passage(s) from rag; the best matches the question")

    dispute = ContradictionRecord(
        chunk_id_a="a", chunk_id_b="b", claim_a="x", claim_b="y", kind="numeric", confidence=0.8
    )
    contested = assess_answer(_response("a", "b"), evidence, supports, [dispute], settings)
    assert contested.confidence == pytest.approx((0.7 * 1.0 + 0.3 * 0.7) * 0.8)
    assert contested.level == "medium" and "1 disagreement(s)" in contested.reason
    assert contested.caveat is not None and contested.caveat.startswith("Confidence is medium")

    nothing = assess_answer(_response(), evidence, supports, [], settings)
    assert (nothing.confidence, nothing.level) == (0.0, "insufficient")


async def test_without_a_model_each_sources_relevance_stands_in() -> None:
    chunk = _chunk("a", "Metamorphic testing relates outputs.")
    [support] = (await relevance_support("What is metamorphic testing?", [chunk])).values()
    assert (support.score, support.basis) == (0.9, "source_relevance")
    assert coverage("What is metamorphic testing?", chunk) == 1.0
    assert coverage("How much gallium is on Jupiter's moons?", chunk) == 0.0
