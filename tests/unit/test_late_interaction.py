"""Issue 20: a passage's single vector averages away which of its words carry the claim's terms, so the abstract on
the neighbouring finding scored like the one stating the claim. Late interaction (pipeline/_late.py) reads the few
passages of highest support word piece by word piece."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from researchcrew.contracts import ContextChunk
from researchcrew.embedding.tokens import TokenVectors
from researchcrew.pipeline._late import content_pieces, late_support, max_sim
from researchcrew.pipeline._support import EmbeddingSupport
from researchcrew.settings import ConfidenceSettings


def test_content_pieces_rebuild_words_and_leave_stop_words_out() -> None:
    tokens = ["who", "wrote", "quick", "##check", "in", "the", "1990s", "?", "a"]
    assert content_pieces(tokens) == [False, True, True, True, False, False, True, False, False]


def _vectors(*rows: list[float]) -> np.ndarray[Any, Any]:
    matrix = np.asarray(rows, dtype=np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def test_max_sim_averages_each_content_pieces_best_match() -> None:
    question = TokenVectors(["the", "placental", "weight"], _vectors([1, 0, 0], [0, 1, 0], [0, 0, 1]))
    passage = TokenVectors(["weight", "of", "babies"], _vectors([0, 0, 1], [1, 0, 0], [0, 1, 1]))
    # "placental" best meets "babies" at cos 45° (0.707); "weight" meets "weight" (1.0); "the" does not count.
    assert max_sim(question, passage) == pytest.approx((0.7071 + 1.0) / 2, abs=1e-4)
    assert max_sim(TokenVectors(["the"], _vectors([1, 0, 0])), passage) == 0.0
    assert max_sim(question, TokenVectors([], np.zeros((0, 3), dtype=np.float32))) == 0.0


def test_late_support_maps_from_floor_to_full_and_blends() -> None:
    assert late_support(0.6, 0.9, weight=0.5, floor=0.6, full=0.8) == pytest.approx(0.8)
    assert late_support(0.6, 0.5, weight=0.5, floor=0.6, full=0.8) == pytest.approx(0.3)
    assert late_support(0.6, 0.7, weight=0.5, floor=0.6, full=0.8) == pytest.approx(0.55)
    assert late_support(0.6, 0.7, weight=0.0, floor=0.6, full=0.8) == pytest.approx(0.6)


def test_late_interaction_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="late_interaction_full must be greater"):
        ConfidenceSettings(late_interaction_floor=0.8, late_interaction_full=0.7)


def _chunk(chunk_id: str, question: str, text: str, dense: float) -> ContextChunk:
    return ContextChunk(
        chunk_id=chunk_id,
        source_type="rag",
        content=text,
        semantic_relevance=0.8,
        metadata={"query": question, "scores": {"dense": dense}},
        tool_name="rag_search",
    )


class _TokenModel:
    """Knowledge-base hits carry their search cosine; only token vectors are asked for. Each word is its own
    direction, so a passage matches a question word only by holding it."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self._axes: dict[str, int] = {}

    def embed_query(self, text: str) -> Any:
        raise AssertionError("not expected: the hits carry their cosine")

    embed_documents = embed_query

    def embed_tokens(self, texts: list[str]) -> list[TokenVectors]:
        self.calls.append(texts)
        result = []
        for text in texts:
            words = [w.strip("?.,").lower() for w in text.split() if w.strip("?.,")]
            matrix = np.zeros((len(words), 64), dtype=np.float32)
            for row, word in enumerate(words):
                matrix[row, self._axes.setdefault(word, len(self._axes))] = 1.0
            result.append(TokenVectors(words, matrix))
        return result


def test_the_passages_of_highest_support_are_read_closely_and_the_rest_capped() -> None:
    claim = "Placental weight predicts preeclampsia."
    stating = _chunk("a", claim, "Placental weight predicts preeclampsia in a cohort.", dense=0.6)
    neighbour = _chunk("b", claim, "Birth weight predicts smoking outcomes in a cohort.", dense=0.62)
    third = _chunk("c", claim, "Weight of placental tissue and something else.", dense=0.55)
    model = _TokenModel()
    settings = ConfidenceSettings(late_interaction_passages=2)
    scorer = EmbeddingSupport(model, settings, null=None)  # type: ignore[arg-type]
    plain = EmbeddingSupport(model, ConfidenceSettings(late_interaction_passages=0), null=None)  # type: ignore[arg-type]
    before = plain.score(claim, [stating, neighbour, third])
    assert model.calls == []  # off: nothing read token by token
    after = scorer.score(claim, [stating, neighbour, third])
    assert len(model.calls) == 1 and model.calls[0][0] == claim and len(model.calls[0]) == 3  # the question + 2
    # The stating passage holds every content word (MaxSim 1: full match); the neighbour one of four.
    assert after["a"].score == pytest.approx(0.5 * before["a"].score + 0.5, abs=1e-3)
    assert after["b"].score == pytest.approx(0.5 * before["b"].score, abs=1e-3)
    assert after["a"].score > after["b"].score
    assert after["c"].score <= min(after["a"].score, after["b"].score)  # not read: capped at the least read
    assert after["a"].semantic == before["a"].semantic and after["a"].coverage == before["a"].coverage


def test_an_embedder_without_token_vectors_keeps_the_support() -> None:
    class _Plain:
        def embed_query(self, text: str) -> Any:
            raise AssertionError("not expected")

        embed_documents = embed_query

    claim = "Placental weight predicts preeclampsia."
    hit = _chunk("a", claim, "Placental weight predicts preeclampsia.", dense=0.6)
    with_plain = EmbeddingSupport(_Plain(), ConfidenceSettings(), null=None).score(claim, [hit])  # type: ignore[arg-type]
    off = EmbeddingSupport(_Plain(), ConfidenceSettings(late_interaction_passages=0), null=None).score(claim, [hit])  # type: ignore[arg-type]
    assert with_plain == off
