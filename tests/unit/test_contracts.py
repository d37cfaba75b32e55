"""The seed-003 contracts: every model survives JSON, inputs reject what they should, bounds hold (property tests)."""

from __future__ import annotations

import types
import typing
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from researchcrew import contracts
from researchcrew.contracts import (
    AggregatedContext,
    AnswerSection,
    Citation,
    CitationStats,
    Claim,
    ContextChunk,
    ContradictionRecord,
    CoverageMetrics,
    EvaluatorInput,
    EvaluatorOutput,
    FilteredContext,
    FinalResponse,
    MemoryInput,
    MemoryOutput,
    QualityStatistics,
    Query,
    RemovalReason,
    RetrieverInput,
    RetrieverOutput,
    ScoredChunk,
    SourceFailure,
    SourceReport,
    SynthesizerInput,
    SynthesizerOutput,
    UserPreferences,
)
from researchcrew.contracts._base import Contract
from researchcrew.contracts.query import MAX_QUERY_CHARS
from researchcrew.settings import Settings

WHEN = datetime(2025, 11, 13, 9, 30, tzinfo=UTC)


# Fully populated samples of the models, built the way the stages build them ------------------------------------


def rich_samples() -> list[Contract]:
    chunk = ContextChunk(
        chunk_id="arxiv:1706.03762#0",
        source_type="arxiv",
        content="Attention is all you need.",
        semantic_relevance=0.82,
        title="Attention Is All You Need",
        url="https://arxiv.org/abs/1706.03762",
        source_id="1706.03762",
        source_date=datetime(2017, 6, 12, tzinfo=UTC),
        authors=["A. Vaswani", "N. Shazeer"],
        metadata={"categories": ["cs.CL", "cs.LG"], "position": 0},
        tool_name="academic_search",
    )
    web_chunk = ContextChunk(
        chunk_id="web-1",
        source_type="web",
        content="Transformers use self-attention.",
        semantic_relevance=0.6,
        url="https://example.org/t",
        tool_name="web_search",
    )
    failure = SourceFailure(kind="http_error", message="Firecrawl answered 429", status_code=429)
    reports = [
        SourceReport(
            source_type="arxiv", tool_name="academic_search", status="success", latency_ms=812.5, chunk_count=1
        ),
        SourceReport(source_type="web", tool_name="web_search", status="failed", latency_ms=91.0, failure=failure),
        SourceReport(source_type="memory", tool_name="memory_recall", status="skipped"),
        SourceReport(source_type="rag", tool_name="rag_search", status="empty", latency_ms=12.0),
    ]
    aggregated = AggregatedContext(
        query_text="What is a transformer?", chunks=[chunk, web_chunk], source_reports=reports, retrieved_at=WHEN
    )
    preferences = UserPreferences(
        response_format="technical",
        preferred_sources=["arxiv"],
        excluded_sources=["web"],
        max_response_length=800,
        min_response_length=50,
        include_sections=False,
        source_reputation={"arxiv": 0.9},
    )
    query = Query(query_id="q1", text="What is a transformer?", user_id="u1", session_id="s1", asked_at=WHEN)
    scored = ScoredChunk(
        chunk=chunk, quality_score=0.77, source_reputation=0.85, recency=0.3, relevance=0.82, redundancy_penalised=False
    )
    filtered = FilteredContext(query_text=query.text, chunks=[scored])
    contradiction = ContradictionRecord(
        chunk_id_a="a",
        chunk_id_b="b",
        claim_a="X is 100",
        claim_b="X is 50",
        kind="numeric",
        subject="X",
        confidence=0.7,
        explanation="100 vs 50",
    )
    citation = Citation(
        number=1,
        chunk_id=chunk.chunk_id,
        source_type="arxiv",
        title=chunk.title,
        url=chunk.url,
        source_id="1706.03762",
        source_date=chunk.source_date,
        authors=chunk.authors,
        snippet="Attention is all you need.",
    )
    final = FinalResponse(
        response_id="r1",
        query=query,
        answer="A transformer relies on attention [1].",
        sections=[
            AnswerSection(
                heading="Definition", claims=[Claim(text="It relies on attention.", citations=[1], confidence=0.8)]
            )
        ],
        citations=[citation],
        confidence=0.74,
        confidence_level="medium",
        generation_method="multi_perspective",
        answer_kind="extractive",
        contradictions=[contradiction],
        source_reports=reports,
        citation_stats=CitationStats(valid=1, removed=1, claims_removed=0, claims_flagged=1),
        caveats=["web search failed"],
        partial=True,
        reformulations=["transformer architecture"],
        created_at=WHEN,
        execution_time_ms=1234.5,
    )
    coverage = CoverageMetrics(
        query_addressed=0.8, coverage_of_topics={"attention": 1.0}, source_diversity=0.5, information_completeness=0.6
    )
    return [
        chunk,
        failure,
        *reports,
        aggregated,
        RetrieverInput(
            query_text="What is a transformer?",
            user_id="u1",
            session_id="s1",
            preferred_sources=["arxiv", "rag"],
            exclude_sources=["web"],
            quality_threshold=0.4,
            timeout_per_source=2.5,
            num_results=8,
            tool_options={"arxiv": {"sort_by": "date"}, "rag": {"filters": {"doc_id": "d1"}}},
        ),
        RetrieverOutput(
            aggregated_context=aggregated,
            retrieval_status="partial",
            sources_used=["arxiv", "rag"],
            sources_failed=["web"],
            error_message="web: http_error (Firecrawl answered 429)",
            execution_time_ms=815.0,
        ),
        preferences,
        query,
        EvaluatorInput(
            aggregated_context=aggregated,
            quality_threshold=0.5,
            user_preferences=preferences,
            source_reputation_weights={"arxiv": 0.9, "web": 0.4},
            recency_weight=0.1,
            relevance_weight=0.5,
            source_weight=0.4,
        ),
        scored,
        filtered,
        QualityStatistics(
            original_chunk_count=2,
            filtered_chunk_count=1,
            removal_rate=50.0,
            average_quality_score=0.77,
            quality_distribution={"0.6-0.8": 1, "0.2-0.4": 1},
        ),
        contradiction,
        RemovalReason(
            chunk_id="web-1",
            reason="duplicate",
            detail="repeats arxiv:1706.03762#0",
            quality_score=0.3,
            duplicate_of=chunk.chunk_id,
        ),
        EvaluatorOutput(
            filtered_context=filtered,
            quality_stats=QualityStatistics(
                original_chunk_count=2, filtered_chunk_count=1, removal_rate=50.0, average_quality_score=0.77
            ),
            contradictions_found=[contradiction],
            removal_rationale=[],
            execution_time_ms=3.2,
        ),
        SynthesizerInput(
            filtered_context=filtered,
            original_query=query,
            user_preferences=preferences,
            contradictions=[contradiction],
            max_response_length=500,
            min_response_length=20,
            include_sections=True,
            response_format="concise",
        ),
        citation,
        final,
        coverage,
        SynthesizerOutput(
            final_response=final, generation_method="standard", coverage_metrics=coverage, execution_time_ms=40.0
        ),
        MemoryInput(query=query, final_response=final, session_id="s1", user_id="u1", context={"channel": "cli"}),
        MemoryOutput(
            status="partial",
            entities_added=3,
            entities_updated=1,
            relationships_added=2,
            conversation_entry_added=True,
            preferences_updated=False,
            error_message="Zep unavailable",
            execution_time_ms=12.0,
        ),
    ]


# A minimal instance of any contract model, from its required fields alone: covers models added later -----------


def _value_for(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _value_for(args[0])
    if origin in (typing.Union, types.UnionType):
        return None if type(None) in args else _value_for(args[0])
    if origin is Literal:
        return args[0]
    if origin in (list, tuple, set, frozenset):
        return []
    if origin is dict:
        return {}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return minimal(annotation)
    # "rag" satisfies every string constraint in the contracts (source-type pattern, identifiers, min lengths).
    simple: dict[Any, Any] = {str: "rag", float: 0.5, int: 1, bool: True, datetime: WHEN}
    if annotation in simple:
        return simple[annotation]
    raise NotImplementedError(f"no minimal value for {annotation!r}; add a rich sample for this model")


def minimal(model: type[BaseModel]) -> BaseModel:
    return model.model_validate(
        {name: _value_for(field.annotation) for name, field in model.model_fields.items() if field.is_required()}
    )


def exported_models() -> list[type[Contract]]:
    exported = (getattr(contracts, name) for name in contracts.__all__)
    return [obj for obj in exported if isinstance(obj, type) and issubclass(obj, Contract)]


def test_the_rich_samples_cover_every_model_named_by_the_seed() -> None:
    covered = {type(sample) for sample in rich_samples()}
    named = {
        AggregatedContext,
        ContextChunk,
        RetrieverInput,
        RetrieverOutput,
        EvaluatorInput,
        EvaluatorOutput,
        FilteredContext,
        QualityStatistics,
        ContradictionRecord,
        RemovalReason,
        SynthesizerInput,
        SynthesizerOutput,
        FinalResponse,
        CoverageMetrics,
        MemoryInput,
        MemoryOutput,
        Query,
        UserPreferences,
    }
    assert named <= covered


@pytest.mark.parametrize("sample", rich_samples(), ids=lambda sample: type(sample).__name__)
def test_rich_samples_round_trip_through_json(sample: Contract) -> None:
    model = type(sample)
    assert model.model_validate_json(sample.model_dump_json()) == sample
    assert model.model_validate(sample.model_dump(mode="json")) == sample


@pytest.mark.parametrize("model", exported_models(), ids=lambda model: model.__name__)
def test_every_exported_model_round_trips_and_documents_its_fields(model: type[Contract]) -> None:
    instance = minimal(model)
    assert model.model_validate_json(instance.model_dump_json()) == instance
    undocumented = [name for name, field in model.model_fields.items() if not field.description]
    assert undocumented == [], f"{model.__name__} fields without a description: {undocumented}"


@pytest.mark.parametrize("model", exported_models(), ids=lambda model: model.__name__)
def test_every_exported_model_rejects_unknown_fields(model: type[Contract]) -> None:
    data = minimal(model).model_dump(mode="json")
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        model.model_validate({**data, "surprise_field": 1})


def test_source_report_exposes_the_failure_kind_and_message_in_json() -> None:
    report = SourceReport(
        source_type="web",
        tool_name="web_search",
        status="failed",
        failure=SourceFailure(kind="timeout", message="no answer within 7 s"),
    )
    dumped = report.model_dump(mode="json")
    assert (dumped["error_kind"], dumped["error_message"]) == ("timeout", "no answer within 7 s")
    assert SourceReport.model_validate(dumped) == report


def test_aggregated_context_lookups() -> None:
    aggregated = next(s for s in rich_samples() if isinstance(s, AggregatedContext))
    assert [c.chunk_id for c in aggregated.chunks_from("web")] == ["web-1"]
    web = aggregated.report_for("web")
    assert web is not None
    assert web.error_kind == "http_error"
    assert aggregated.report_for("nothing") is None


# RetrieverInput bounds (property tests) ----------------------------------------------------------------------

SOURCE_TYPES = st.sampled_from(["rag", "web", "arxiv", "memory", "custom_db"])


def retriever_input(**fields: Any) -> RetrieverInput:
    return RetrieverInput(**{"query_text": "q", "user_id": "u", "session_id": "s", **fields})


@given(st.text(max_size=MAX_QUERY_CHARS + 50))
def test_query_text_accepted_iff_not_blank_and_within_the_maximum(text: str) -> None:
    acceptable = 1 <= len(text) <= MAX_QUERY_CHARS and text.strip() != ""
    try:
        request = retriever_input(query_text=text)
    except ValidationError:
        assert not acceptable
    else:
        assert acceptable
        assert request.query_text == text.strip()


def test_oversized_and_blank_queries_are_rejected() -> None:
    with pytest.raises(ValidationError, match="at most 4000 characters"):
        retriever_input(query_text="x" * (MAX_QUERY_CHARS + 1))
    for blank in ("", "   ", "\n\t"):
        with pytest.raises(ValidationError):
            retriever_input(query_text=blank)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_quality_threshold_accepted_iff_in_unit_interval(value: float) -> None:
    try:
        retriever_input(quality_threshold=value)
    except ValidationError:
        assert not 0.0 <= value <= 1.0
    else:
        assert 0.0 <= value <= 1.0


@given(st.floats(min_value=-10, max_value=700, allow_nan=False))
def test_timeout_per_source_must_be_positive_and_bounded(value: float) -> None:
    try:
        retriever_input(timeout_per_source=value)
    except ValidationError:
        assert not 0 < value <= 600
    else:
        assert 0 < value <= 600


@given(st.lists(SOURCE_TYPES, max_size=4), st.lists(SOURCE_TYPES, max_size=4))
def test_preferred_and_excluded_sources_must_be_disjoint(preferred: list[str], excluded: list[str]) -> None:
    try:
        retriever_input(preferred_sources=preferred, exclude_sources=excluded)
    except ValidationError as error:
        assert set(preferred) & set(excluded)
        assert "both preferred and excluded" in str(error)
    else:
        assert not set(preferred) & set(excluded)


@given(st.text(min_size=1, max_size=12).filter(lambda key: key not in RetrieverInput.model_fields))
def test_unknown_input_fields_are_rejected(key: str) -> None:
    with pytest.raises(ValidationError):
        RetrieverInput.model_validate({"query_text": "q", "user_id": "u", "session_id": "s", key: True})


def test_source_types_are_normalised_and_validated() -> None:
    assert retriever_input(preferred_sources=[" arxiv "]).preferred_sources == ["arxiv"]
    for bad in ("Web", "two words", "", "9lives"):
        with pytest.raises(ValidationError):
            retriever_input(exclude_sources=[bad])


def test_seed_defaults() -> None:
    request = retriever_input()
    assert (request.preferred_sources, request.exclude_sources) == (None, None)
    assert request.quality_threshold == 0.6
    # The seed's 7 s per source and 5 results are the settings' defaults; a request leaves them unset (None) so
    # that Settings -> assemble stays the only place a default lives.
    assert (request.timeout_per_source, request.num_results) == (None, None)
    settings = Settings()
    assert (settings.retrieval.timeout_per_source_s, settings.retrieval.num_results) == (7.0, 5)
    assert settings.firecrawl.timeout_s == settings.arxiv.timeout_s == 7.0


# ContextChunk bounds (property tests) ------------------------------------------------------------------------


def chunk(**fields: Any) -> ContextChunk:
    return ContextChunk(
        **{"chunk_id": "c1", "source_type": "rag", "content": "text", "semantic_relevance": 0.5, **fields}
    )


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_semantic_relevance_accepted_iff_in_unit_interval(value: float) -> None:
    try:
        chunk(semantic_relevance=value)
    except ValidationError:
        assert not 0.0 <= value <= 1.0
    else:
        assert 0.0 <= value <= 1.0


@given(st.text(max_size=60))
def test_chunk_content_must_not_be_blank(text: str) -> None:
    try:
        chunk(content=text)
    except ValidationError:
        assert text.strip() == ""
    else:
        assert text.strip() != ""


@given(st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2100, 1, 1)))
def test_naive_source_dates_are_taken_as_utc(naive: datetime) -> None:
    value = chunk(source_date=naive).source_date
    assert value is not None
    assert value.tzinfo is UTC
    assert value.replace(tzinfo=None) == naive


@given(
    st.datetimes(min_value=datetime(1900, 1, 2), max_value=datetime(2100, 1, 1)),
    st.integers(min_value=-12 * 60, max_value=14 * 60),
)
def test_aware_source_dates_are_kept(moment: datetime, offset_minutes: int) -> None:
    aware = moment.replace(tzinfo=timezone(timedelta(minutes=offset_minutes)))
    kept = chunk(source_date=aware)
    assert kept.source_date == aware
    assert ContextChunk.model_validate_json(kept.model_dump_json()).source_date == aware


def test_chunk_rejects_bad_source_types_ids_and_unknown_fields() -> None:
    for bad in (
        {"source_type": "Web"},
        {"source_type": ""},
        {"chunk_id": "  "},
        {"chunk_id": "x" * 257},
        {"content": "x" * 200_001},
        {"relevance": 0.3},
    ):
        with pytest.raises(ValidationError):
            chunk(**bad)


def test_assignments_are_validated() -> None:
    value = chunk()
    with pytest.raises(ValidationError):
        value.semantic_relevance = 1.5
