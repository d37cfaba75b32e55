"""Near-duplicate detection with word shingles.

Each chunk becomes the set of its word 3-shingles (lower-cased alphanumeric words, three at a time). A chunk is
compared with every *better* chunk (higher quality, already seen) by **containment**: the share of its shingles
that the better chunk also has,

    containment(worse in better) = |S_worse ∩ S_better| / |S_worse|

Why containment and not Jaccard: the question is "what would we lose by dropping the worse chunk?", and that is
exactly the part of it the better chunk does not already say. Jaccard divides by the union, so a truncated copy
of an abstract (the same text from arXiv and from a knowledge-base chunk that cut it short) looks only half
similar; containment sees it is fully repeated. It is also asymmetric in the right way: a short chunk contained
in a long, better one is redundant, but a long chunk that merely includes a short better one still adds
something. Shingles of three words ignore punctuation, casing and markdown, yet two texts that share vocabulary
without sharing phrases barely overlap.

Decisions (thresholds from ``EvaluationSettings``):
- containment ≥ ``duplicate_threshold`` (0.8): near-identical, the worse chunk is removed (``duplicate_of``);
- ``redundancy_threshold`` (0.5) ≤ containment < duplicate: similar, the seed's redundancy penalty applies;
- below: unique.
Chunks removed as duplicates are not used as references for later ones (the kept chunk already covers them).

A chunk that repeats a better one *but disagrees with it* (``keep_apart``: another number, the opposite direction,
a negation; see ``disagreement``) is neither removed nor penalised: the two are the two sides of a disagreement,
and the Evaluator reports them as a contradiction. That check comes first, so dedup can never delete one side.

Cost: linear in the total text. Shingles are integer hashes; an inverted index (shingle → better chunks) counts
a chunk's overlap with all better chunks in one pass over its own shingles, so unrelated chunks cost nothing.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from typing import Literal

SHINGLE_SIZE = 3
_WORD = re.compile(r"[^\W_]+")

DedupKind = Literal["unique", "redundant", "duplicate"]


def words(text: str) -> list[str]:
    """Lower-cased alphanumeric words: punctuation, markdown and casing do not make texts differ."""
    return _WORD.findall(text.lower())


def shingles(text: str, size: int = SHINGLE_SIZE) -> frozenset[int]:
    """The hashed word ``size``-shingles of ``text``; a text shorter than ``size`` words is one shingle."""
    tokens = words(text)
    if not tokens:
        return frozenset()
    if len(tokens) < size:
        return frozenset({hash(tuple(tokens))})
    # Integer hashes are cheaper to index and compare than tuples of strings. The shifted copies have unequal
    # lengths on purpose: zip stops at the last complete shingle.
    return frozenset(map(hash, zip(*(tokens[i:] for i in range(size)), strict=False)))


def containment(part: frozenset[int], whole: frozenset[int]) -> float:
    """Share of ``part``'s shingles that also occur in ``whole`` (0 for an empty ``part``)."""
    if not part:
        return 0.0
    return len(part & whole) / len(part)  # set intersection iterates the smaller set


@dataclass(frozen=True)
class DedupDecision:
    """What to do with one chunk: keep it, penalise it as redundant, or remove it as a duplicate."""

    kind: DedupKind
    other: int | None = None  # index (in the caller's sequence) of the better chunk it repeats
    containment: float = 0.0


def find_duplicates(
    sets: Sequence[frozenset[int]],
    order: Sequence[int],
    *,
    duplicate_threshold: float,
    redundancy_threshold: float,
    keep_apart: Callable[[int, int], bool] | None = None,
) -> list[DedupDecision]:
    """Decide for every shingle set (see ``shingles``), visiting them in ``order`` (best first), against the better
    ones kept so far. Returns one decision per index of ``sets`` (indices missing from ``order`` are ``unique``).
    ``keep_apart(worse, better)`` says that two overlapping chunks disagree: the worse one is then kept, unique.
    """
    order_rank = {index: rank for rank, index in enumerate(order)}
    decisions = [DedupDecision("unique")] * len(sets)
    # Inverted index shingle → better chunks kept so far: a chunk's overlap with every reference is counted in
    # one pass over its own shingles, instead of one set intersection per pair.
    postings: defaultdict[int, list[int]] = defaultdict(list)
    for index in order:
        mine = sets[index]
        overlap = Counter(chain.from_iterable(map(postings.get, mine, repeat(()))))
        decision = DedupDecision("unique")
        if overlap:
            # Most shared shingles; among equals the better (earlier) reference, for a stable choice.
            other, shared = max(overlap.items(), key=lambda item: (item[1], -order_rank[item[0]]))
            value = shared / len(mine)
            if value >= redundancy_threshold and keep_apart is not None and keep_apart(index, other):
                value = 0.0  # two sides of a disagreement: neither a duplicate nor redundant
            if value >= duplicate_threshold:
                decisions[index] = DedupDecision("duplicate", other, value)
                continue
            if value >= redundancy_threshold:
                decision = DedupDecision("redundant", other, value)
        decisions[index] = decision
        for shingle in mine:
            postings[shingle].append(index)
    return decisions
