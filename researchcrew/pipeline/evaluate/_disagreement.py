"""Near-duplicates that disagree: the same passage with another number, the other direction, or a negation.

Deduplication removes a chunk whose word shingles are mostly contained in a better one. Two passages that say the
same thing except "reduced risk by 30%" / "by 5%", "increased" / "decreased", or "is" / "is not" have that overlap,
yet dropping either would silently pick a side of a disagreement. So before a chunk is removed or penalised as a
repeat, the two texts are aligned word by word (``difflib``) and every *aligned substitution* is checked:

* **numeric** — a number replaced by another (units normalised with ``quantities``: "30%" vs "30 percent" or
  "20 ms" vs "0.02 s" agree; "30%" vs "5%" or "20 ms" vs "20 s" do not). Citation markers ("[12]") are ignored;
* **antonym** — a word replaced by its opposite ("increased"/"decreased", "higher"/"lower", "effective"/
  "ineffective", "supports"/"refutes", ...): a polarity disagreement;
* **negation** — a negation cue ("not", "no", "never", "n't", "fails to", ...) present in the changed words of one
  side only.

Only short substitutions count (at most ``MAX_SUBSTITUTION`` tokens either side), not whole different sentences:
within such a replacement the rest of the claim is the same, so a changed number or direction is a contradiction of
that claim, not a different claim. ``disagreement`` returns the ``ContradictionRecord`` for the pair (the sentences
holding the change, what changed), and the Evaluator keeps both chunks and reports it (``evaluator``: the order is
*disagreement check, then dedup*, so a disagreement always survives deduplication).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from researchcrew.contracts.chunks import ContextChunk
from researchcrew.contracts.evaluator import ContradictionRecord
from researchcrew.text.quantities import find_quantities, relative_gap
from researchcrew.text.sentences import split_sentences
from researchcrew.text.terms import QUERY_STOP_WORDS

_TOKEN = re.compile(r"\[\s*\d+(?:\s*[,;–-]\s*\d+)*\s*\]|[-+−]?\d[\d,]*(?:\.\d+)?(?:\s?%|\s?[A-Za-zµμ°]+\b)?|[\w'’]+")
_CITATION = re.compile(r"^\[.*\]$")
_DIGIT = re.compile(r"\d")
_NEGATION_TEXT = """not no never none nor neither cannot without lack lacks lacking fail fails failed failing n't don't
    doesn't didn't isn't aren't wasn't weren't won't can't couldn't shouldn't hasn't haven't"""
_NEGATIONS = frozenset(_NEGATION_TEXT.split())
_PAIRS = """increase decrease|increased decreased|increases decreases|increasing decreasing|higher lower|
    more less|more fewer|rise fall|rises falls|rose fell|improve worsen|improves worsens|improved worsened|
    improve degrade|improves degrades|improved degraded|positive negative|better worse|best worst|larger smaller|
    bigger smaller|faster slower|greater smaller|greater lesser|gain loss|gains losses|accept reject|accepted rejected|
    support refute|supports refutes|supported refuted|confirm refute|confirms refutes|confirmed refuted|above below|
    true false|success failure|succeeds fails|succeeded failed|strong weak|stronger weaker|high low|many few|most least|
    maximum minimum|present absent|benefit harm|beneficial harmful|pass fail|passes fails|passed failed|up down|
    safe dangerous|reduce increase|reduces increases|reduced increased|reducing increasing|lowers raises|
    lowered raised|helps hurts|helped hurt|outperforms underperforms|outperformed underperformed|correct incorrect|
    valid invalid|effective ineffective|significant insignificant|safe unsafe|consistent inconsistent|stable unstable"""
_ANTONYMS = frozenset(
    frozenset(pair.split()) for pair in (part.strip() for part in _PAIRS.split("|")) if len(pair.split()) == 2
)
_NEGATING_PREFIXES = ("un", "in", "im", "ir", "il", "non", "non-", "dis")
NEAR_DUPLICATE_CONFIDENCE = 0.8
# Longest change (in tokens, either side) still read as "the same claim with one thing changed". Longer replaced
# spans are other sentences (an earlier answer quoting several passages), where a number on each side means nothing.
MAX_SUBSTITUTION = 4


@dataclass(frozen=True)
class _Change:
    kind: str  # "numeric" or "polarity"
    left: str
    right: str
    left_at: int  # token index of the change in each text
    right_at: int


def tokens(text: str) -> list[str]:
    """Lower-cased words and numbers; a number keeps its unit ("30%", "20 ms") when the word after it is one."""
    result: list[str] = []
    for token in _TOKEN.findall(text):
        token = token.replace("’", "'")
        number, _, word = token.partition(" ")
        if word and not _is_unit(token):
            result += [number.lower(), word.lower()]  # "5 participants": a number, then a word
        else:
            result.append(token if _DIGIT.search(token) else token.lower())
    return result


def _is_unit(token: str) -> bool:
    found = find_quantities(token)
    return bool(found) and found[0].dimension != "number"


def _quantity(token: str) -> tuple[str, float, float] | None:
    found = find_quantities(token)
    if found:
        q = found[0]
        return q.dimension, q.low, q.high
    try:
        value = float(token.replace(",", "").replace("−", "-"))
    except ValueError:
        return None
    return "number", value, value


def _numbers_differ(left: list[str], right: list[str], tolerance: float) -> tuple[str, str] | None:
    """The first pair of numbers the substitution changed, when they really differ (after unit normalisation)."""
    lefts = [t for t in left if _DIGIT.search(t) and not _CITATION.match(t)]
    rights = [t for t in right if _DIGIT.search(t) and not _CITATION.match(t)]
    for a, b in zip(lefts, rights, strict=False):
        qa, qb = _quantity(a), _quantity(b)
        if qa is None or qb is None:
            if a != b:
                return a, b
            continue
        if qa[0] != qb[0]:
            return a, b  # "20 ms" vs "20 GB": not the same thing said twice
        from researchcrew.text.quantities import Quantity

        gap = relative_gap(Quantity(qa[1], qa[0], qa[1], qa[2], 0, 0, a), Quantity(qb[1], qb[0], qb[1], qb[2], 0, 0, b))
        if gap > tolerance:
            return a, b
    return None


def _opposite(a: str, b: str) -> bool:
    if frozenset((a, b)) in _ANTONYMS:
        return True
    longer, shorter = (a, b) if len(a) > len(b) else (b, a)
    return len(shorter) >= 4 and any(longer == prefix + shorter for prefix in _NEGATING_PREFIXES)


def _changes(a: list[str], b: list[str], tolerance: float) -> list[_Change]:
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    found: list[_Change] = []
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            continue
        left, right = a[a0:a1], b[b0:b1]
        if max(len(left), len(right)) > MAX_SUBSTITUTION:
            continue  # a different passage, not the same claim with one thing changed
        if op == "replace":
            numbers = _numbers_differ(left, right, tolerance)
            if numbers is not None:
                found.append(_Change("numeric", numbers[0], numbers[1], a0, b0))
                continue
            opposite = next(((x, y) for x in left for y in right if _opposite(x, y)), None)
            if opposite is not None:
                found.append(_Change("polarity", opposite[0], opposite[1], a0, b0))
                continue
        negated_left = any(t in _NEGATIONS or t.endswith("n't") for t in left)
        negated_right = any(t in _NEGATIONS or t.endswith("n't") for t in right)
        if negated_left != negated_right:
            cue = next(t for t in (left if negated_left else right) if t in _NEGATIONS or t.endswith("n't"))
            found.append(
                _Change("polarity", cue if negated_left else "(affirms)", cue if negated_right else "(affirms)", a0, b0)
            )
    return found


def _sentence_at(text: str, token_index: int) -> str:
    """The sentence of ``text`` that holds its ``token_index``-th token."""
    seen = 0
    sentences = split_sentences(text) or [text]
    for sentence in sentences:
        count = len(tokens(sentence))
        if token_index < seen + count:
            return sentence.strip()
        seen += count
    return sentences[-1].strip()


def disagreement(a: ContextChunk, b: ContextChunk, *, tolerance: float = 0.05) -> ContradictionRecord | None:
    """The contradiction between two largely identical chunks, or None when they only differ in wording."""
    tokens_a, tokens_b = tokens(a.content), tokens(b.content)
    changes = _changes(tokens_a, tokens_b, tolerance)
    if not changes:
        return None
    first = changes[0]
    window = tokens_a[max(0, first.left_at - 5) : first.left_at]
    subject = " ".join(t for t in window if not _DIGIT.search(t) and t not in QUERY_STOP_WORDS and len(t) > 2) or None
    what = "; ".join(f"{change.left} vs {change.right}" for change in changes[:3])
    return ContradictionRecord(
        chunk_id_a=a.chunk_id,
        chunk_id_b=b.chunk_id,
        claim_a=_sentence_at(a.content, first.left_at),
        claim_b=_sentence_at(b.content, first.right_at),
        kind="numeric" if first.kind == "numeric" else "polarity",
        subject=subject,
        confidence=NEAR_DUPLICATE_CONFIDENCE,
        explanation=f"near-identical passages disagree: {what}",
    )


__all__ = ["NEAR_DUPLICATE_CONFIDENCE", "disagreement", "tokens"]
