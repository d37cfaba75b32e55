"""Near-duplicates: removed keeping the best, similar chunks penalised, with reasons."""

from __future__ import annotations

from researchcrew.pipeline.evaluate._dedup import containment, find_duplicates, shingles
from researchcrew.pipeline.evaluate._evaluator import Evaluator
from tests.evaluator.factories import chunk, request

ABSTRACT = (
    "We introduce a sparse attention mechanism that reduces the memory cost of transformers on long documents. "
    "Our method routes each query to a small set of keys chosen by locality-sensitive hashing, so that attention "
    "over sequences of sixty thousand tokens fits on a single accelerator. Experiments on long-document "
    "summarization and question answering show quality comparable to dense attention at a fraction of the cost."
)
FIRST_TWO = ABSTRACT.split(". Experiments")[0] + "."
SIMILAR = FIRST_TWO + (
    " A follow-up evaluation on code completion and protein sequence modelling finds smaller gains, which the "
    "authors attribute to shorter contexts."
)
UNRELATED = (
    "Graph neural networks aggregate features from neighbouring nodes; message passing depth limits how far "
    "information travels, and oversmoothing appears when many layers are stacked."
)


def test_shingles_ignore_case_punctuation_and_markup() -> None:
    assert shingles("**We introduce** a Sparse, attention!") == shingles("we introduce a sparse attention")
    assert shingles("") == frozenset()
    assert len(shingles("two words")) == 1  # shorter than a shingle: one shingle of the whole text


def test_containment_is_asymmetric() -> None:
    short, full = shingles(FIRST_TWO), shingles(ABSTRACT)
    assert containment(short, full) == 1.0  # everything the truncated copy says, the full abstract says
    assert 0.5 < containment(full, short) < 0.9  # the full abstract says more
    assert containment(shingles(UNRELATED), full) == 0.0
    assert containment(frozenset(), full) == 0.0


def test_decisions_follow_the_quality_order() -> None:
    texts = [shingles(text) for text in (FIRST_TWO, ABSTRACT, SIMILAR, UNRELATED)]
    # Best first: the full abstract, then the others.
    decisions = find_duplicates(texts, [1, 0, 2, 3], duplicate_threshold=0.8, redundancy_threshold=0.5)
    assert decisions[1].kind == "unique"
    assert decisions[0].kind == "duplicate" and decisions[0].other == 1 and decisions[0].containment == 1.0
    assert decisions[2].kind == "redundant" and decisions[2].other == 1
    assert decisions[3].kind == "unique"
    # If the truncated copy were the better chunk, the full abstract would still add something: not removed.
    reversed_order = find_duplicates(texts, [0, 1, 2, 3], duplicate_threshold=0.8, redundancy_threshold=0.5)
    assert reversed_order[1].kind == "redundant"


async def test_same_abstract_from_arxiv_and_kb_keeps_the_better_one() -> None:
    kb = chunk("kb-1", FIRST_TWO, source_type="rag", relevance=0.8)
    arxiv = chunk("arxiv-1", ABSTRACT, source_type="arxiv", relevance=0.85)
    web = chunk("web-1", "# Sparse attention\n\n" + ABSTRACT.upper(), source_type="web", relevance=0.9)
    other = chunk("web-2", UNRELATED, source_type="web", relevance=0.9)
    out = await Evaluator().run(request([kb, web, arxiv, other], quality_threshold=0.0))

    kept = [s.chunk.chunk_id for s in out.filtered_context.chunks]
    assert sorted(kept) == ["arxiv-1", "web-2"]
    reasons = {r.chunk_id: r for r in out.removal_rationale}
    assert set(reasons) == {"kb-1", "web-1"}
    for removed in ("kb-1", "web-1"):
        assert reasons[removed].reason == "duplicate"
        assert reasons[removed].duplicate_of == "arxiv-1"
        assert "of its text repeats arxiv-1" in reasons[removed].detail
        assert reasons[removed].quality_score is not None
    assert reasons["kb-1"].detail.startswith("100% ")  # the truncated copy is wholly inside the abstract
    assert reasons["web-1"].detail.startswith("97% ")  # only its added heading is new
    assert out.quality_stats.filtered_chunk_count == 2


async def test_exact_web_page_twice_keeps_the_higher_quality_copy() -> None:
    worse = chunk("page-a", ABSTRACT, source_type="web", relevance=0.4)
    better = chunk("page-b", ABSTRACT, source_type="web", relevance=0.9)
    out = await Evaluator().run(request([worse, better], quality_threshold=0.0))
    assert [s.chunk.chunk_id for s in out.filtered_context.chunks] == ["page-b"]
    assert out.removal_rationale[0].chunk_id == "page-a"
    assert out.removal_rationale[0].duplicate_of == "page-b"


async def test_similar_chunk_gets_the_redundancy_penalty() -> None:
    best = chunk("arxiv-1", ABSTRACT, source_type="arxiv", relevance=0.9)
    similar = chunk("web-1", SIMILAR, source_type="web", relevance=0.9)
    out = await Evaluator().run(request([similar, best], quality_threshold=0.0))
    by_id = {s.chunk.chunk_id: s for s in out.filtered_context.chunks}
    assert not by_id["arxiv-1"].redundancy_penalised
    penalised = by_id["web-1"]
    assert penalised.redundancy_penalised and penalised.similar_to == "arxiv-1"
    assert penalised.base_score is not None
    assert penalised.quality_score == 0.5 * penalised.base_score
    assert out.removal_rationale == []


async def test_penalty_can_push_a_chunk_under_the_threshold() -> None:
    best = chunk("arxiv-1", ABSTRACT, source_type="arxiv", relevance=0.9)
    similar = chunk("web-1", SIMILAR, source_type="web", relevance=0.9)
    out = await Evaluator().run(request([similar, best], quality_threshold=0.6))
    assert [s.chunk.chunk_id for s in out.filtered_context.chunks] == ["arxiv-1"]
    (reason,) = out.removal_rationale
    assert reason.reason == "below_threshold" and reason.chunk_id == "web-1"
    assert "redundancy penalty" in reason.detail and "arxiv-1" in reason.detail
    assert reason.components is not None and reason.components["redundancy_penalty"] == 0.5
