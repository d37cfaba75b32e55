"""``QueryVectors``: a question embedded by the search, memory recall and the support measure is embedded once,
also when two of them ask at the same time; failures are not remembered; callers cannot change each other's copy."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt
import pytest

from researchcrew.embedding._query_cache import QueryVectors


class Model:
    """Embeds a text as its length in a 3-d vector, counting calls; can be made to wait or fail."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.release = threading.Event()
        self.release.set()
        self.fail = False

    def __call__(self, text: str) -> npt.NDArray[np.float32]:
        self.calls.append(text)
        assert self.release.wait(10)
        if self.fail:
            raise RuntimeError("the model failed")
        return np.array([len(text), 1.0, 0.0], dtype=np.float32)


def test_a_text_is_embedded_once_and_each_caller_gets_its_own_copy() -> None:
    cache, model = QueryVectors(), Model()
    first = cache.get("what is fuzzing?", model)
    first[0] = -1.0  # a caller changing its vector changes nobody else's
    again = cache.get("what is fuzzing?", model)
    assert model.calls == ["what is fuzzing?"]
    assert again.tolist() == [16.0, 1.0, 0.0]
    assert again.flags.writeable and again.dtype == np.float32


def test_two_threads_asking_for_the_same_text_share_one_embedding() -> None:
    cache, model = QueryVectors(), Model()
    model.release.clear()
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(cache.get, "same question", model) for _ in range(2)]
        for _ in range(200):  # the first caller is inside the model; the second must wait for it, not embed
            if model.calls:
                break
            time.sleep(0.01)
        model.release.set()
        vectors = [future.result(timeout=10) for future in futures]
    assert model.calls == ["same question"]
    assert all(vector.tolist() == [13.0, 1.0, 0.0] for vector in vectors)


def test_a_failure_is_raised_and_not_remembered() -> None:
    cache, model = QueryVectors(), Model()
    model.fail = True
    with pytest.raises(RuntimeError, match="the model failed"):
        cache.get("q", model)
    model.fail = False
    assert cache.get("q", model).tolist() == [1.0, 1.0, 0.0]
    assert model.calls == ["q", "q"]


def test_the_cache_keeps_the_most_recently_used_texts() -> None:
    cache, model = QueryVectors(size=2), Model()
    cache.get("a", model)
    cache.get("b", model)
    cache.get("a", model)  # "a" is now the most recent
    cache.get("c", model)  # evicts "b"
    assert len(cache) == 2
    cache.get("a", model)
    cache.get("b", model)
    assert model.calls == ["a", "b", "c", "b"]
    with pytest.raises(ValueError, match="at least 1"):
        QueryVectors(size=0)
