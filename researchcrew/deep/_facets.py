"""Facets of a broad question, from what a first search found (issue 21 item 1): the plan's sub-questions come from
the evidence, not from a template.

The probe's documents (titles and passages; never the assistant's own memory of earlier exchanges) are described
by their words (TF-IDF over the words the question does not already say) and, when the embedding model is loaded,
by their embeddings centred on the probe's mean (what sets a document apart from the rest, not the topic they all
share). Documents close in that space are grouped (scipy's average-linkage clustering); each group's facet is named
by the key phrases its documents share and the others do not, dated by its documents' years (in the rationale, never
in the question), and worded as a question a person would ask about the broad topic.

A facet is kept only when its question finds its own documents among the probe's best matches and those best matches
are not mostly another facet's: sub-questions that would read the same evidence are merged away.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

# Imported with the module, not when a plan is made: the first import costs about a second, which a run's deadline
# should not pay.
from scipy.cluster.hierarchy import fcluster, linkage

from researchcrew.contracts.chunks import ContextChunk
from researchcrew.text.terms import QUERY_STOP_WORDS, REPORTING_WORDS, STOP_WORDS, stem

if TYPE_CHECKING:
    from researchcrew.embedding.embedder import Embedder

Matrix = npt.NDArray[np.float64]

EXCLUDED_SOURCES = frozenset({"memory"})  # the assistant's own earlier answers are not evidence of the topic
TOP_EVIDENCE = 3  # a facet's top evidence: its question's best probe documents
MAX_SHARED = 1  # a facet whose top evidence shares more documents than this with a kept facet's is merged away
CLUSTER_DISTANCE = 0.8  # average cosine distance up to which documents form one facet (tuned on the tune split)
MAX_PHRASE_WORDS = 3


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words that say what kind of paper or passage it is, not what it is about ("A Survey on ...", "... approach").
_GENERIC = _words(
    """based towards toward approach approaches study studies analysis case new novel paper papers survey
    review empirical framework method methods technique techniques application applications results
    result first large improving improved efficient effective automated automatic practical comparative
    systematic brief introduction literature overview using use used via toward problem problems issue
    issues work works research researchers article proposed propose proposes present presents presented
    show shows shown paper's approach's et al also well however thus therefore moreover furthermore
    including include includes different various several many recent recently existing current high low
    good better best key main important significant significantly provide provides provided able allow
    allows way ways make makes made one two three four five first second third finally often usually may
    might can could would should must need needs due given set sets number"""
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-'][A-Za-z0-9]+)*|\d+")
_BREAK = re.compile(r"[.,;:!?()\[\]{}\"“”‘’—–/|]|\s-\s")
_YEAR = re.compile(r"^(?:19|20)\d\d$")


@dataclass(frozen=True)
class Facet:
    """One facet of the evidence: what its documents share, and the sub-question that asks about it."""

    label: str  # the key phrase that names it ("metamorphic testing")
    phrases: tuple[str, ...]  # further key phrases of its documents, most distinctive first
    titles: tuple[str, ...]  # its documents' titles
    keys: tuple[str, ...]  # its documents' keys (source id, url, title)
    years: tuple[int, ...]  # its dated documents' years, sorted
    question: str = ""  # worded by ``word_facets``
    top_evidence: tuple[str, ...] = field(default=())  # keys of the probe documents its question matches best

    @property
    def rationale(self) -> str:
        count = len(self.keys)
        span = ""
        if self.years:
            low, high = self.years[0], self.years[-1]
            span = f", {low}" if low == high else f", {low}–{high}"
        shown = "; ".join(f"“{title}”" for title in self.titles[:2])
        return f"{count} document{'s' if count != 1 else ''} found{span}: {shown}"[:1000]


@dataclass(frozen=True)
class _Document:
    key: str
    title: str
    text: str
    year: int | None
    relevance: float


def document_key(chunk: ContextChunk) -> str:
    return chunk.source_id or chunk.url or chunk.title or chunk.chunk_id


def _documents(evidence: Sequence[ContextChunk]) -> list[_Document]:
    """The probe's documents, best first, one per source document (its passages joined); no memory."""
    grouped: dict[str, list[ContextChunk]] = {}
    for chunk in sorted(evidence, key=lambda c: c.semantic_relevance, reverse=True):
        if chunk.source_type in EXCLUDED_SOURCES or not (chunk.content.strip() or (chunk.title or "").strip()):
            continue
        grouped.setdefault(document_key(chunk), []).append(chunk)
    documents = []
    for key, chunks in grouped.items():
        first = chunks[0]
        text = " ".join(dict.fromkeys(chunk.content.strip() for chunk in chunks))
        year = next((chunk.source_date.year for chunk in chunks if chunk.source_date is not None), None)
        documents.append(_Document(key, (first.title or "").strip(), text, year, first.semantic_relevance))
    return documents


def _lower_words(text: str) -> list[str]:
    return [word.lower() for word in _WORD.findall(text)]


def _content(word: str) -> bool:
    lowered = word.lower()
    return not (
        lowered in QUERY_STOP_WORDS
        or lowered in REPORTING_WORDS
        or lowered in _GENERIC
        or len(lowered) < 3
        or lowered.isdigit()
        or _YEAR.match(lowered)
    )


def question_stems(question: str) -> frozenset[str]:
    return frozenset(stem(word) for word in _lower_words(question) if word not in STOP_WORDS)


def _asked(word: str, asked: frozenset[str]) -> bool:
    root = stem(word.lower())
    return root in asked or any(len(root) >= 6 and seen[:6] == root[:6] for seen in asked)


def candidate_phrases(text: str) -> list[str]:
    """Key-phrase candidates of a text (RAKE-like): runs of up to three content words between stop words and
    punctuation, as written (the case of acronyms kept); never starting or ending on a stop word."""
    found: list[str] = []
    for piece in _BREAK.split(text):
        run: list[str] = []
        for word in [*_WORD.findall(piece), ""]:
            if word and _content(word):
                run.append(word)
                continue
            for size in range(1, MAX_PHRASE_WORDS + 1):
                for start in range(len(run) - size + 1):
                    found.append(" ".join(run[start : start + size]))
            run = []
    return found


def _normal(phrase: str) -> str:
    return " ".join(stem(word.lower()) for word in phrase.split())


# ---- vectors ----------------------------------------------------------------------------------------------------


def _tfidf(texts: Sequence[str], asked: frozenset[str]) -> tuple[Matrix, dict[str, int], Matrix]:
    """L2-normalised TF-IDF rows over stemmed content words and adjacent pairs; the question's own words left out
    (every document shares them). Returns the rows, the vocabulary and its IDF (to place a question in the space)."""
    bags = [_bag(text, asked) for text in texts]
    vocabulary: dict[str, int] = {}
    for bag in bags:
        for term in bag:
            vocabulary.setdefault(term, len(vocabulary))
    counts = np.zeros((len(texts), max(1, len(vocabulary))))
    for row, bag in enumerate(bags):
        for term, count in bag.items():
            counts[row, vocabulary[term]] = 1.0 + math.log(count)
    frequency = (counts > 0).sum(axis=0)
    idf = np.log((1.0 + len(texts)) / (1.0 + frequency)) + 1.0
    return _normalised(counts * idf), vocabulary, idf


def _bag(text: str, asked: frozenset[str]) -> Counter[str]:
    stems = [stem(word) for word in _lower_words(text) if _content(word) and not _asked(word, asked)]
    bag = Counter(stems)
    bag.update(f"{first} {second}" for first, second in itertools.pairwise(stems))
    return bag


def _normalised(rows: Matrix) -> Matrix:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms == 0, 1.0, norms)


def _vectors(texts: Sequence[str], asked: frozenset[str], embedded: Matrix | None) -> Matrix:
    words, _, _ = _tfidf(texts, asked)
    if embedded is None or len(texts) < 3:
        return words
    centred = _normalised(embedded - embedded.mean(axis=0, keepdims=True))
    return _normalised(np.hstack([words, centred]))


def _clusters(vectors: Matrix) -> list[list[int]]:
    """Groups of documents (indexes, each group in document order), largest first, ties by their best document."""
    count = len(vectors)
    if count == 1:
        return [[0]]
    tree = linkage(vectors, method="average", metric="cosine")
    labels = fcluster(tree, t=CLUSTER_DISTANCE, criterion="distance")
    groups: dict[int, list[int]] = {}
    for index, label in enumerate(labels):
        groups.setdefault(int(label), []).append(index)
    return sorted(groups.values(), key=lambda group: (-len(group), group[0]))


# ---- naming -----------------------------------------------------------------------------------------------------


def _name(
    members: Sequence[int], documents: Sequence[_Document], asked: frozenset[str], document_phrases: list[set[str]]
) -> list[str]:
    """Key phrases of a group: phrases of its documents' titles (what a paper says it is about), in as many of its
    documents as possible (title or text), rare in the other documents, not only what the question already says;
    longer phrases first among equals. Most distinctive first, as first written."""
    total = len(documents)
    written: dict[str, Counter[str]] = {}
    for index in members:
        for phrase in candidate_phrases(documents[index].title):
            written.setdefault(_normal(phrase), Counter())[phrase] += 1
    everywhere: Counter[str] = Counter(normal for phrases in document_phrases for normal in phrases)
    sole_words: dict[str, bool] = {}  # the one-word phrases of titles that have no longer phrase
    for index in members:
        title_phrases = candidate_phrases(documents[index].title)
        if all(len(phrase.split()) == 1 for phrase in title_phrases):
            sole_words.update({_normal(phrase): True for phrase in title_phrases})
    scores: dict[str, float] = {}
    for normal in written:
        words = normal.split()
        new_words = sum(not _asked(word, asked) for word in words) / len(words)
        if new_words == 0:
            continue
        count = sum(normal in document_phrases[index] for index in members)
        share = count / len(members)
        rarity = math.log((2 + total) / (1 + everywhere[normal] - count + 0.5))
        if len(words) == 1 and count < 2 and not sole_words.get(normal, False):
            continue  # one word from one title ("mix", "history") rarely names a facet, unless the title has no more
        length = 1.0 + 0.4 * (min(len(words), 3) - 1)
        leading_verb = 0.5 if written[normal].most_common(1)[0][0].split()[0].lower().endswith("ing") else 1.0
        scores[normal] = share * max(rarity, 0.05) * length * new_words * leading_verb
    ranked = sorted(scores, key=lambda normal: (-scores[normal], normal))
    kept: list[str] = []
    for normal in ranked:
        if any(set(normal.split()) & set(other.split()) for other in kept):
            continue
        kept.append(normal)
        if len(kept) >= 3:
            break
    return [written[normal].most_common(1)[0][0] for normal in kept]


# ---- wording ------------------------------------------------------------------------------------------------------

_FRAMES_WITH_TOPIC = (
    "What is the role of {label} in {topic}?",
    "What have studies of {label} found about {topic}?",
    "Which results on {label} bear on {topic}?",
)
_FRAMES_ALONE = (
    "What is the role of {label}, and what has been found?",
    "What have studies of {label} found?",
    "How is {label} done, and with what results?",
)


def lower_label(label: str) -> str:
    """A phrase as it reads inside a sentence: title case dropped, acronyms and names with inner capitals kept."""

    def lowered(word: str) -> str:
        parts = word.split("-")
        if all(part[:1].isupper() and part[1:].islower() for part in parts if part) and len(word) > 1:
            return word.lower()
        return word

    return " ".join(lowered(word) for word in label.split())


def _topic_rest(topic: str, label: str) -> str:
    """The topic, unless the label already says all of its content words (then nothing)."""
    label_stems = {stem(word.lower()) for word in label.split()}
    topic_words = [word for word in _lower_words(topic) if word not in STOP_WORDS]
    if not topic_words or all(stem(word) in label_stems for word in topic_words):
        return ""
    return topic


def word_facet(label: str, topic: str, position: int, secondary: str | None = None) -> str:
    """The sub-question of a facet, in one of a few frames (rotated so a plan does not read as one template)."""
    label = lower_label(label)
    rest = _topic_rest(topic, label)
    if rest:
        text = _FRAMES_WITH_TOPIC[position % len(_FRAMES_WITH_TOPIC)].format(label=label, topic=rest)
    else:
        text = _FRAMES_ALONE[position % len(_FRAMES_ALONE)].format(label=label)
    if secondary:
        text = f"{text.rstrip('?')}, notably {lower_label(secondary)}?"
    return " ".join(text.split())


# ---- the facets ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FacetDraft:
    """What the probe's documents give before any sub-question is checked: the groups, each with its key phrases
    (most distinctive first), and a judge of a wording inside the probe (its best probe documents)."""

    topic: str  # the broad topic as a phrase ("testing machine learning systems")
    documents: tuple[_Document, ...]
    groups: tuple[tuple[tuple[int, ...], tuple[str, ...]], ...]  # (document indexes, key phrases), largest first
    evidence_years: tuple[int, ...]
    topic_stems: tuple[frozenset[str], ...]  # the question's words telling the topic, each a set of alternatives
    in_probe: Callable[[str], tuple[str, ...]]  # a wording's best probe documents (keys)
    probe_top: int  # how many documents make a wording's top evidence inside the probe

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(document.key for document in self.documents)

    def on_topic(self, key: str, text: str) -> bool:
        """A document is on the broad topic when it holds the topic's words (``topic_stems``; of three or more, two
        thirds: a question may join alternatives, "cyber-physical and embedded systems"), whether the probe found it
        or not (its best matches may include documents that do not); when the question has no such words, when the
        probe found it."""
        if not self.topic_stems:
            return key in self.keys
        words = {stem(word) for word in _lower_words(text)}
        held = sum(any(_holds(words, root) for root in group) for group in self.topic_stems)
        wanted = len(self.topic_stems)
        return held * 3 >= wanted * 2 if wanted > 2 else held == wanted


def draft_facets(
    question: str, topic: str, evidence: Sequence[ContextChunk], *, embedder: Embedder | None = None
) -> FacetDraft | None:
    """The probe's documents grouped and named (``_clusters``, ``_name``); None when the probe found nothing usable."""
    documents = _documents(evidence)
    if not documents:
        return None
    asked = question_stems(question)
    texts = [f"{document.title}. {document.text}" for document in documents]
    document_phrases = [{_normal(phrase) for phrase in candidate_phrases(text)} for text in texts]
    embedded = (
        _normalised(np.asarray(embedder.embed_documents(texts), dtype=np.float64)) if embedder is not None else None
    )
    vectors = _vectors(texts, asked, embedded)
    # Where the sub-questions' evidence is judged inside the probe: all words (the question's too), and embeddings
    # when loaded.
    all_words, vocabulary, idf = _tfidf(texts, frozenset())
    # A small probe cannot give every facet three documents of its own: the best one (or two) must differ then.
    probe_top = min(TOP_EVIDENCE, max(1, len(documents) // 4))

    def in_probe(text: str) -> tuple[str, ...]:
        query = np.zeros(all_words.shape[1])
        for term, count in _bag(text, frozenset()).items():
            if term in vocabulary:
                query[vocabulary[term]] = (1.0 + math.log(count)) * idf[vocabulary[term]]
        norm = float(np.linalg.norm(query))
        scores = all_words @ (query / norm) if norm else np.zeros(len(texts))
        if embedded is not None and embedder is not None:
            vector = np.asarray(embedder.embed_query(text), dtype=np.float64).reshape(1, -1)
            scores = scores + embedded @ _normalised(vector).ravel()
        order = sorted(range(len(texts)), key=lambda index: (-float(scores[index]), index))
        return tuple(documents[index].key for index in order[:probe_top])

    groups = []
    for group in _clusters(vectors):
        phrases = _name(group, documents, asked, document_phrases)
        if phrases:
            groups.append((tuple(group), tuple(phrases)))
    holding = [{stem(word) for word in _lower_words(text)} for text in texts]
    return FacetDraft(
        topic=topic_phrase(question, topic),
        documents=tuple(documents),
        groups=tuple(groups),
        evidence_years=tuple(document.year for document in documents if document.year is not None),
        topic_stems=_topic_stems(question, holding),
        in_probe=in_probe,
        probe_top=probe_top,
    )


BEST_DOCUMENTS = 3  # the probe's best documents, whose words say what the topic is


def _holds(words: set[str], root: str) -> bool:
    return root in words or (len(root) >= 6 and any(word[:6] == root[:6] for word in words))


def _topic_stems(question: str, holding: Sequence[set[str]]) -> tuple[frozenset[str], ...]:
    """The question's words that tell an on-topic document: its content words (not "effects", "role") that most of
    the probe's best documents hold (not "researchers", "applied"); words the question joins by "and"/"or" are
    alternatives ("web and mobile applications": either). All its content words when the best documents hold none."""
    words = _lower_words(question)
    joined: dict[str, str] = {}
    for first, middle, last in zip(words, words[1:], words[2:], strict=False):
        if middle in ("and", "or") and _content(first) and _content(last):
            joined[stem(last)] = stem(first)
    asked = list(dict.fromkeys(stem(word) for word in words if _content(word) and word not in _ASKING))
    best = holding[:BEST_DOCUMENTS]
    used = [root for root in asked if sum(_holds(found, root) for found in best) * 2 > len(best)] or asked
    groups: dict[str, set[str]] = {}
    for root in used:
        groups.setdefault(joined.get(root, root), set()).add(root)
    return tuple(frozenset(group) for group in groups.values())


# A wording's judgement: the keys of its top evidence, and whether that evidence is on the broad topic.
Judgement = tuple[tuple[str, ...], bool]


def _wordings(phrases: Sequence[str], topic: str, position: int) -> list[tuple[str, str]]:
    """(wording, label) to try for one group, best first: each of its two best phrases with the topic, then with a
    further phrase of the group that says what sets it apart ("notably ..."), then that pair without the topic
    (whose words pull every facet towards the topic's central documents); in the plan's frame for this position
    first, then in the other frames (a frame's own words move a search too)."""
    found: list[tuple[str, str]] = []
    for shift in range(len(_FRAMES_WITH_TOPIC)):
        frame = position + shift
        for label in phrases[:2]:
            label_words = set(_normal(label).split())
            others = [p for p in phrases if p != label and not label_words & set(_normal(p).split())]
            secondary = others[0] if others else None
            found.append((word_facet(label, topic, frame), label))
            if secondary:
                found.append((word_facet(label, topic, frame, secondary), label))
                found.append((word_facet(label, "", frame, secondary), label))
    return list(dict.fromkeys(found))


def select_facets(
    draft: FacetDraft, *, max_facets: int, top_count: int, max_shared: int, max_checks: int
) -> Generator[str, Judgement, list[Facet]]:
    """The facets a plan keeps, as a conversation with a judge (sans I/O): yields each candidate wording, receives
    its ``Judgement``, returns the facets. A wording is kept when its top evidence is on topic, holds one of its
    group's documents, and shares at most ``max_shared`` documents with every kept facet's; else the group's next
    wording is tried, and a group none of whose wordings fits is dropped. At most ``max_checks`` wordings judged."""
    facets: list[Facet] = []
    used_labels: set[str] = set()
    checks = 0
    for members, named in draft.groups:
        phrases = [name for name in named if _normal(name) not in used_labels]
        if not phrases:
            continue
        own = {draft.documents[index].key for index in members}
        chosen: Facet | None = None
        for wording, label in _wordings(phrases, draft.topic, len(facets)):
            if artefacts(wording, draft.evidence_years):
                continue
            if checks >= max_checks:
                return facets
            checks += 1
            top, on_topic = yield wording
            top = top[:top_count]
            if not on_topic or not own & set(top):
                continue  # off the topic, or the question does not find the documents it was made from
            if any(len(set(top) & set(kept.top_evidence)) > max_shared for kept in facets):
                continue
            chosen = Facet(
                label=label,
                phrases=tuple(phrase for phrase in phrases if phrase != label),
                titles=tuple(draft.documents[index].title for index in members if draft.documents[index].title),
                keys=tuple(draft.documents[index].key for index in members),
                years=tuple(sorted(y for index in members if (y := draft.documents[index].year) is not None)),
                question=wording,
                top_evidence=top,
            )
            break
        if chosen is None:
            continue
        facets.append(chosen)
        used_labels.add(_normal(chosen.label))
        if len(facets) >= max_facets:
            break
    return facets


MAX_CHECKS = 24  # wordings judged per plan (a search each when checked against the sources)


def find_facets(
    question: str,
    topic: str,
    evidence: Sequence[ContextChunk],
    *,
    max_facets: int,
    embedder: Embedder | None = None,
) -> list[Facet]:
    """The facets of what the probe found, each with its worded sub-question, most documents first; at most
    ``max_facets``, none whose question would read another's evidence *inside the probe* (``search.searched_facets``
    checks them against the sources themselves). [] when the probe found nothing usable."""
    draft = draft_facets(question, topic, evidence, embedder=embedder)
    if draft is None or max_facets < 1:
        return []
    max_shared = MAX_SHARED if draft.probe_top == TOP_EVIDENCE else draft.probe_top - 1
    selection = select_facets(
        draft, max_facets=max_facets, top_count=draft.probe_top, max_shared=max_shared, max_checks=MAX_CHECKS
    )
    try:
        wording = next(selection)
        while True:
            wording = selection.send((draft.in_probe(wording), True))
    except StopIteration as done:
        return list(done.value)


def facet_lines(facets: Sequence[Facet]) -> str:
    """The facets as material for a model's plan prompt: one line each, phrases, document count, years, titles."""
    lines = []
    for facet in facets:
        phrases = ", ".join([facet.label, *facet.phrases[:2]])
        lines.append(f"- {phrases} — {facet.rationale}")
    return "\n".join(lines)


# ---- the topic, and what a sub-question must never carry ----------------------------------------------------------

_HOW_WHY = re.compile(r"^(how|why)\s+(?:do|does|did|can|could|should|would|will)\s+(.+)$", re.IGNORECASE)
_NOT_PARTICIPLES = frozenset({"based", "need", "speed", "seed", "feed", "bed", "red", "shed", "embed", "bleed"})


def _gerund(participle: str) -> str:
    lowered = participle.lower()
    if lowered.endswith("ied"):
        return lowered[:-3] + "ying"
    return lowered[:-2] + "ing"


_HOW_PASSIVE = re.compile(r"^how\s+(?:is|are|was|were|has|have)\s+", re.IGNORECASE)
_WH = _words("""what which who whom whose when where why how is are was were has have do does did""")
MAX_TOPIC_WORDS = 8
_ASKING = _words("""cause causes caused drive drives affect affects effect effects role roles happen""")


def _strip_asking(phrase: str) -> str:
    words = phrase.split()
    while words and words[0].lower() in _ASKING:
        words = words[1:]
    return " ".join(words)


def topic_phrase(question: str, topic: str) -> str:
    """The broad topic as a phrase that fits after "in" or "about": "How are ML systems tested?" → "testing ML
    systems"; "How do transformers use attention?" → "how transformers use attention"; ``topic`` when it reads as
    a phrase; else the question's longest run of content words ("What causes flaky tests?" → "flaky tests")."""
    text = question.split("(", 1)[0] if "(" in question and not question.startswith("(") else question
    text = " ".join(text.strip().rstrip("?.! ").split())
    how = _HOW_WHY.match(text)
    if how and " and how " not in text.lower():
        return f"{how.group(1).lower()} {how.group(2)}"
    if _HOW_PASSIVE.match(text):
        words = _HOW_PASSIVE.sub("", text).split()
        words = words[1:] if words and words[0].lower() in ("the", "a", "an") else words
        for index in range(len(words) - 1, 0, -1):
            lowered = words[index].lower()
            following = words[index + 1].lower() if index + 1 < len(words) else ""
            if following and _content(following) and not following.endswith("ly"):
                continue  # an adjective ("embedded systems"), not the question's verb
            if len(lowered) > 3 and lowered.endswith("ed") and lowered not in _NOT_PARTICIPLES:
                start, verbs = index, [_gerund(lowered)]
                if index >= 3 and words[index - 1].lower() in ("and", "or") and words[index - 2].lower().endswith("ed"):
                    start, verbs = index - 2, [_gerund(words[index - 2]), words[index - 1].lower(), *verbs]
                return " ".join([*verbs, *words[:start], *words[index + 1 :]])
    stripped = re.sub(r"^of\s+", "", _strip_asking(topic), flags=re.IGNORECASE)  # "role of autophagy" → "autophagy"
    topic = stripped or topic
    words = topic.split()
    if 1 <= len(words) <= MAX_TOPIC_WORDS and not any(word.lower() in _WH for word in words):
        return topic
    runs = [_strip_asking(phrase) for phrase in candidate_phrases(text)]
    runs = sorted((run for run in runs if run), key=lambda phrase: (-len(phrase.split()), text.find(phrase)))
    return lower_label(runs[0]) if runs else topic


_CONVERSATION = re.compile(
    r"\b(?:earlier|previous|last)\s+(?:question|answer|conversation|exchange|session|reply)s?\b|"
    r"\b(?:you|we|i)\s+(?:asked|said|discussed|talked)\b|\bour\s+(?:earlier\s+)?conversations?\b",
    re.IGNORECASE,
)
_TEMPLATE = re.compile(r"\bwhat\s+is\s+known\s+about\b|\bwhat\s+has\s+been\s+reported\s+on\b", re.IGNORECASE)
_YEARS = re.compile(r"\b(1[89]\d\d|20\d\d)\b")
_REPEATED = re.compile(r"\b(\w+)\s+\1\b", re.IGNORECASE)
_DANGLING = re.compile(
    r"\b(?:of|in|on|for|the|a|an|and|or|to|with|about|by|from|at|into|as|than|its|their)\s*(?:[?,;:.)]|$)",
    re.IGNORECASE,
)


def artefacts(text: str, evidence_years: Sequence[int] = ()) -> list[str]:
    """What a worded sub-question must not carry, each named: conversation text, a stock template ("What is known
    about"), a year the evidence does not hold, a word repeated back to back or a content word used three times,
    a sentence ending on a function word, empty brackets, or a question mark mid-text. [] when it reads clean."""
    found: list[str] = []
    if _CONVERSATION.search(text):
        found.append("conversation text")
    if _TEMPLATE.search(text):
        found.append("stock template")
    years = set(evidence_years)
    for year in _YEARS.findall(text):
        if int(year) not in years:
            found.append(f"year {year} not in the evidence")
    if _REPEATED.search(text):
        found.append("word repeated back to back")
    counts = Counter(stem(word) for word in _lower_words(text) if word not in STOP_WORDS and len(word) > 2)
    if any(count >= 3 for count in counts.values()):
        found.append("content word used three times")
    if _DANGLING.search(text):
        found.append("ends on a function word")
    if "()" in text or "( )" in text:
        found.append("empty brackets")
    if "?" in text.rstrip()[:-1]:
        found.append("question mark mid-text")
    return found
