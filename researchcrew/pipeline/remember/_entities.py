"""Entity and relationship extraction from one exchange (question + answer), for the memory's entity graph.

``EntityExtractor`` is the seam: ``await extractor.extract([question, answer]) -> Extraction``.

* ``RuleBasedExtractor`` needs no model and is deterministic. It finds arXiv ids (``2104.12255``,
  ``hep-th/9901001``), DOIs, acronyms (RAG, NDCG@10, LLMs → LLM), names with digits (GPT-4, ResNet-50), CamelCase
  names (SciFact, RoBERTa), multi-word proper names (Retrieval-Augmented Generation, Geoffrey Hinton) and acronym
  definitions ("Dense Passage Retrieval (DPR)"). Capitalisation that only marks a sentence start or a heading is
  not taken as evidence of a name. Types come from the name's own words, from the words around it ("the SciFact
  dataset", "Hinton et al.") and from small lists of well-known metrics and model families. Relations: entities
  that share a sentence co-occur (symmetric; confidence grows with the number of shared sentences) and an acronym
  is the ``abbreviation_of`` its definition.
* ``LLMEntityExtractor`` (``_entities_llm.py``) asks an LLM for typed entities and relations and falls back to the
  rule-based result on any failure.

Mentions and relations are the store's input models (``records.EntityMention``/``EntityRelation``); the store
keeps relations in both directions and merges repeats, so each relation is emitted once here.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from researchcrew.memory.records import EntityMention, EntityRelation
from researchcrew.pipeline.remember import _entity_lexicon as lexicon
from researchcrew.text.sentences import split_sentences
from researchcrew.text.terms import STOP_WORDS

CO_OCCURS = "co_occurs_with"
ABBREVIATION_OF = "abbreviation_of"
MAX_ENTITIES = 60  # per exchange: the graph should hold what the exchange is about, not every token
MAX_PER_SENTENCE = 8  # co-occurrence pairs grow quadratically; long enumerations add little
CONTEXT_CHARS = 240

_MARKDOWN_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_CITATION = re.compile(r"\[\d+(?:\s*[,–-]\s*\d+)*\]")
_EMPHASIS = re.compile(r"(\*\*|__|\*|`)")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")
_HEADING = re.compile(r"^\s*#{1,6}\s+")
_DOI = re.compile(r"\b10\.\d{4,9}/[^\s\"<>]+")
_ARXIV_NEW = re.compile(r"(?<![\w./])(?:arXiv:\s*)?(\d{2})(\d{2})\.(\d{4,5})(?:v\d+)?(?![\w/])", re.IGNORECASE)
_ARXIV_URL = re.compile(
    r"arxiv\.org/(?:abs|pdf)/((?:\d{4}\.\d{4,5})|(?:[a-z-]+(?:\.[A-Z]{2})?/\d{7}))(?:v\d+)?", re.IGNORECASE
)
_ARXIV_OLD = re.compile(r"(?<![\w./-])([a-z]+(?:-[a-z]+)?)(?:\.[A-Z]{2})?/(\d{2})(\d{2})(\d{3})(?:v\d+)?\b")
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-.'][A-Za-z0-9]+)*(?:@\d+)?")

EntityType = Literal["person", "organization", "dataset", "model", "method", "metric", "paper", "concept"]


@dataclass
class Extraction:
    """What an extractor found in one exchange."""

    mentions: list[EntityMention] = field(default_factory=list)
    relations: list[EntityRelation] = field(default_factory=list)
    method: Literal["rules", "llm"] = "rules"


class EntityExtractor(Protocol):
    async def extract(self, texts: Sequence[str]) -> Extraction:
        """Entities and relations in ``texts`` (e.g. [question, answer]); sentences never span two texts."""
        ...


@dataclass
class _Found:
    name: str
    type: EntityType
    confidence: float
    start: int  # offset in the sentence


@dataclass
class _Entity:
    name: str
    type: EntityType
    confidence: float
    context: str
    mentions: int = 1


def normalize(name: str) -> str:
    """The key under which two spellings count as one entity ("Transformer-XL" = "transformer xl")."""
    return re.sub(r"[\s\-_]+", " ", name.casefold()).strip()


def clean_text(text: str) -> str:
    """Markdown and citation markers removed; link targets kept (they may hold an arXiv id or a DOI)."""
    text = re.sub(r"```.*?```", " ", text, flags=re.DOTALL)
    text = _MARKDOWN_LINK.sub(r"\1 (\2)", text)
    text = _CITATION.sub("", text)
    return _EMPHASIS.sub("", text)


def sentences(text: str) -> list[tuple[str, bool]]:
    """(sentence, is_heading) pairs. Lines are boundaries (bullets, headings, paragraphs); within a line, sentences
    are cut by the one splitter (``text.sentences``: not after "et al." or "e.g.", nor inside an arXiv id)."""
    result: list[tuple[str, bool]] = []
    for raw_line in clean_text(text).splitlines():
        heading = bool(_HEADING.match(raw_line))
        line = _BULLET.sub("", _HEADING.sub("", raw_line)).strip()
        result.extend((sentence, heading) for sentence in split_sentences(line))
    return result


class RuleBasedExtractor:
    """Deterministic extraction; see the module docstring for what it finds."""

    async def extract(self, texts: Sequence[str]) -> Extraction:
        # Regexes over a long answer take milliseconds of CPU: keep them off the event loop.
        return await asyncio.to_thread(self.extract_sync, list(texts))

    def extract_sync(self, texts: Sequence[str]) -> Extraction:
        entities: dict[str, _Entity] = {}
        pair_counts: dict[tuple[str, str], int] = {}
        abbreviations: dict[tuple[str, str], float] = {}
        for text in texts:
            for sentence, heading in sentences(text):
                found = find_entities(sentence, heading=heading)
                for acronym, expansion in find_definitions(sentence):
                    # Names inside a definition's expansion are pieces of it ("Transformers" in BERT's).
                    found = [f for f in found if not _within(f, expansion)] + [expansion]
                    abbreviations[(normalize(acronym.name), normalize(expansion.name))] = 0.9
                keys: list[str] = []
                for item in found:
                    key = normalize(item.name)
                    _merge(entities, key, item, sentence)
                    if key not in keys:
                        keys.append(key)
                ranked = sorted(keys, key=lambda k: -entities[k].confidence)[:MAX_PER_SENTENCE]
                for i, a in enumerate(ranked):
                    for b in ranked[i + 1 :]:
                        pair = (a, b) if a < b else (b, a)
                        pair_counts[pair] = pair_counts.get(pair, 0) + 1
        _type_acronyms_from_definitions(entities, abbreviations)
        kept = dict(sorted(entities.items(), key=lambda kv: -kv[1].confidence)[:MAX_ENTITIES])
        mentions = [
            EntityMention(name=e.name, type=e.type, confidence=round(_combined(e), 4), context=e.context)
            for e in kept.values()
        ]
        relations = [
            EntityRelation(source=kept[a].name, target=kept[b].name, relation=ABBREVIATION_OF, confidence=conf)
            for (a, b), conf in abbreviations.items()
            if a in kept and b in kept and a != b
        ]
        defined = {tuple(sorted(pair)) for pair in abbreviations}
        for (a, b), count in pair_counts.items():
            if a in kept and b in kept and (a, b) not in defined:
                confidence = min(_combined(kept[a]), _combined(kept[b])) * (1 - 0.5**count)
                relations.append(
                    EntityRelation(
                        source=kept[a].name,
                        target=kept[b].name,
                        relation=CO_OCCURS,
                        confidence=round(confidence, 4),
                        symmetric=True,
                    )
                )
        return Extraction(mentions=mentions, relations=relations, method="rules")


def _within(item: _Found, expansion: _Found) -> bool:
    end = expansion.start + len(expansion.name)
    return expansion.start <= item.start and item.start + len(item.name) <= end and item.name != expansion.name


def _combined(entity: _Entity) -> float:
    """Each further mention in the same exchange adds a little certainty."""
    return min(0.99, entity.confidence + 0.05 * (entity.mentions - 1))


def _merge(entities: dict[str, _Entity], key: str, item: _Found, sentence: str) -> None:
    current = entities.get(key)
    if current is None:
        entities[key] = _Entity(item.name, item.type, item.confidence, sentence[:CONTEXT_CHARS])
        return
    current.mentions += 1
    if item.confidence > current.confidence:
        current.confidence = item.confidence
        if item.type != "concept":
            current.type = item.type
    elif current.type == "concept" and item.type != "concept":
        current.type = item.type


def _type_acronyms_from_definitions(entities: dict[str, _Entity], abbreviations: dict[tuple[str, str], float]) -> None:
    for acronym, expansion in abbreviations:
        a, e = entities.get(acronym), entities.get(expansion)
        if a is None or e is None:
            continue
        a.confidence = max(a.confidence, 0.9)
        if a.type == "concept":
            a.type = e.type
        elif e.type == "concept":
            e.type = a.type


# ---- one sentence ---------------------------------------------------------------------------------------------


def find_entities(sentence: str, *, heading: bool = False) -> list[_Found]:
    """Every entity in one sentence, left to right. Identifiers first; then names from the word tokens."""
    found: list[_Found] = []
    taken: list[tuple[int, int]] = []
    for match in _DOI.finditer(sentence):
        doi = _strip_trailing(match.group(0))
        found.append(_Found(doi, "paper", 0.95, match.start()))
        taken.append((match.start(), match.start() + len(doi)))
    for match in _ARXIV_URL.finditer(sentence):
        found.append(_Found(match.group(1), "paper", 0.95, match.start(1)))
        taken.append(match.span())
    for match in _ARXIV_NEW.finditer(sentence):
        if _overlaps(match.span(), taken) or not 1 <= int(match.group(2)) <= 12:
            continue
        found.append(_Found(f"{match.group(1)}{match.group(2)}.{match.group(3)}", "paper", 0.95, match.start()))
        taken.append(match.span())
    for match in _ARXIV_OLD.finditer(sentence):
        if _overlaps(match.span(), taken) or match.group(1) not in lexicon.ARXIV_ARCHIVES:
            continue
        if not 1 <= int(match.group(3)) <= 12:
            continue
        found.append(_Found(re.sub(r"v\d+$", "", match.group(0)), "paper", 0.95, match.start()))
        taken.append(match.span())
    tokens = [m for m in _TOKEN.finditer(sentence) if not _overlaps(m.span(), taken)]
    found.extend(_names(sentence, tokens, heading=heading, shouting=_shouting(tokens)))
    return sorted(found, key=lambda f: f.start)


def _strip_trailing(identifier: str) -> str:
    identifier = identifier.rstrip(".,;:")
    while identifier.endswith(")") and identifier.count("(") < identifier.count(")"):
        identifier = identifier[:-1].rstrip(".,;:")
    return identifier


def _overlaps(span: tuple[int, int], taken: Iterable[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in taken)


def _shape(token: str) -> str:
    """acronym / digits / camel / title / lower: what a token's capitalisation says about it."""
    core = token.split("@")[0]
    letters = [c for c in core if c.isalpha()]
    uppers = sum(c.isupper() for c in letters)
    if any(c.isdigit() for c in core) and uppers and core[0].isalpha():
        return "digits"
    head, *rest = core.split("-")
    if rest and head[:1].isupper() and head[1:].islower():  # "Retrieval-Augmented", "Transformer-XL", "Fine-tuning"
        return "title"
    if uppers >= 2 and uppers == len(letters):
        return "acronym"
    if uppers >= 2 or (letters and letters[0].islower() and uppers):
        return "camel"
    if core[0].isupper():
        return "title"
    return "lower"


def _shouting(tokens: Sequence[re.Match[str]]) -> bool:
    """A sentence written mostly in capitals: its all-caps words are not acronyms."""
    words = [t.group(0) for t in tokens if t.group(0).isalpha()]
    return len(words) >= 3 and sum(w.isupper() for w in words) / len(words) > 0.6


def _names(sentence: str, tokens: list[re.Match[str]], *, heading: bool, shouting: bool = False) -> list[_Found]:
    found: list[_Found] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        shape = _shape(token.group(0))
        if shape == "acronym" and shouting:
            i += 1
            continue
        if shape in ("acronym", "digits", "camel"):
            item = _standalone(sentence, tokens, i, shape)
            if item is not None:
                found.append(item)
            i += 1
            continue
        if shape != "title":
            i += 1
            continue
        j = i + 1  # grow a run of Title-case words, allowing "of"/"for"/"van" between them
        while j < len(tokens) and _adjacent(sentence, tokens[j - 1], tokens[j]):
            shape_j = _shape(tokens[j].group(0))
            after = tokens[j + 1] if j + 1 < len(tokens) and _adjacent(sentence, tokens[j], tokens[j + 1]) else None
            after_shape = _shape(after.group(0)) if after is not None else None
            if shape_j == "title":
                j += 1
            elif shape_j == "acronym" and after_shape == "title" and _has_name(tokens[i:j]):
                j += 1  # "Google AI Language"
            elif tokens[j].group(0) in lexicon.NAME_CONNECTORS and (
                after_shape == "title" or (after_shape == "acronym" and _has_name(tokens[i:j]))
            ):
                j += 2  # "University of Washington", "Allen Institute for AI"
            else:
                break
        item = _title_run(sentence, tokens[i:j], heading=heading)
        if item is not None:
            found.append(item)
        i = j
    return found


def _adjacent(sentence: str, left: re.Match[str], right: re.Match[str]) -> bool:
    """Only spaces between two tokens: punctuation ends a name."""
    return not sentence[left.end() : right.start()].strip()


def _has_name(run: Sequence[re.Match[str]]) -> bool:
    return any(m.group(0).casefold() not in lexicon.COMMON for m in run)


def _standalone(sentence: str, tokens: list[re.Match[str]], i: int, shape: str) -> _Found | None:
    token = tokens[i].group(0)
    name = token
    if shape == "camel" and len(token) > 2 and token[:-1].isupper() and token.endswith("s"):  # "LLMs" → "LLM"
        name, shape = token[:-1], "acronym"
    core = name.split("@")[0]
    if shape == "acronym" and (core in lexicon.NOT_ACRONYMS or (len(core) > 6 and core not in lexicon.KNOWN_CAPS)):
        return None  # "SUPPORTS", "IMPORTANT": long all-caps words are emphasis or labels, not acronyms
    kind = _context_type(sentence, tokens, i, i + 1)
    base = {"acronym": 0.7, "digits": 0.85, "camel": 0.75}[shape]
    if kind is None:
        kind = _known_type(name, shape)
    else:
        base += 0.1
    return _Found(name, kind or "concept", min(base, 0.95), tokens[i].start())


def _known_type(name: str, shape: str) -> EntityType | None:
    core = name.split("@")[0]
    if "@" in name or core.upper() in lexicon.METRICS:
        return "metric"
    if core.upper() in lexicon.METHOD_NAMES:
        return "method"
    if core.casefold() in lexicon.DATASET_WORDS:
        return "dataset"
    family = re.split(r"[-\d.]", core, maxsplit=1)[0].upper()
    if {core.upper(), family} & lexicon.MODEL_FAMILIES or any(core.upper().endswith(s) for s in lexicon.MODEL_SUFFIXES):
        return "model"
    parts = {p.casefold() for p in re.findall(r"[A-Z][a-z]+|[a-z]+", core)}  # "BooksCorpus" → books, corpus
    if parts & lexicon.DATASET_WORDS:
        return "dataset"
    if shape == "digits" and any(c.islower() for c in core):
        return "model"  # ResNet-50, Llama-2-7b
    return None


def _title_run(sentence: str, run: list[re.Match[str]], *, heading: bool) -> _Found | None:
    """A run of Title-case words → a multi-word name, a single name mid-sentence, or nothing."""
    words = [m.group(0) for m in run]
    at_start = not sentence[: run[0].start()].strip(" \"'(“‘")
    while words and (words[0].casefold() in STOP_WORDS or (at_start and words[0].casefold() in lexicon.COMMON)):
        words.pop(0)
        run = run[1:]
    while words and (words[-1].casefold() in STOP_WORDS or words[-1] in lexicon.NAME_CONNECTORS):
        words.pop()
        run = run[:-1]
    if not words:
        return None
    if heading and all(w.casefold() in lexicon.COMMON for w in words):
        return None
    name = sentence[run[0].start() : run[-1].end()]
    starts_sentence = at_start  # "The Transformer …": still the capital of a sentence start, once "The" is gone
    # A single word counts only mid-sentence; "Transformer-XL" (capitals after a hyphen) is as good as two words.
    single = len(words) == 1 and not any(p[:1].isupper() for p in words[0].split("-")[1:])
    if single:
        word = words[0]
        cited_author = sentence[run[-1].end() :].lstrip().startswith("et al")  # "Thakur et al. showed"
        if (starts_sentence and not cited_author) or heading or word.casefold() in lexicon.COMMON or len(word) < 3:
            return None
    if all(w.casefold() in lexicon.COMMON for w in words):
        return None
    kind = _context_type(sentence, run, 0, len(run)) or _name_type(words, sentence, run)
    # One capitalised word is weak evidence; a run of them mid-sentence is strong; at a sentence start, less so.
    confidence = 0.45 if single else 0.7 if (starts_sentence or heading) else 0.8
    if kind != "concept":
        confidence += 0.05
    return _Found(name, kind, min(confidence, 0.95), run[0].start())


def _name_type(words: list[str], sentence: str, run: list[re.Match[str]]) -> EntityType:
    parts = [p.casefold() for w in words for p in w.split("-")]
    if any(p in lexicon.ORG_WORDS for p in parts):
        return "organization"
    if any(p in lexicon.DATASET_WORDS for p in parts):
        return "dataset"
    if parts[-1] in lexicon.MODEL_WORDS:
        return "model"
    if any(p in lexicon.METHOD_WORDS for p in parts):
        return "method"
    if any(p in lexicon.MODEL_WORDS for p in parts):
        return "model"  # "Transformer-XL"
    if all(w.isalpha() and w[1:].islower() for w in words) and len(words) <= 3:
        before = sentence[: run[0].start()].rstrip().rsplit(None, 1)
        after = sentence[run[-1].end() :].lstrip().split(None, 1)
        cue_before = bool(before) and before[-1].casefold().rstrip(".") in lexicon.PERSON_CUES
        cue_after = bool(after) and (
            after[0].casefold().strip(".,;:") in lexicon.PERSON_VERBS or after[0] in ("et", "'s", "’s")
        )
        if cue_before or cue_after:
            return "person"  # "by Geoffrey Hinton", "Hinton et al.", "Geoffrey Hinton proposed"
    return "concept"


def _context_type(sentence: str, tokens: Sequence[re.Match[str]], i: int, j: int) -> EntityType | None:
    """The type the neighbouring words give: "the SciFact dataset", "the BERT model", "NDCG metric"."""
    after = sentence[tokens[j - 1].end() :].split(None, 2)[:2]
    before = sentence[: tokens[i].start()].split()[-1:]
    for word in [*after, *before]:
        kind = lexicon.CONTEXT_TYPES.get(word.casefold().strip(".,;:()"))
        if kind is not None:
            return kind  # type: ignore[return-value]
    return None


def find_definitions(sentence: str) -> list[tuple[_Found, _Found]]:
    """Acronym definitions, both ways round: "Dense Passage Retrieval (DPR)" and "BERT (Bidirectional Encoder
    Representations from Transformers)" → (acronym, expansion). The expansion is the run of words whose initials
    spell the acronym (Schwartz & Hearst's idea, simplified)."""
    result: list[tuple[_Found, _Found]] = []
    for match in re.finditer(r"\(([A-Z][A-Za-z0-9]{1,9})s?\)", sentence):
        acronym = match.group(1)
        if sum(c.isupper() for c in acronym) < 2:
            continue
        words = list(_WORD.finditer(sentence[: match.start()]))
        for size in range(1, min(len(words), len(acronym) + 3) + 1):
            window = words[-size:]
            if _spells(window, acronym):
                result.append(_definition(sentence, acronym, match.start(), window))
                break
    for match in re.finditer(r"\b([A-Z][A-Za-z0-9]{1,9})\s*\(([^()]{3,160})\)", sentence):
        acronym = match.group(1)
        if sum(c.isupper() for c in acronym) < 2:
            continue
        inside = match.start(2)
        window = list(_WORD.finditer(match.group(2)))
        if window and _spells(window, acronym):
            shifted = [re.compile(re.escape(w.group(0))).match(sentence, inside + w.start()) for w in window]
            result.append(_definition(sentence, acronym, match.start(), [m for m in shifted if m is not None]))
    return result


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*")


def _spells(window: Sequence[re.Match[str]], acronym: str) -> bool:
    initials = "".join(
        part[0]
        for w in window
        if w.group(0).casefold() not in lexicon.DEFINITION_SKIP
        for part in w.group(0).split("-")
    )
    if initials.casefold() == acronym.casefold():
        return True
    return len(window) < len(acronym) and _initials_cover(window, acronym)


def _definition(sentence: str, acronym: str, at: int, window: Sequence[re.Match[str]]) -> tuple[_Found, _Found]:
    name = sentence[window[0].start() : window[-1].end()]
    kind = _name_type([w.group(0) for w in window], sentence, list(window))
    return _Found(acronym, kind, 0.9, at), _Found(name, kind, 0.85, window[0].start())


def _initials_cover(window: Sequence[re.Match[str]], acronym: str) -> bool:
    """ "Bidirectional Encoder Representations from Transformers" → BERT; "Transformer-XL (TXL)"-style words
    whose capital letters spell the acronym in order."""
    capitals = "".join(c for w in window for c in w.group(0) if c.isupper())
    return capitals.casefold() == acronym.casefold() and window[0].group(0)[0].upper() == acronym[0].upper()


__all__ = [
    "ABBREVIATION_OF",
    "CONTEXT_CHARS",
    "CO_OCCURS",
    "EntityExtractor",
    "EntityType",
    "Extraction",
    "RuleBasedExtractor",
    "clean_text",
    "find_entities",
    "normalize",
    "sentences",
]
