"""Following references (seed 002 phase 3, steps C and D): resolve what the evidence cites, keep what is relevant.

Resolution, by kind:

* arXiv ids — one id-list request to the arXiv tool for all ids found at one depth (arXiv asks for one request
  every three seconds; a batch costs one);
* named documents — the knowledge base is the registry: a search for the title finds the document whose title
  matches, then a *scoped* search (``filters={"doc_ids": [...]}``) reads its passages most relevant to the
  sub-question;
* DOIs — a knowledge-base document carrying that DOI in its metadata, or quoting it (nothing is fetched online);
* numbered citations — the entry of the reference list (from the passage itself, or from a scoped search of its
  document for the list), then whatever that entry carries: an arXiv id, a DOI, or a title;
* sections — a scoped search of the citing passage's own document, preferring passages under that heading.

Each resolved passage is scored against the sub-question — the share of the sub-question's content terms it
contains, or, for passages a scoped search found for the sub-question, the knowledge base's calibrated relevance
when that is higher — and kept only at or above the threshold. Following stops at the depth limit, skips what this
sub-question already visited, and stops when the sub-question's token budget (resolved text, 4 characters a token)
or look-up limit is spent, when the same document keeps coming back or a round (one depth) adds no new source, only
more passages of documents the evidence already had (the convergence rules), or when time is up.
Every reference found gets a ``FollowedReference`` saying what happened and why.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from researchcrew.contracts.chunks import ContextChunk
from researchcrew.contracts.deep import FollowedReference, ReferenceOutcome
from researchcrew.contracts.retriever import RetrieverInput, RetrieverOutput
from researchcrew.deep._references import (
    DetectedReference,
    detect_references,
    entry_target,
    normal_title,
    parse_entries,
    split_reference_list,
    strip_version,
)
from researchcrew.text.terms import term_set

if TYPE_CHECKING:
    from researchcrew.pipeline.stages import RetrieverLike
    from researchcrew.settings import DeepResearchSettings
    from researchcrew.tools.base import Tool

logger = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
TITLE_MATCH = 0.75
PASSAGES_PER_DOCUMENT = 3  # passages a scoped search reads of a document a title or DOI names


@dataclass(frozen=True)
class Resolution:
    """What a reference resolved to: passages, or why none; ``scoped`` when a search for the sub-question within
    the document found them (their relevance is a real score for the sub-question)."""

    chunks: tuple[ContextChunk, ...]
    reason: str
    scoped: bool = False


def relevance_to(sub_question: str, chunk: ContextChunk, *, scoped: bool) -> float:
    """How well a resolved passage fits the sub-question, in [0, 1]."""
    topics = term_set(sub_question)
    if not topics:
        return chunk.semantic_relevance if scoped else 0.0
    lexical = len(topics & term_set(f"{chunk.title or ''} {chunk.content}")) / len(topics)
    return round(max(lexical, chunk.semantic_relevance) if scoped else lexical, 4)


def source_of(chunk: ContextChunk) -> str:
    """The document a passage belongs to (its source id, else its URL, else itself)."""
    return chunk.source_id or chunk.url or chunk.chunk_id


def title_matches(candidate: str | None, wanted: str) -> bool:
    """A knowledge-base title matches a cited title (or a reference-list entry that contains one)."""
    if not candidate:
        return False
    have, want = normal_title(candidate), normal_title(wanted)
    if len(have) < 8 or not want:
        return False
    if have in want or want in have:
        return True
    return difflib.SequenceMatcher(None, have, want).ratio() >= TITLE_MATCH


class ReferenceFollower:
    """Follows the references of each sub-question's evidence for one deep run."""

    def __init__(
        self,
        *,
        arxiv: Tool | None,
        knowledge: Tool | None,
        settings: DeepResearchSettings,
        on_record: Callable[[FollowedReference], None] | None = None,
        user_id: str | None = None,
    ) -> None:
        self.arxiv = arxiv
        self.knowledge = knowledge
        self.user_id = user_id  # knowledge-base look-ups read only what this user may read (None: `shared` only)
        self.settings = settings
        self.records: list[FollowedReference] = []
        self._on_record = on_record
        self._cache: dict[str, Resolution] = {}
        self._visited: dict[int, set[str]] = {}
        self._looked_up: Counter[int] = Counter()
        self._tokens: Counter[int] = Counter()
        self._documents: dict[int, Counter[str]] = {}
        self._converged: dict[int, str] = {}
        self._stale: dict[int, int] = {}  # sub-question → the depth whose round added no new source

    def records_of(self, index: int) -> list[FollowedReference]:
        return [record for record in self.records if record.sub_question == index]

    # ---- the loop ------------------------------------------------------------------------------------------------
    async def follow(
        self, index: int, sub_question: str, chunks: Sequence[ContextChunk], *, time_limit_s: float
    ) -> list[ContextChunk]:
        """Follow the references in ``chunks`` for sub-question ``index``; the passages kept, ready to join its
        evidence (relevance set to their score, the reference in ``metadata["followed_reference"]``)."""
        deadline = time.monotonic() + max(0.0, time_limit_s)
        known = {chunk.chunk_id for chunk in chunks}
        sources = {source_of(chunk) for chunk in chunks}
        kept: list[ContextChunk] = []
        frontier = [(reference, 1) for chunk in chunks for reference in detect_references(chunk)]
        while frontier:
            todo: list[tuple[DetectedReference, int]] = []
            for reference, depth in frontier:
                limit = self._limit(index, reference, depth, deadline)
                if limit == "visited":
                    continue
                if limit is not None:
                    self._record(index, reference, depth, "skipped", limit)
                    continue
                self._visited.setdefault(index, set()).add(reference.key)
                self._looked_up[index] += 1
                todo.append((reference, depth))
            frontier = []
            if not todo:
                break
            resolutions = await self._resolve_all([reference for reference, _ in todo], sub_question, deadline)
            added: list[ContextChunk] = []
            for (reference, depth), resolution in zip(todo, resolutions, strict=True):
                if index in self._converged:  # an earlier reference of this depth made the document come back
                    self._record(index, reference, depth, "skipped", self._convergence(index))
                    continue
                found = self._judge(index, sub_question, reference, depth, resolution, known)
                for chunk in found:
                    known.add(chunk.chunk_id)
                    kept.append(chunk)
                    added.append(chunk)
                    frontier += [(inner, depth + 1) for inner in detect_references(chunk)]
            new_sources = {source_of(chunk) for chunk in added} - sources
            if added and not new_sources and index not in self._stale:
                # The round only brought more passages of documents the evidence already had: nothing new to read
                # further from (the convergence rule's second half), so what they cite is not followed.
                self._stale[index] = todo[0][1]
            sources |= new_sources
        return kept

    def _limit(self, index: int, reference: DetectedReference, depth: int, deadline: float) -> str | None:
        """Why this reference is not looked up now ("visited" means silently), or None."""
        if reference.key in self._visited.get(index, set()):
            return "visited"
        # The depth limit first: it holds whatever earlier rounds brought, so a reference beyond it is skipped for
        # it, and "convergence" names only what stopped following *before* the limit would have.
        if depth > self.settings.follow_depth:
            return f"depth limit ({self.settings.follow_depth}) reached"
        if index in self._converged:
            return self._convergence(index)
        if index in self._stale:
            return f"convergence: depth {self._stale[index]} added no new source, only documents already read"
        if self._looked_up[index] >= self.settings.max_references:
            return f"look-up limit ({self.settings.max_references} per sub-question) reached"
        if self._tokens[index] >= self.settings.reference_token_budget:
            return f"reference token budget ({self.settings.reference_token_budget} per sub-question) spent"
        if time.monotonic() >= deadline:
            return "no time left for following references"
        return None

    def _convergence(self, index: int) -> str:
        return f"convergence: “{self._converged[index]}” came back {self.settings.convergence_repeats} times"

    def _judge(
        self,
        index: int,
        sub_question: str,
        reference: DetectedReference,
        depth: int,
        resolution: Resolution,
        known: set[str],
    ) -> list[ContextChunk]:
        """Score what a reference resolved to, record the outcome, and return the passages kept."""
        if not resolution.chunks:
            self._record(index, reference, depth, "unresolved", resolution.reason)
            return []
        documents = self._documents.setdefault(index, Counter())
        for chunk in resolution.chunks:
            self._tokens[index] += len(chunk.content) // CHARS_PER_TOKEN
        # A document "comes back" once per reference that resolves to it, however many of its passages the scoped
        # search read (three passages of one document are one return, not three).
        for key, chunk in {source_of(chunk): chunk for chunk in reversed(resolution.chunks)}.items():
            documents[key] += 1
            if documents[key] >= self.settings.convergence_repeats and index not in self._converged:
                self._converged[index] = chunk.title or key
        scored = [(relevance_to(sub_question, chunk, scoped=resolution.scoped), chunk) for chunk in resolution.chunks]
        scored.sort(key=lambda pair: pair[0], reverse=True)
        best = scored[0][0]
        threshold = self.settings.reference_threshold
        ids = [chunk.chunk_id for _, chunk in scored]
        fresh = [(score, chunk) for score, chunk in scored if score >= threshold and chunk.chunk_id not in known]
        if not fresh:
            if best >= threshold:
                self._record(index, reference, depth, "skipped", "already in the evidence", best, ids)
            else:
                reason = f"relevance {best:.2f} to the sub-question is below the threshold {threshold:.2f}"
                self._record(index, reference, depth, "rejected", f"{resolution.reason}; {reason}", best, ids)
            return []
        kept = [
            chunk.model_copy(
                update={
                    "semantic_relevance": score,
                    "metadata": {
                        **chunk.metadata,
                        "followed_reference": {
                            "kind": reference.kind,
                            "target": reference.target,
                            "found_in": reference.found_in,
                            "depth": depth,
                        },
                    },
                }
            )
            for score, chunk in fresh
        ]
        reason = f"{resolution.reason}; relevance {fresh[0][0]:.2f} ≥ {threshold:.2f}"
        self._record(index, reference, depth, "kept", reason, fresh[0][0], [chunk.chunk_id for chunk in kept])
        return kept

    def _record(
        self,
        index: int,
        reference: DetectedReference,
        depth: int,
        outcome: ReferenceOutcome,
        reason: str,
        score: float | None = None,
        resolved: list[str] | None = None,
    ) -> None:
        record = FollowedReference(
            sub_question=index,
            kind=reference.kind,
            target=(reference.entry or reference.target)[:1000],
            text=reference.text[:1000],
            found_in=reference.found_in,
            depth=min(depth, 5),
            outcome=outcome,
            reason=reason[:1000],
            score=None if score is None else min(1.0, max(0.0, score)),
            resolved=resolved or [],
        )
        self.records.append(record)
        if self._on_record is not None:
            try:
                self._on_record(record)
            except Exception:  # a caller's callback must never break the run
                logger.exception("reference progress callback failed")

    # ---- resolution ------------------------------------------------------------------------------------------
    async def _resolve_all(
        self, references: list[DetectedReference], sub_question: str, deadline: float
    ) -> list[Resolution]:
        """Resolve one depth's references together (arXiv ids in one request), within the time left."""
        remaining = deadline - time.monotonic()
        results: dict[int, Resolution] = {}
        arxiv_ids = {position: self._arxiv_id(ref) for position, ref in enumerate(references)}
        wanted = sorted({arxiv_id for arxiv_id in arxiv_ids.values() if arxiv_id is not None})

        async def resolve_arxiv() -> None:
            found = await self._arxiv_batch(wanted, remaining)
            for position, arxiv_id in arxiv_ids.items():
                if arxiv_id is not None:
                    results[position] = found[arxiv_id]

        async def resolve_one(position: int, reference: DetectedReference) -> None:
            results[position] = await self._resolve(reference, sub_question, remaining)

        jobs = [resolve_one(position, ref) for position, ref in enumerate(references) if arxiv_ids[position] is None]
        if wanted:
            jobs.append(resolve_arxiv())
        try:
            async with asyncio.timeout(max(0.01, remaining)):
                await asyncio.gather(*jobs)
        except TimeoutError:
            logger.info("reference following ran out of time with %d of %d resolved", len(results), len(references))
        timed_out = Resolution((), "no answer within the time left")
        return [results.get(position, timed_out) for position in range(len(references))]

    def _arxiv_id(self, reference: DetectedReference) -> str | None:
        """The arXiv id a reference asks for, as written (with its version, if it names one)."""
        if reference.kind == "arxiv":
            return reference.target
        if reference.kind == "numbered" and reference.entry:
            inner = entry_target(reference.entry)
            if inner is not None and inner[0] == "arxiv":
                return inner[1]
        return None

    async def _arxiv_batch(self, ids: list[str], timeout_s: float) -> dict[str, Resolution]:
        """Resolve arXiv ids, the ones not resolved yet in one id-list request."""
        missing = [arxiv_id for arxiv_id in ids if f"arxiv:{arxiv_id}" not in self._cache]
        if missing and self.arxiv is None:
            for arxiv_id in missing:
                self._cache[f"arxiv:{arxiv_id}"] = Resolution((), "no arXiv source to look the id up in")
        elif missing and self.arxiv is not None:
            result = await self.arxiv.search(" ".join(missing), num_results=min(100, len(missing)), timeout=timeout_s)
            by_id = {strip_version(chunk.source_id or ""): chunk for chunk in result.chunks}
            for arxiv_id in missing:
                found = by_id.get(strip_version(arxiv_id))
                if result.failure is not None:
                    reason = f"arXiv look-up failed: {result.failure.kind} — {result.failure.message}"
                    self._cache[f"arxiv:{arxiv_id}"] = Resolution((), reason)
                elif found is not None:
                    self._cache[f"arxiv:{arxiv_id}"] = Resolution((found,), f"arXiv {found.source_id}")
                else:
                    self._cache[f"arxiv:{arxiv_id}"] = Resolution((), f"arXiv has no paper {arxiv_id}")
        return {arxiv_id: self._cache[f"arxiv:{arxiv_id}"] for arxiv_id in ids}

    async def _resolve(self, reference: DetectedReference, sub_question: str, timeout_s: float) -> Resolution:
        if reference.kind == "doi":
            return await self._doi(reference.target, sub_question, timeout_s)
        if reference.kind == "named_document":
            return await self._title(reference.target, sub_question, timeout_s)
        if reference.kind == "section" and reference.document:
            return await self._section(reference.document, reference.target, sub_question, timeout_s)
        if reference.kind == "numbered":
            entry = reference.entry
            if entry is None and reference.document:
                entry = await self._list_entry(reference.document, reference.target, timeout_s)
            if entry is None:
                return Resolution((), f"the reference list of its document has no entry {reference.target}")
            inner = entry_target(entry)
            if inner is not None and inner[0] == "arxiv":
                return (await self._arxiv_batch([inner[1]], timeout_s))[inner[1]]
            if inner is not None and inner[0] == "doi":
                return await self._doi(inner[1], sub_question, timeout_s)
            return await self._title(entry, sub_question, timeout_s)
        return Resolution((), f"no way to look up a {reference.kind} reference here")

    async def _knowledge(self, query: str, timeout_s: float, **options: Any) -> tuple[list[ContextChunk], str | None]:
        """A knowledge-base search: chunks, or why there are none."""
        if self.knowledge is None:
            return [], "no knowledge base to look it up in"
        result = await self.knowledge.search(
            query, timeout=timeout_s, min_relevance=0.0, user_id=self.user_id, **options
        )
        if result.failure is not None:
            return [], f"knowledge-base look-up failed: {result.failure.kind} — {result.failure.message}"
        return list(result.chunks), None

    async def _title(self, title: str, sub_question: str, timeout_s: float) -> Resolution:
        # Which document a title names is one look-up per run; which of its passages fit is one per sub-question
        # (the passages read for one sub-question were reused for the others before).
        key = f"title:{normal_title(title)}"
        if key not in self._cache:
            hits, failure = await self._knowledge(title, timeout_s, num_results=5)
            matching = [hit for hit in hits if hit.source_id and title_matches(hit.title, title)]
            self._cache[key] = (
                Resolution((matching[0],), f"knowledge-base document “{matching[0].title}”")
                if failure is None and matching
                else Resolution((), failure or "no knowledge-base document has this title")
            )
        named = self._cache[key]
        if not named.chunks:
            return named
        document = named.chunks[0]
        scoped_key = f"passages:{document.source_id}:{sub_question}"
        if scoped_key not in self._cache:
            passages, _ = await self._knowledge(
                sub_question, timeout_s, num_results=PASSAGES_PER_DOCUMENT, filters={"doc_ids": [document.source_id]}
            )
            found = tuple(passages) if passages else (document,)
            self._cache[scoped_key] = Resolution(found, named.reason, scoped=bool(passages))
        return self._cache[scoped_key]

    async def _doi(self, doi: str, sub_question: str, timeout_s: float) -> Resolution:
        key = f"doi:{doi.lower()}:{sub_question}"  # the passages read are the sub-question's (see _title)
        if key in self._cache:
            return self._cache[key]
        passages, failure = await self._knowledge(
            sub_question, timeout_s, num_results=PASSAGES_PER_DOCUMENT, filters={"metadata": {"doi": doi}}
        )
        if passages:
            resolution = Resolution(tuple(passages), f"knowledge-base document with DOI {doi}", scoped=True)
        else:
            hits, failure = await self._knowledge(doi, timeout_s, num_results=5)
            quoting = [hit for hit in hits if doi.lower() in f"{hit.content} {hit.url or ''}".lower()]
            resolution = (
                Resolution(tuple(quoting), f"knowledge-base passage quoting DOI {doi}")
                if quoting
                else Resolution(
                    (),
                    failure
                    or "no knowledge-base document carries this DOI (DOIs are looked up in the knowledge base only)",
                )
            )
        self._cache[key] = resolution
        return resolution

    async def _section(self, document: str, section: str, sub_question: str, timeout_s: float) -> Resolution:
        passages, failure = await self._knowledge(
            f"{sub_question} section {section}", timeout_s, num_results=5, filters={"doc_ids": [document]}
        )
        if not passages:
            return Resolution((), failure or f"section {section} was not found in its document")
        under = [chunk for chunk in passages if str(chunk.metadata.get("heading") or "").strip().startswith(section)]
        return Resolution(tuple(under or passages[:2]), f"section {section} of the same document", scoped=True)

    async def _list_entry(self, document: str, marker: str, timeout_s: float) -> str | None:
        """Entry ``[n]`` of a document's reference list, found by a scoped search for the list."""
        number = int(marker.strip("[]"))
        passages, _ = await self._knowledge(
            "references bibliography", timeout_s, num_results=5, filters={"doc_ids": [document]}
        )
        for chunk in passages:
            _, entries = split_reference_list(chunk.content)
            entries = entries or parse_entries(chunk.content)
            if number in entries:
                return entries[number]
        return None


class FollowingRetriever:
    """A Retriever stage that follows the references in what it retrieved and adds the kept passages to the
    evidence — so the normal pipeline (evaluation, synthesis, citation check) treats them like any evidence."""

    def __init__(self, inner: RetrieverLike, follower: ReferenceFollower, index: int, sub_question: str) -> None:
        self.inner = inner
        self.follower = follower
        self.index = index
        self.sub_question = sub_question

    async def run(self, request: RetrieverInput) -> RetrieverOutput:
        started = time.monotonic()
        output = await self.inner.run(request)
        chunks = output.aggregated_context.chunks
        # Retrieval and following share one limit (the request's cap, else its per-source timeout, else a
        # sub-question's deadline): following gets what retrieval left, so the stage ends within the limit it was
        # given. (It used to start a full limit of its own after retrieval, up to twice the stage's time.) With
        # nothing left, every reference is recorded as skipped for time.
        limit = request.time_limit_s or request.timeout_per_source or self.follower.settings.subquestion_deadline_s
        left = limit - (time.monotonic() - started)
        kept = await self.follower.follow(self.index, self.sub_question, chunks, time_limit_s=max(0.0, left))
        if not kept:
            return output
        context = output.aggregated_context.model_copy(update={"chunks": [*chunks, *kept]})
        return output.model_copy(update={"aggregated_context": context})
