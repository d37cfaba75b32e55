"""The search pipeline of the knowledge base.

For one query:

1. **Date hints** (seed 000). Unless the caller already filters by date, the query's wording is read for a
   period ("in 2021", "since 2019", "last year", "recent"; ``filters.parse_date_hint``).
2. **Candidates.** Milvus returns the ``candidate_pool`` best chunks by dense cosine and the same number by BM25
   (both under the caller's filters). The pool's union is scored on both sides: chunks the other side did not
   return get their dense cosine from their stored vectors and their BM25 score from a BM25 search restricted
   to them, so fusion sees every candidate's full evidence (see ``fusion``).
3. **Fusion and calibration** (``fusion``): one fused score per chunk, mapped to a relevance in [0, 1]. A chunk
   holding a rare name or identifier of the query word for word (``exact``) is exempt from the query-level gate
   that scales relevance down when no chunk is close in meaning.
4. **Two-pass merge** when there is a date hint: the same retrieval runs again with the period as a filter and
   both candidate sets are merged. The filtered pass guarantees that in-period evidence is considered even if it
   would not make the unfiltered pool; out-of-period evidence stays, so a hint never hides the best match. Both
   passes are normalised on the unfiltered pool's scale so their scores compare.
5. **Rerank** (optional, ``rerank``) of the top candidates with a cross-encoder.
6. **Recency** (seed 001): a small boost ``recency_boost × 0.5^(age / 2 years)`` is added to the normalised
   ranking score (the fused score, in [0, 1]); undated chunks get none. It re-orders near-ties; it does not change
   ``relevance``, so it never lifts a weak hit over ``min_relevance``.
7. Hits below ``min_relevance`` are dropped; the best ``top_k`` are returned, best first.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from researchcrew.contracts._base import Contract
from researchcrew.knowledge import _exact as exact
from researchcrew.knowledge import _fusion as fusion
from researchcrew.knowledge import _schema as schema
from researchcrew.knowledge._analysis import default_analyzer
from researchcrew.knowledge._rerank import Reranker
from researchcrew.knowledge.filters import DateHint, SearchFilters, parse_date_hint

if TYPE_CHECKING:
    from researchcrew.embedding.embedder import Embedder
    from researchcrew.knowledge._store import CollectionStore
    from researchcrew.settings import RetrievalSettings

logger = logging.getLogger(__name__)

RECENCY_HALF_LIFE_DAYS = 730.0


class HitScores(Contract):
    """The raw and derived scores behind a hit, for diagnostics."""

    dense: float | None = Field(default=None, description="Cosine similarity of the query and chunk embeddings.")
    bm25: float | None = Field(default=None, description="BM25 score of the chunk for the analysed query.")
    fused: float = Field(default=0.0, description="The fused score before calibration.")
    rerank: float | None = Field(default=None, description="Cross-encoder probability, when reranking ran.")
    recency: float = Field(default=0.0, description="Recency boost added to the ranking score.")
    final: float = Field(
        default=0.0, description="The ranking score: fused (or reranked) score plus recency and date-hint boosts."
    )


class SearchHit(Contract):
    """One chunk found for a query, with its citation fields and calibrated relevance."""

    chunk_id: str = Field(description="`<doc_id>:<position>`.")
    doc_id: str = Field(description="The document the chunk belongs to.")
    text: str = Field(description="The chunk text.")
    title: str | None = Field(default=None, description="Document title.")
    url: str | None = Field(default=None, description="Document link.")
    source_date: datetime | None = Field(default=None, description="Document date.")
    heading: str | None = Field(default=None, description="Section heading the chunk sits under.")
    position: int = Field(default=0, ge=0, description="Index of the chunk within its document.")
    chunk_count: int = Field(default=1, ge=1, description="Chunks in the document.")
    source_key: str = Field(description="Where the document lives (path or key).")
    source: str = Field(default="", description="The source the document came from (file, folder, corpus).")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Document metadata (authors, ...).")
    collection: str = Field(default=schema.SHARED, description="The document collection the chunk belongs to.")
    relevance: float = Field(ge=0.0, le=1.0, description="Calibrated relevance in [0, 1] (see `fusion`).")
    scores: HitScores = Field(default_factory=HitScores, description="Raw scores for diagnostics.")
    date_hint_match: bool | None = Field(
        default=None, description="With a date hint: whether the chunk lies in the period. None without one."
    )
    exact_terms: list[str] = Field(
        default_factory=list, description="Rare names or identifiers of the query the chunk holds word for word."
    )


class Searcher:
    """Runs the pipeline above against one collection."""

    def __init__(
        self,
        store: CollectionStore,
        embedder: Callable[[], Embedder],
        settings: RetrievalSettings,
        *,
        reranker: Reranker | None = None,
        today: Callable[[], datetime] | None = None,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self.settings = settings
        self._reranker = reranker
        self._today = today or (lambda: datetime.now(UTC))

    @property
    def reranker(self) -> Reranker:
        if self._reranker is None:
            self._reranker = Reranker(self.settings.rerank.model)
        return self._reranker

    def search(
        self,
        query: str,
        *,
        top_k: int = 5,
        min_relevance: float = 0.0,
        filters: SearchFilters | None = None,
        mode: Literal["hybrid", "dense", "bm25"] = "hybrid",
        rerank: bool | None = None,
    ) -> list[SearchHit]:
        text = " ".join(query.split())
        if not text:
            raise ValueError("the query is empty")
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {top_k}")
        if not 0.0 <= min_relevance <= 1.0:
            raise ValueError(f"min_relevance must be in [0, 1], got {min_relevance}")
        base = self._scoped(filters or SearchFilters())
        if base is None:
            return []
        hint = None if base.has_dates else parse_date_hint(text, today=self._today().date())
        request = fusion.Request(
            vector=self._embedder().embed_query(text).tolist() if mode != "bm25" else None,
            analysed=default_analyzer().analyze(text) if mode != "dense" else "",
            pool=max(self.settings.candidate_pool, top_k),
            mode=mode,
        )
        candidates = self._candidates(request, base.expression())
        scale = fusion.Scale.of(candidates.values(), depth=self.settings.candidate_pool)
        if hint is not None:
            candidates = self._merge_hinted(request, base, hint, candidates)
        if mode != "dense":
            _mark_exact(text, candidates)
        scored = fusion.fuse(list(candidates.values()), scale, self.settings, mode=mode)
        if rerank if rerank is not None else self.settings.rerank.enabled:
            scored = self._rerank(text, scored)
        now = self._today()
        ranked: list[_Ranked] = []
        seen: set[str] = set()
        for item in scored:
            if item.relevance < min_relevance:
                continue
            chunk_id = str(item.candidate.row.get(schema.CHUNK_ID, ""))
            if chunk_id in seen:  # the same content under two source keys: show it once
                continue
            seen.add(chunk_id)
            ranked.append(_ranked(item, hint, now, self.settings.recency_boost))
        ranked.sort(key=lambda entry: entry.final, reverse=True)
        return [_to_hit(entry) for entry in ranked[:top_k]]  # only the hits returned are built (issue 20 item 7)

    # Steps -----------------------------------------------------------------------------------------------------
    def _scoped(self, filters: SearchFilters) -> SearchFilters | None:
        """The filters as this collection can apply them; None when they match nothing. A schema-1 knowledge base
        has no collection field and every chunk of it is shared: a search allowed ``shared`` needs no collection
        clause, and one that is not allowed it matches nothing (decided here, no row is read)."""
        if filters.collections is None or self._store.has_collections:
            return filters
        if schema.SHARED in filters.collections:
            return filters.model_copy(update={"collections": None})
        return None

    def _candidates(self, request: fusion.Request, expression: str) -> dict[str, fusion.Candidate]:
        candidates: dict[str, fusion.Candidate] = {}
        # Whether the dense side returned every chunk the filter allows (fewer rows than it was asked for, from an
        # exact index: Milvus Lite's FLAT). Then the BM25 side only scores chunks already here and need not bring
        # their fields and vectors again: decoding them was half of a search's time on a small knowledge base.
        dense_complete = False
        if request.vector is not None:
            rows = self._store.search_dense(request.vector, request.pool, expression)
            dense_complete = self._store.lite and len(rows) < request.pool
            for rank, row in enumerate(rows):
                candidate = _candidate(candidates, row)
                candidate.dense, candidate.dense_rank = float(row["distance"]), rank
        every_match = False  # whether the BM25 side returned every chunk holding a query term
        if request.analysed:
            # In hybrid mode the BM25 side brings its rows' vectors too: the cosine of a chunk the dense side did not
            # return is computed here instead of in another call to fetch them (issue 20 item 7: fewer round trips).
            hybrid = request.mode == "hybrid" and request.vector is not None
            if dense_complete:
                fields = [schema.PK]
            else:
                fields = [*schema.OUTPUT_FIELDS, schema.DENSE] if hybrid else schema.OUTPUT_FIELDS
            rows = self._store.search_bm25(request.analysed, request.pool, expression, fields=fields)
            every_match = len(rows) < request.pool
            if dense_complete:
                rows = self._with_fields(rows, candidates)
            query = fusion.unit(request.vector) if hybrid and request.vector is not None else None
            for rank, row in enumerate(rows):
                candidate = _candidate(candidates, row)
                # Milvus Lite reports BM25 as a negative distance, a server as a positive score; BM25 is >= 0.
                candidate.bm25, candidate.bm25_rank = abs(float(row["distance"])), rank
                if query is not None and candidate.dense is None and row.get(schema.DENSE) is not None:
                    candidate.dense = fusion.cosine(query, row[schema.DENSE])
        if request.mode == "hybrid":
            self._complete(request, candidates, bm25_complete=every_match)
        return candidates

    def _with_fields(self, rows: list[dict[str, Any]], candidates: dict[str, fusion.Candidate]) -> list[dict[str, Any]]:
        """BM25 rows asked for their keys only, each completed with its fields and vector when the dense side did
        not return it after all (a chunk written between the two calls): one fetch, and only then."""
        missing = [str(row[schema.PK]) for row in rows if str(row[schema.PK]) not in candidates]
        if not missing:
            return rows
        fields = [schema.PK, *schema.OUTPUT_FIELDS, schema.DENSE]
        if self._store.has_collections:
            fields.append(schema.COLLECTION)
        fetched = {str(row[schema.PK]): row for row in self._store.fetch(missing, fields)}
        completed: list[dict[str, Any]] = []
        for row in rows:
            pk = str(row[schema.PK])
            if pk in candidates:
                completed.append(row)
            elif pk in fetched:  # removed since: left out
                completed.append({**fetched[pk], "distance": row["distance"]})
        return completed

    def _complete(
        self, request: fusion.Request, candidates: dict[str, fusion.Candidate], *, bm25_complete: bool = False
    ) -> None:
        """Score every candidate on both sides (a side's miss is a low score, not an unknown one). When the BM25
        side returned fewer rows than it was asked for, it returned every chunk holding a query term, and the
        others score 0 without asking Milvus again."""
        assert request.vector is not None  # noqa: S101 - hybrid mode always embeds the query
        no_dense = [pk for pk, candidate in candidates.items() if candidate.dense is None]
        if no_dense:
            query = fusion.unit(request.vector)
            for row in self._store.fetch(no_dense, [schema.PK, schema.DENSE]):
                candidates[row[schema.PK]].dense = fusion.cosine(query, row[schema.DENSE])
        no_bm25 = [pk for pk, candidate in candidates.items() if candidate.bm25 is None]
        if no_bm25 and request.analysed and not bm25_complete:
            restrict = f"{schema.PK} in [{', '.join(schema.quote(pk) for pk in no_bm25)}]"
            # Scores only: these candidates' fields came with the dense side (a fifth of the call's time here).
            for row in self._store.search_bm25(request.analysed, len(no_bm25), restrict, fields=[schema.PK]):
                candidates[str(row[schema.PK])].bm25 = abs(float(row["distance"]))
        for candidate in candidates.values():
            if candidate.bm25 is None:
                candidate.bm25 = 0.0  # no query term in the chunk
            if candidate.dense is None:
                candidate.dense = 0.0  # cannot happen for stored rows; keeps fusion total

    def _merge_hinted(
        self,
        request: fusion.Request,
        base: SearchFilters,
        hint: DateHint,
        unfiltered: dict[str, fusion.Candidate],
    ) -> dict[str, fusion.Candidate]:
        in_period = self._candidates(request, base.merged(hint.as_filters()).expression())
        logger.debug("date hint %r: %d in-period candidates", hint.phrase, len(in_period))
        merged = dict(unfiltered)
        for pk, candidate in in_period.items():
            merged.setdefault(pk, candidate)
        low, high = hint.as_filters().epoch_range()
        for pk, candidate in merged.items():
            date = int(candidate.row.get(schema.DATE, schema.NO_DATE))
            candidate.in_period = pk in in_period or (
                date != schema.NO_DATE and (low is None or date >= low) and (high is None or date <= high)
            )
        return merged

    def _rerank(self, query: str, scored: list[fusion.Scored]) -> list[fusion.Scored]:
        limit = self.settings.rerank.candidates
        head, tail = scored[:limit], scored[limit:]
        probabilities = self.reranker.scores(query, [item.candidate.row.get(schema.TEXT, "") for item in head])
        if probabilities is None:
            return scored
        for item, probability in zip(head, probabilities, strict=True):
            item.rerank = probability
            item.relevance = 0.5 * (item.relevance + probability)
            item.rerank_order = item.relevance + 1.0  # reranked candidates stay ahead of the un-reranked tail
        head.sort(key=lambda item: item.relevance, reverse=True)
        return head + tail


def _candidate(candidates: dict[str, fusion.Candidate], row: dict[str, Any]) -> fusion.Candidate:
    """The candidate of ``row``, made from it the first time its key is seen (a row's fields are decoded once)."""
    pk = str(row[schema.PK])
    candidate = candidates.get(pk)
    if candidate is None:
        candidate = candidates[pk] = fusion.Candidate.from_row(row)
    return candidate


def _mark_exact(query: str, candidates: dict[str, fusion.Candidate]) -> None:
    """Flag the candidates that hold a rare exact term of the query (a name or identifier, ``exact``)."""
    rows = (
        (pk, str(c.row.get(schema.DOC_ID) or pk), str(c.row.get(schema.TITLE) or ""), str(c.row.get(schema.TEXT) or ""))
        for pk, c in candidates.items()
    )
    for pk, terms in exact.rare_exact_matches(query, rows).items():
        candidates[pk].exact_terms = tuple(sorted(terms))


def recency_boost(date: datetime | None, now: datetime, weight: float) -> float:
    """``weight × 0.5^(age / half-life)``: full weight for today, half after two years; none when undated."""
    if date is None or weight <= 0:
        return 0.0
    age_days = max(0.0, (now - date).total_seconds() / 86_400)
    return weight * math.pow(0.5, age_days / RECENCY_HALF_LIFE_DAYS)


@dataclass(frozen=True)
class _Ranked:
    """A candidate with its ranking score, before it is built into a ``SearchHit``."""

    item: fusion.Scored
    source_date: datetime | None
    boost: float
    in_period: bool | None
    final: float


def _ranked(item: fusion.Scored, hint: DateHint | None, now: datetime, weight: float) -> _Ranked:
    source_date = schema.from_epoch(item.candidate.row.get(schema.DATE))
    boost = recency_boost(source_date, now, weight)
    in_period = item.candidate.in_period if hint is not None else None
    # Within a hinted search, in-period evidence ranks ahead of equally relevant evidence from elsewhere.
    hint_bonus = fusion.DATE_HINT_BONUS if in_period else 0.0
    final = (item.rerank_order if item.rerank is not None else item.fused) + boost + hint_bonus
    return _Ranked(item, source_date, boost, in_period, final)


def _to_hit(ranked: _Ranked) -> SearchHit:
    item, source_date, boost, in_period = ranked.item, ranked.source_date, ranked.boost, ranked.in_period
    row = item.candidate.row
    return SearchHit(
        chunk_id=str(row.get(schema.CHUNK_ID, "")),
        doc_id=str(row.get(schema.DOC_ID, "")),
        text=str(row.get(schema.TEXT, "")),
        title=row.get(schema.TITLE) or None,
        url=row.get(schema.URL) or None,
        source_date=source_date,
        heading=row.get(schema.HEADING) or None,
        position=int(row.get(schema.POSITION, 0)),
        chunk_count=max(1, int(row.get(schema.CHUNK_COUNT, 1))),
        source_key=str(row.get(schema.SOURCE_KEY, "")),
        source=str(row.get(schema.SOURCE, "")),
        metadata=dict(row.get(schema.METADATA) or {}),
        collection=str(row.get(schema.COLLECTION) or schema.SHARED),
        relevance=item.relevance,
        scores=HitScores(
            dense=item.candidate.dense,
            bm25=item.candidate.bm25,
            fused=item.fused,
            rerank=item.rerank,
            recency=boost,
            final=ranked.final,
        ),
        date_hint_match=in_period,
        exact_terms=list(item.candidate.exact_terms),
    )
