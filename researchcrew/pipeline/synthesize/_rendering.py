"""The answer text (Markdown) rendered from validated sections.

The text is always rebuilt from the structured sections, never kept from a model's prose, so every ``[n]`` in it
is a marker that citation validation produced. Extractive answers open with a line saying what they are and list
their quoted sentences as bullets, so nobody mistakes them for generated prose.
"""

from __future__ import annotations

from collections.abc import Sequence

from researchcrew.contracts.synthesizer import AnswerKind, AnswerSection, Claim

EXTRACTIVE_NOTICE = (
    "_Extractive answer: the sentences below are quoted from the sources cited; no language model wrote them._"
)
UNSUPPORTED_NOTE = "(unsupported: no cited evidence)"


def format_markers(numbers: Sequence[int]) -> str:
    return "[" + ", ".join(str(number) for number in numbers) + "]" if numbers else ""


def render_claim(claim: Claim) -> str:
    """The claim with its markers placed before its closing punctuation: ``Water boils at 100 °C [1, 2].``"""
    if claim.flagged or not claim.citations:
        return f"{claim.text} {UNSUPPORTED_NOTE}"
    marker = format_markers(claim.citations)
    text = claim.text
    if text and text[-1] in ".!?" and not text.endswith("..."):
        return f"{text[:-1]} {marker}{text[-1]}"
    return f"{text} {marker}"


def render_answer(sections: Sequence[AnswerSection], *, answer_kind: AnswerKind) -> str:
    """Markdown for the answer: ``## heading`` per titled section, an italic perspective line where one is set,
    claims as a paragraph (generated) or as bullets (extractive)."""
    return "".join(answer_pieces(sections, answer_kind=answer_kind))


def answer_pieces(sections: Sequence[AnswerSection], *, answer_kind: AnswerKind) -> list[str]:
    """The answer's Markdown in the pieces a reader sees appear: the extractive notice, then one piece per section.
    Joined they are exactly ``render_answer``'s text (what progress events stream, section by section)."""
    extractive = answer_kind == "extractive"
    pieces: list[list[str]] = [[EXTRACTIVE_NOTICE]] if extractive else []
    for section in sections:
        blocks: list[str] = []
        if section.heading:
            blocks.append(f"## {section.heading}")
        if section.perspective:
            blocks.append(f"_Perspective: {section.perspective}_")
        rendered = [render_claim(claim) for claim in section.claims]
        blocks.append("\n".join(f"- {line}" for line in rendered) if extractive else " ".join(rendered))
        pieces.append(blocks)
    texts = ["\n\n".join(blocks) for blocks in pieces]
    return [text + "\n\n" for text in texts[:-1]] + texts[-1:]


def answer_words(sections: Sequence[AnswerSection]) -> int:
    """Words of the claims themselves (markers and headings not counted): what length bounds apply to."""
    return sum(len(claim.text.split()) for section in sections for claim in section.claims)
