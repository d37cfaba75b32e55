"""Late interaction: does a passage restate the question's own terms, in context? (issue 20)

A passage's single vector averages away *which* of its words carry the question's terms, so an abstract on the
neighbouring finding of the same topic ("birth weight and maternal smoking" for "placental weight is associated
with preeclampsia") scores as high as the one that states the claim. ColBERT's MaxSim keeps the words apart: each
content word piece of the question (stop words and punctuation left out) takes its best cosine with any word piece
of the passage, both embedded in context by the shared model (``embedding/tokens.py``), and the mean of those is
the passage's score. A passage restating the claim's specific terms in the same relations scores 0.8–0.95; a
related one 0.5–0.7.

It costs one model run per passage (the passage's vectors cannot come from the index, which keeps one per
passage), so only the few passages of highest support are read this way (``late_interaction_passages``): those
are the ones that decide whether and how confidently the question is answered. Their support becomes
``(1 − weight) × support + weight × late``, where ``late`` maps the MaxSim linearly from ``late_interaction_floor``
(0) to ``late_interaction_full`` (1); a passage not read token by token supports the question at most as well as
the least of those that were. Chosen on the tune split of ``benchmarks/answer_quality.py`` by replaying recorded
supports (``benchmarks/late_interaction.py``; figures in benchmarks/README.md).
"""

from __future__ import annotations

import numpy as np

from researchcrew.embedding.tokens import TokenVectors
from researchcrew.text.terms import QUERY_STOP_WORDS

_CONTINUATION = "##"


def content_pieces(tokens: list[str]) -> list[bool]:
    """Which word pieces belong to a content word of the question: whole words rebuilt from their pieces; stop
    words, punctuation and single letters left out."""
    words: list[tuple[int, int]] = []  # [start, end) of each word, in pieces
    for index, token in enumerate(tokens):
        if token.startswith(_CONTINUATION) and words:
            words[-1] = (words[-1][0], index + 1)
        else:
            words.append((index, index + 1))
    mask = [False] * len(tokens)
    for start, end in words:
        word = "".join(token.removeprefix(_CONTINUATION) for token in tokens[start:end]).lower()
        if word.isalnum() and word not in QUERY_STOP_WORDS and not (len(word) == 1 and word.isalpha()):
            mask[start:end] = [True] * (end - start)
    return mask


def max_sim(question: TokenVectors, passage: TokenVectors) -> float:
    """The mean, over the question's content word pieces, of each one's best cosine with a passage word piece
    (0 when the question has none or the passage is empty)."""
    mask = np.asarray(content_pieces(question.tokens), dtype=bool)
    if not mask.any() or len(passage.vectors) == 0:
        return 0.0
    best = (question.vectors[mask] @ passage.vectors.T).max(axis=1)
    return float(best.mean())


def late_support(support: float, late: float, *, weight: float, floor: float, full: float) -> float:
    """The support of a passage read token by token: blended with its MaxSim mapped from ``floor`` to ``full``."""
    mapped = min(1.0, max(0.0, (late - floor) / (full - floor)))
    return (1 - weight) * support + weight * mapped


__all__ = ["content_pieces", "late_support", "max_sim"]
