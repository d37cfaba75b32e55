"""The one sentence splitter: the Evaluator's claims, the extractive synthesizer's quotes, the chunker's windows and
the entity extractor's contexts are all cut here, so a fix reaches all four.

It returns *spans* of the input (``sentence_spans``) or the text of those spans (``split_sentences``): every
character is kept, only the whitespace between two sentences falls away. A quotation shown to a user is therefore
exactly what the source says, closing quote and all.

A sentence ends after ``.``, ``!``, ``?`` or an ellipsis, together with the closing quotes, brackets and citation
markers that follow it (``call it "attention."``, ``(see above.)``, ``as shown.[12]``), when whitespace and a
capital letter or a digit come next (optionally behind an opening quote or bracket). Blank lines and a new line
that starts a list item or a heading always end one. A period does not end a sentence

* inside a number ("3.5") or after an abbreviation that never ends one ("e.g.", "i.e.", "Fig. 2", "Dr. Smith",
  "vs."); "No." and "p." only before a number ("No. 5");
* after an abbreviation that may end one ("et al.", "etc.", "Inc.", initials such as "U.S." or "J.") unless the
  next word usually starts a sentence ("... in the U.S. The study ..." splits, "U.S. Congress" does not); a
  capital after a lower-case content word is a name's last letter, not an initial ("cyclin B. Overexpression");
* inside a parenthesis, a bracket or a quotation that closes within ``INNER_LIMIT`` characters
  (``He asked "Why? Because." and left.`` is one sentence).

Deterministic and fast (one regular expression and a few checks per candidate): it runs over every chunk.
"""

from __future__ import annotations

import re

from researchcrew.text.terms import STOP_WORDS

INNER_LIMIT = 300  # a quotation or parenthesis longer than this is not held together (it may never close)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Abbreviations (lower case, without their final period) after which a period never ends a sentence.
_ALWAYS = _words(
    """e.g eg i.e ie vs cf viz approx ca fig figs eq eqs sec secs ref refs vol vols pp ch tab dr mr mrs ms prof st
    mt gen rev hon sgt capt lt col jan feb mar apr jun jul aug sep sept oct nov dec"""
)
# Abbreviations that are followed by a number ("No. 5", "p. 12"); elsewhere the period may end the sentence.
_BEFORE_NUMBER = _words("no nos p art")
# Abbreviations that may end a sentence: they do when the next word usually starts one.
_AMBIGUOUS = _words("al etc jr sr inc ltd co corp resp")
_SENTENCE_STARTERS = _words(
    """the a an this that these those it its we they he she i our their there here in on at for from to by with as
    after before during when while if however but and or so thus therefore hence moreover furthermore also
    although though because since such both each all some many most no not one other another what which who how
    why where yet still then finally first second third overall instead meanwhile similarly indeed additionally
    unlike despite using results my his her you your"""
)

_TERMINATOR = re.compile(
    r"""(?:[.!?]|…)+                                                   # . ! ? ... … (and runs of them)
    (?P<closers>(?:["'”’»)\]]|\[\d{1,4}(?:\s*[,–-]\s*\d{1,4})*\])*)    # closing quotes, brackets, [12] markers
    (?=\s)""",
    re.VERBOSE,
)
# A blank line, or a new line that opens a list item or a heading: always the end of a sentence.
_HARD_BREAK = re.compile(r"\n[ \t\r\f\v]*\n\s*|\n(?=[ \t]*(?:[-*+•>#]|\d{1,3}[.)]\s))")
_OPENERS = "\"'“‘«(["
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)$")
_DOTTED = re.compile(r"(?:[a-z]{1,3}\.)+[a-z]{1,3}")  # u.s, ph.d, a.m
_NEXT_WORD = re.compile(r"[A-Za-z]+")
_WORD_BEFORE_SPACE = re.compile(r"([A-Za-z]+)[ \t]+$")
_PAIRS = (("(", ")"), ("[", "]"), ("“", "”"))
_PAIR_CHARACTER = re.compile(r'[()\[\]“”"]')


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of ``text``, in order, without surrounding whitespace; never empty."""
    spans: list[tuple[int, int]] = []
    block_start = 0
    for brk in _HARD_BREAK.finditer(text):
        _block(text, block_start, brk.start(), spans)
        block_start = brk.end()
    _block(text, block_start, len(text), spans)
    return spans


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (see the module docstring), each exactly as it appears in ``text``."""
    return [text[start:end] for start, end in sentence_spans(text)]


def _block(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> None:
    """Sentences of text[start:end], a stretch without hard breaks, appended to ``spans``."""
    sentence = start
    pairs = _OpenPairs(text, start)
    for match in _TERMINATOR.finditer(text, start, end):
        stop = match.end()
        following = _skip_space(text, stop, end)
        if following >= end or not _starts_sentence(text, following, end):
            continue
        if _continues(text, match, following, end) or pairs.open_until(stop, end):
            continue
        _append(text, sentence, stop, spans)
        sentence = following
        pairs.restart(following)
    _append(text, sentence, end, spans)


def _append(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if start < end:
        spans.append((start, end))


def _skip_space(text: str, index: int, end: int) -> int:
    while index < end and text[index].isspace():
        index += 1
    return index


def _starts_sentence(text: str, index: int, end: int) -> bool:
    """Whether text[index:] looks like the start of a sentence: a capital or a digit, perhaps behind openers."""
    while index < end and text[index] in _OPENERS:
        index += 1
    return index < end and (text[index].isupper() or text[index].isdigit())


def _continues(text: str, match: re.Match[str], following: int, end: int) -> bool:
    """Whether a single period ends an abbreviation that the sentence continues after."""
    period = match.start()
    if match.end() - period != 1 or text[period] != ".":  # "!", "?", an ellipsis, or closers: a real end
        return False
    if period == 0 or not text[period - 1].isalpha():  # "3.", "(see above)." and the like
        return False
    if text[max(0, period - 7) : period].isalpha() and period >= 7:  # a word of 7+ letters: no abbreviation
        return False
    found = _WORD_BEFORE.search(text, max(0, period - 24), period)
    if found is None or (found.start() > 0 and text[found.start() - 1].isalnum()):
        return False
    word = found.group(1).lower()
    if word in _ALWAYS:
        return True
    nxt = following
    while nxt < end and text[nxt] in _OPENERS:
        nxt += 1
    if word in _BEFORE_NUMBER:
        return nxt < end and text[nxt].isdigit()
    initial = len(word) == 1 and found.group(1).isupper() and _may_be_initial(text, found.start())
    ambiguous = word in _AMBIGUOUS or initial or _DOTTED.fullmatch(word) is not None
    if word == "al" and not text[max(0, found.start() - 4) : found.start()].rstrip().lower().endswith("et"):
        ambiguous = False
    if not ambiguous:
        return False
    next_word = _NEXT_WORD.match(text, nxt, end)
    return next_word is None or next_word.group(0).lower() not in _SENTENCE_STARTERS


def _may_be_initial(text: str, start: int) -> bool:
    """Whether a capital letter with a period may be a name's initial ("by J. Smith", "Smith J. R."): not when a
    lower-case content word comes right before it ("cyclin B.", "vitamin D."), which makes it the end of a name."""
    before = _WORD_BEFORE_SPACE.search(text, max(0, start - 32), start)
    if before is None:
        return True
    word = before.group(1)
    return not word.islower() or word in STOP_WORDS


class _OpenPairs:
    """Parentheses, brackets and quotations a sentence leaves open, counted incrementally as it grows (linear in
    the text however many candidate ends a long sentence holds)."""

    def __init__(self, text: str, start: int) -> None:
        self.text = text
        self.restart(start)

    def restart(self, start: int) -> None:
        self.counted = start
        self.balance = [0] * len(_PAIRS)
        self.quotes = 0
        self.any_open = False

    def open_until(self, stop: int, end: int) -> bool:
        """Whether the sentence, up to ``stop``, leaves one open that closes within ``INNER_LIMIT`` after it."""
        text = self.text
        if _PAIR_CHARACTER.search(text, self.counted, stop) is not None:  # most sentences have none: skip counting
            segment = text[self.counted : stop]
            for index, (opener, closer) in enumerate(_PAIRS):
                self.balance[index] += segment.count(opener) - segment.count(closer)
            self.quotes += segment.count('"')
            self.any_open = self.quotes % 2 == 1 or any(balance > 0 for balance in self.balance)
        self.counted = stop
        if not self.any_open:
            return False
        horizon = min(end, stop + INNER_LIMIT)
        if self.quotes % 2 == 1 and text.find('"', stop, horizon) >= 0:
            return True
        return any(
            balance > 0 and text.find(closer, stop, horizon) >= 0
            for balance, (_, closer) in zip(self.balance, _PAIRS, strict=True)
        )
