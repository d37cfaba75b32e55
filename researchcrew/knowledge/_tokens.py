"""Counting word pieces the way the embedder does, so that a chunk never gets silently truncated.

all-MiniLM-L6-v2 reads at most 256 word pieces including ``[CLS]`` and ``[SEP]``; anything past that is dropped
without a word. The chunker therefore measures text with the model's own tokenizer (the fast Rust ``tokenizers``
package reading the model's ``tokenizer.json``), not with a characters-per-token guess.

For a model without a ``tokenizer.json`` a conservative estimate is used (one logged notice): every word and
punctuation mark counts as two pieces, which over-counts English text, so chunks come out smaller than they
could be but still fit.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

logger = logging.getLogger(__name__)

_WORDISH = re.compile(r"\w+|[^\w\s]", re.UNICODE)


@dataclass(frozen=True)
class Span:
    """A piece of text given by character offsets into the text it was cut from."""

    start: int
    end: int


class TokenCounter:
    """Counts word pieces (without special tokens) and cuts text at word-piece boundaries."""

    def __init__(self, tokenizer_file: Path | None, *, special_tokens: int = 2) -> None:
        self.special_tokens = special_tokens
        self._lock = threading.Lock()
        self._tokenizer = None
        if tokenizer_file is not None and tokenizer_file.is_file():
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(tokenizer_file))
            # The file carries the model's truncation/padding; counting must see the whole text.
            tokenizer.no_truncation()
            tokenizer.no_padding()
            self._tokenizer = tokenizer
        else:
            logger.warning(
                "no tokenizer.json for the embedding model (looked at %s); chunk sizes use a conservative estimate",
                tokenizer_file,
            )

    @property
    def exact(self) -> bool:
        """True when counts come from the model's tokenizer rather than the estimate."""
        return self._tokenizer is not None

    def count(self, text: str) -> int:
        """Word pieces in ``text``, special tokens not included."""
        return self.count_many([text])[0]

    def count_many(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        if self._tokenizer is None:
            return [2 * len(_WORDISH.findall(text)) for text in texts]
        with self._lock:  # a Rust tokenizer object is not meant to be shared across threads mid-call
            encodings = self._tokenizer.encode_batch_fast(texts, add_special_tokens=False)  # no offsets needed
        return [len(encoding.ids) for encoding in encodings]

    def windows(self, text: str, max_tokens: int) -> list[Span]:
        """Cut ``text`` into consecutive spans of at most ``max_tokens`` pieces, at piece boundaries.

        Used only for a single sentence that is longer than a whole chunk (tables, lists of numbers, run-on text).
        """
        if max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        if self._tokenizer is None:
            offsets = [match.span() for match in _WORDISH.finditer(text)]
            per_window = max(1, max_tokens // 2)
        else:
            with self._lock:
                offsets = list(self._tokenizer.encode(text, add_special_tokens=False).offsets)
            per_window = max_tokens
        spans: list[Span] = []
        first = 0
        while first < len(offsets):
            last = min(first + per_window, len(offsets))  # exclusive
            if last < len(offsets):
                # Prefer to cut where a new word starts (a gap before the piece), so no word is split in two;
                # re-tokenising half a word can cost more pieces than it had inside the word.
                for cut in range(last, first + 1, -1):
                    if offsets[cut][0] > offsets[cut - 1][1]:
                        last = cut
                        break
            spans.append(Span(offsets[first][0], offsets[last - 1][1]))
            first = last
        return spans


@lru_cache(maxsize=8)
def token_counter_for(model_path: str) -> TokenCounter:
    """The token counter of a local model directory (shared per process: loading takes ~50 ms)."""
    return TokenCounter(Path(model_path) / "tokenizer.json")
