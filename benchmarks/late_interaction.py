"""Issue 20: does a late-interaction (ColBERT-style MaxSim) signal from the packaged MiniLM's *token* embeddings
separate passages that state a question or claim from passages of related work, better than today's support?

    .venv/bin/python benchmarks/late_interaction.py record --split tune --out /tmp/li-tune.json
    .venv/bin/python benchmarks/late_interaction.py replay /tmp/li-tune.json

``record`` runs ``answer_quality.py``'s questions through the pipeline (same settings) and keeps, per question,
every passage the support stage measured (title, text, support, whether it is a gold passage) with the answer's
confidence and verdict. ``replay`` computes, for the ``--top`` passages of highest support, the MaxSim of the
question's content word pieces against the passage's (``pipeline/_late.py``) and replays the support with late
interaction on the k = 1..top best passages over a grid of weight / floor / full (k = 0: the support as recorded):
AUROC of the best support per corpus, and answered / abstained at ``answer_min_support`` (0.45). Tune only on
``tune``. ``replay --pooling mean,q25,min,...`` compares ways of pooling the question's per-piece best cosines
(``aggregate``) over a wider grid, the 5 best settings of each (benchmarks/README.md: none beat the mean).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

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
def measure(rows: list[dict[str, Any]], top: int) -> float:
    """MaxSim (``pipeline/_late.py``) of each row's question against its ``top`` passages of highest support, as
    ``passage["maxsim"]``; returns the CPU seconds it took."""
    from researchcrew.embedding.embedder import default_cache_dir, get_embedder
    from researchcrew.embedding.tokens import TokenEmbedder
    from researchcrew.pipeline._late import content_pieces, max_sim
    from researchcrew.settings import EmbeddingSettings

    embedder = get_embedder(EmbeddingSettings(cache_dir=default_cache_dir()))
    assert isinstance(embedder, TokenEmbedder)
    started = time.process_time()
    for row in rows:
        chosen = row["passages"][:top]
        texts = [row["text"], *(f"{p['title']}\n{p['text']}"[:1_000] for p in chosen)]  # as _support._passages
        asked, *read = embedder.embed_tokens(texts)
        mask = np.asarray(content_pieces(asked.tokens), dtype=bool)
        words = _word_of_piece(asked.tokens)
        for passage, tokens in zip(chosen, read, strict=True):
            passage["maxsim"] = max_sim(asked, tokens)
            if mask.any() and len(tokens.vectors):
                best = (asked.vectors[mask] @ tokens.vectors.T).max(axis=1)
                passage["piece_best"] = [float(b) for b in best]
                passage["piece_word"] = [w for w, m in zip(words, mask, strict=True) if m]
            else:
                passage["piece_best"], passage["piece_word"] = [], []
    return time.process_time() - started


def _word_of_piece(tokens: list[str]) -> list[int]:
    """The index of the whole word each word piece belongs to ("pre", "##ec" -> the same word)."""
    word, owners = -1, []
    for token in tokens:
        if not (token.startswith("##") and word >= 0):
            word += 1
        owners.append(word)
    return owners


def aggregate(passage: dict[str, Any], how: str) -> float:
    """The passage's late score by one of several ways of pooling the question's per-piece best cosines."""
    best = np.asarray(passage.get("piece_best") or [0.0], dtype=float)
    if how == "mean":
        return float(passage["maxsim"])
    if how == "min":
        return float(best.min())
    if how.startswith("q"):  # a low quantile: the question's least matched terms decide
        return float(np.quantile(best, int(how[1:]) / 100))
    if how.startswith("low"):  # mean of the n least matched pieces
        n = int(how[3:])
        return float(np.sort(best)[:n].mean())
    if how.startswith("word"):  # pieces pooled into whole words first (word-mean or word-min), then mean / min
        owners = passage.get("piece_word") or [0]
        per_word: dict[int, list[float]] = {}
        for value, owner in zip(best, owners, strict=False):
            per_word.setdefault(owner, []).append(float(value))
        pooled = np.asarray([min(v) if "min" in how[4:7] else sum(v) / len(v) for v in per_word.values()])
        return float(pooled.min() if how.endswith("lo") else pooled.mean())
    raise ValueError(how)


def rescored(
    row: dict[str, Any], k: int, weight: float, floor: float, full: float, how: str = "mean"
) -> tuple[float, bool]:
    """The question's best support with late interaction on its ``k`` best passages (the rest capped at the least
    of those), and whether the best passage is gold — what ``EmbeddingSupport._read_closely`` does."""
    from researchcrew.pipeline._late import late_support

    passages = row["passages"]
    if not passages:
        return 0.0, False
    if k == 0:
        return float(passages[0]["support"]), bool(passages[0].get("gold"))
    read = [
        (late_support(float(p["support"]), aggregate(p, how), weight=weight, floor=floor, full=full), p)
        for p in passages[:k]
    ]
    ceiling = min(score for score, _ in read)
    rest = [(min(float(p["support"]), ceiling), p) for p in passages[k:]]
    score, best = max(read + rest, key=lambda pair: pair[0])
    return score, bool(best.get("gold"))


def evaluate(
    rows: list[dict[str, Any]], k: int, weight: float, floor: float, full: float, how: str = "mean"
) -> dict[str, Any]:
    scored = [(row, *rescored(row, k, weight, floor, full, how)) for row in rows]
    result: dict[str, Any] = {}
    for corpus in ("all", *aq.CORPORA):
        members = [item for item in scored if corpus in ("all", item[0]["corpus"])]
        result[corpus] = aq.auroc(
            [s for r, s, _ in members if r["answerable"]], [s for r, s, _ in members if not r["answerable"]]
        )
    answerable = [item for item in scored if item[0]["answerable"]]
    unanswerable = [item for item in scored if not item[0]["answerable"]]
    threshold = 0.45  # answer_min_support
    result["answered"] = aq._rate(sum(s >= threshold for _, s, _ in answerable), len(answerable))
    result["best_is_gold"] = aq._rate(sum(s >= threshold and g for _, s, g in answerable), len(answerable))
    result["abstained"] = aq._rate(sum(s < threshold for _, s, _ in unanswerable), len(unanswerable))
    return result


def replay(path: Path, top: int, splits: Sequence[str]) -> dict[str, Any]:
    rows = [row for row in json.loads(path.read_text())["rows"] if row["split"] in splits]
    cpu_s = measure(rows, top)
    result: dict[str, Any] = {"questions": len(rows), "top": top, "cpu_s": round(cpu_s, 1)}
    grid = [(0, 0.0, 0.6, 0.8)] + [
        (k, weight, floor, full)
        for k in range(1, top + 1)
        for weight in (0.3, 0.5, 0.7, 1.0)
        for floor in (0.4, 0.5, 0.6)
        for full in (0.7, 0.8, 0.9)
    ]
    for split in splits:
        members = [row for row in rows if row["split"] == split]
        result[split] = {f"k={k} w={w} floor={lo} full={hi}": evaluate(members, k, w, lo, hi) for k, w, lo, hi in grid}
    return result


def replay_pooling(path: Path, top: int, splits: Sequence[str], poolings: Sequence[str]) -> dict[str, Any]:
    """Each way of pooling the per-piece cosines (``aggregate``) over a wide grid: the 5 settings of highest pooled
    AUROC per split, with their per-corpus AUROC and answered / abstained at 0.45."""
    rows = [row for row in json.loads(path.read_text())["rows"] if row["split"] in splits]
    measure(rows, top)
    grid = [
        (k, weight, floor, full)
        for k in range(1, top + 1)
        for weight in (0.3, 0.5, 0.7, 1.0)
        for floor in (0.2, 0.3, 0.4, 0.5, 0.6)
        for full in (0.6, 0.7, 0.8, 0.9)
        if full > floor
    ]
    result: dict[str, Any] = {}
    for split in splits:
        members = [row for row in rows if row["split"] == split]
        result[split] = {"support": evaluate(members, 0, 0.0, 0.6, 0.8)}
        for how in poolings:
            scored = [((k, w, lo, hi), evaluate(members, k, w, lo, hi, how)) for k, w, lo, hi in grid]
            scored.sort(key=lambda item: -float(item[1]["all"] or 0))
            result[split][how] = {f"k={k} w={w} floor={lo} full={hi}": r for (k, w, lo, hi), r in scored[:5]}
            result[split][how]["chosen k=3 w=0.5 floor=0.6 full=0.8"] = evaluate(members, 3, 0.5, 0.6, 0.8, how)
    return result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="Run answer_quality with the support stage recorded.")
    rec.add_argument("--out", type=Path, required=True)
    rep = sub.add_parser("replay", help="Compute the signal on a recording; AUROC per corpus.")
    rep.add_argument("recording", type=Path)
    rep.add_argument("--top", type=int, default=3, help="At most this many passages read per question (k = 1..top).")
    rep.add_argument("--split", default="tune", help="Comma-separated splits to score (tune only while tuning).")
    rep.add_argument("--pooling", default="", help="Comma-separated poolings (mean, min, q25, low3, wordmean, ...).")
    args, rest = parser.parse_known_args(argv)
    if args.command == "record":
        result = record(rest)
        args.out.write_text(json.dumps(result), encoding="utf-8")
        print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=2))
    elif args.pooling:
        print(
            json.dumps(
                replay_pooling(args.recording, args.top, args.split.split(","), args.pooling.split(",")), indent=2
            )
        )
    else:
        print(json.dumps(replay(args.recording, args.top, args.split.split(",")), indent=2))


if __name__ == "__main__":
    main()
