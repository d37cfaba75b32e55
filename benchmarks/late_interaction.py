"""Issue 20: does a late-interaction (ColBERT-style MaxSim) signal from the packaged MiniLM's *token* embeddings
separate passages that state a question or claim from passages of related work, better than today's support?

    .venv/bin/python benchmarks/late_interaction.py record --split tune --out /tmp/li-tune.json
    .venv/bin/python benchmarks/late_interaction.py replay /tmp/li-tune.json

``record`` runs ``answer_quality.py``'s questions through the pipeline (same settings) and keeps, per question,
every passage the support stage measured (title, text, support, whether it is a gold passage) with the answer's
confidence and verdict. ``replay`` computes, for the ``--top`` passages of highest support, the MaxSim of the
question's content tokens against the passage's tokens (each token's best cosine with any passage token, averaged;
optionally idf-weighted by the recorded passages), and reports the AUROC of the answer's confidence, of the best
support, and of blends of the support with the signal, per corpus. Tune only on ``tune``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import answer_quality as aq  # noqa: E402


# Recording ---------------------------------------------------------------------------------------------------------
def record(argv: Sequence[str]) -> dict[str, Any]:
    """Run answer_quality with the support stage recorded; the rows gain ``passages`` (best support first)."""
    from researchcrew.pipeline import _support

    calls: list[dict[str, Any]] = []
    original_score = _support.EmbeddingSupport.score

    def recording_score(self: Any, question: str, chunks: Any) -> Any:
        result = original_score(self, question, chunks)
        calls.append(
            {
                "question": question,
                "passages": [
                    {
                        "chunk_id": chunk.chunk_id,
                        "source_id": chunk.source_id,
                        "title": chunk.title or "",
                        "text": chunk.content,
                        "support": result[chunk.chunk_id].score,
                        "cosine": result[chunk.chunk_id].semantic,
                        "coverage": result[chunk.chunk_id].coverage,
                        "source_type": chunk.source_type,
                    }
                    for chunk in chunks
                    if chunk.chunk_id in result
                ],
            }
        )
        return result

    original_judge = aq.judge

    def recording_judge(question: Any, response: Any, keys: Any, passages: Any) -> dict[str, Any]:
        row = original_judge(question, response, keys, passages)
        measured: dict[str, dict[str, Any]] = {}
        for call in calls:
            for passage in call["passages"]:
                doc = passage["source_id"] or passage["chunk_id"].split(":", 1)[0]
                passage["gold"] = keys.get(doc) in question.gold
                passage["asked_as"] = call["question"]
                known = measured.get(passage["chunk_id"])
                if known is None or (passage["asked_as"] == question.text and known["asked_as"] != question.text):
                    measured[passage["chunk_id"]] = passage
        calls.clear()
        row["text"] = question.text
        row["passages"] = sorted(measured.values(), key=lambda p: -float(p["support"]))
        return row

    _support.EmbeddingSupport.score = recording_score  # type: ignore[method-assign]
    aq.judge = recording_judge
    return asyncio.run(aq.run([*argv, "--details"]))


# The signal ----------------------------------------------------------------------------------------------------------
class TokenEncoder:
    """Token embeddings of the packaged MiniLM (the ONNX session's hidden states, L2-normalised per token)."""

    def __init__(self) -> None:
        import numpy as np

        from researchcrew.embedding.embedder import default_cache_dir, get_embedder
        from researchcrew.settings import EmbeddingSettings

        self.np = np
        self.embedder: Any = get_embedder(EmbeddingSettings(cache_dir=default_cache_dir()))
        self.cache: dict[str, tuple[list[str], Any]] = {}

    def tokens(self, text: str) -> tuple[list[str], Any]:
        """(word pieces, their unit vectors), [CLS]/[SEP] left out."""
        cached = self.cache.get(text)
        if cached is not None:
            return cached
        np = self.np
        embedder = self.embedder
        encoding = embedder._tokenizer.encode(text)
        ids = np.asarray([encoding.ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        (hidden,) = embedder._session.run(None, {name: feed[name] for name in embedder._inputs})
        vectors = np.asarray(hidden[0], dtype=np.float32)[1:-1]
        vectors /= np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        result = (encoding.tokens[1:-1], vectors)
        self.cache[text] = result
        return result


def content_mask(tokens: list[str]) -> list[bool]:
    """Word pieces that belong to a content word of the question (stop words and punctuation out)."""
    from researchcrew.text.terms import QUERY_STOP_WORDS

    mask: list[bool] = []
    words: list[tuple[int, int]] = []  # (start, end) of each whole word in pieces
    for index, token in enumerate(tokens):
        if token.startswith("##") and words:
            words[-1] = (words[-1][0], index + 1)
        else:
            words.append((index, index + 1))
    mask = [False] * len(tokens)
    for start, end in words:
        word = "".join(t.removeprefix("##") for t in tokens[start:end])
        if word.isalnum() and word not in QUERY_STOP_WORDS and not (len(word) == 1 and word.isalpha()):
            for index in range(start, end):
                mask[index] = True
    return mask


def maxsim(encoder: TokenEncoder, query: str, passage: str, idf: dict[str, float] | None) -> float:
    np = encoder.np
    q_tokens, q_vectors = encoder.tokens(query)
    _, p_vectors = encoder.tokens(passage)
    mask = content_mask(q_tokens)
    if not any(mask) or len(p_vectors) == 0:
        return 0.0
    best = (q_vectors @ p_vectors.T).max(axis=1)
    weights = np.asarray(
        [(idf.get(t, max(idf.values())) if idf else 1.0) if m else 0.0 for t, m in zip(q_tokens, mask, strict=True)]
    )
    return float((best * weights).sum() / weights.sum())


def auroc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    return aq.auroc(positives, negatives)


def replay(path: Path, top: int, splits: Sequence[str]) -> dict[str, Any]:
    rows = [row for row in json.loads(path.read_text())["rows"] if row["split"] in splits]
    encoder = TokenEncoder()
    # Word-piece document frequencies over every recorded passage (the knowledge base's stand-in), per corpus.
    idf_by_corpus: dict[str, dict[str, float]] = {}
    for corpus in {row["corpus"] for row in rows}:
        seen: dict[str, str] = {}
        for row in rows:
            if row["corpus"] == corpus:
                for passage in row["passages"]:
                    seen[passage["chunk_id"]] = f"{passage['title']}\n{passage['text']}"
        counts: Counter[str] = Counter()
        for text in seen.values():
            counts.update(set(encoder.embedder._tokenizer.encode(text).tokens[1:-1]))
        total = len(seen)
        idf_by_corpus[corpus] = {t: math.log(1 + (total - n + 0.5) / (n + 0.5)) for t, n in counts.items()}
    started = time.perf_counter()
    measured = 0
    for row in rows:
        query = row["text"]
        for passage in row["passages"][:top]:
            text = f"{passage['title']}\n{passage['text']}"
            passage["maxsim"] = maxsim(encoder, query, text, None)
            passage["maxsim_idf"] = maxsim(encoder, query, text, idf_by_corpus[row["corpus"]])
            measured += 1
    seconds = time.perf_counter() - started

    def question_score(row: dict[str, Any], how: str) -> float:
        top_passages = row["passages"][:top]
        if not top_passages:
            return 0.0
        if how == "confidence":
            return float(row["confidence"])
        if how == "support":
            return float(top_passages[0]["support"])
        signal, _, blend = how.partition(":")
        if not blend:
            return max(float(p[signal]) for p in top_passages)
        kind, _, weight_text = blend.partition("=")
        weight = float(weight_text)
        if kind == "mul":  # support × maxsim^w
            return max(float(p["support"]) * max(0.0, float(p[signal])) ** weight for p in top_passages)
        return max((1 - weight) * float(p["support"]) + weight * float(p[signal]) for p in top_passages)

    variants = ["confidence", "support", "maxsim", "maxsim_idf"]
    for signal in ("maxsim", "maxsim_idf"):
        variants += [f"{signal}:add={w}" for w in (0.2, 0.4, 0.6)]
        variants += [f"{signal}:mul={w}" for w in (1, 2, 4, 8)]
    result: dict[str, Any] = {"top": top, "passages_measured": measured, "seconds": round(seconds, 1)}
    for split in splits:
        table: dict[str, Any] = {}
        for corpus in ("all", *aq.CORPORA):
            members = [r for r in rows if r["split"] == split and corpus in ("all", r["corpus"])]
            if not members:
                continue
            table[corpus] = {
                how: auroc(
                    [question_score(r, how) for r in members if r["answerable"]],
                    [question_score(r, how) for r in members if not r["answerable"]],
                )
                for how in variants
            }
        # Per-passage: does the signal tell a gold passage from a non-gold one among the top passages?
        gold = [p for r in rows if r["split"] == split for p in r["passages"][:top] if p.get("gold")]
        other = [p for r in rows if r["split"] == split for p in r["passages"][:top] if not p.get("gold")]
        table["passage_level"] = {
            key: auroc([float(p[key]) for p in gold], [float(p[key]) for p in other])
            for key in ("support", "maxsim", "maxsim_idf")
        }
        result[split] = table
    return result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="Run answer_quality with the support stage recorded.")
    rec.add_argument("--out", type=Path, required=True)
    rep = sub.add_parser("replay", help="Compute the signal on a recording; AUROC per corpus.")
    rep.add_argument("recording", type=Path)
    rep.add_argument("--top", type=int, default=3, help="Passages of highest support measured per question.")
    rep.add_argument("--split", default="tune", help="Comma-separated splits to score (tune only while tuning).")
    args, rest = parser.parse_known_args(argv)
    if args.command == "record":
        result = record(rest)
        args.out.write_text(json.dumps(result), encoding="utf-8")
        print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=2))
    else:
        print(json.dumps(replay(args.recording, args.top, args.split.split(",")), indent=2))


if __name__ == "__main__":
    main()
