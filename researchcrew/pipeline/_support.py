"""Support: how well a piece of evidence matches the question that was asked, measured the same way for every source.

A source's own relevance is not comparable across sources and is easily fooled: web and arXiv give only a rank (the
first hit of any search gets 0.9), and the knowledge base's fused score rewards shared words, so "How much gallium
is on Jupiter's moons?" found hot-Jupiter abstracts at relevance 0.98 and was answered with confidence. Support
asks the question directly:

* **semantic** — the question and the passage (title + text) embedded by the shared model; their cosine mapped
  linearly from ``semantic_floor`` (no match, 0) to ``semantic_full`` (a full match, 1);
* **coverage** — the share of the question's content words (stemmed) that the passage contains: what it asks
  about must be there ("gallium" is in no abstract of the demo corpus);
* ``support = (1 − coverage_weight) × semantic + coverage_weight × coverage``;
* **names** — a passage can say in other words everything a question asks except the names it uses ("Who wrote
  QuickCheck?", "How many GraphQL API testing tools ...?", "... Tesla Autopilot ..."): a passage holding only a
  share of them has its support multiplied by ``name_penalty + (1 − name_penalty) × share``. Near-miss questions
  about a neighbouring thing (GraphQL where the corpus has a REST API study) were answered at confidence 0.70
  from the neighbour (issue 20, ``benchmarks/answer_quality.py``). Conversation memory is judged by its own rules;
* **statement** — a passage on the question's subject may still not state its answer: no sentence of it holds the
  question's specific words together with the kind of answer asked for (a name for "who", a date for "when", a
  number for "how many"); its support is multiplied by ``pipeline.statement.statement_factors`` (model-free);
* **read closely** — the few passages of highest support are also compared with the question word piece by word
  piece (late interaction, ``pipeline/_late.py``): a related abstract on the neighbouring finding shares the topic's
  vector but does not restate the claim's own terms in context. A passage not read so is capped at the least support
  of those that were.

**One scale for every knowledge base.** ``semantic_floor`` and ``semantic_full`` were set on the demo corpus, where a
question it cannot answer at all finds its best passage at a cosine of about 0.17 (``REFERENCE_NULL_COSINE``). In a
knowledge base of one dense field (2,000 biomedical abstracts) an unrelated question's best passage sits higher
(0.25): every passage there looks more relevant to the model, and the same support meant less. So each knowledge
base's *null* is measured (``KnowledgeBaseNull``: the mean best cosine of ``OFF_TOPIC_PROBES``, questions about
nothing a research corpus holds, searched dense-only; ``pipeline/_null.py`` says when and at what cost), and its
passages' floor and full match are raised by how far that null sits above the reference (never lowered; at most
``MAX_NULL_SHIFT``), so "as relevant as a random passage" means low support in every knowledge base
(``confidence.null_calibration``; issue 20, ``benchmarks/answer_quality.py``).

Conversation memory is judged on what it is, not by word overlap with a research question, because an earlier
exchange quotes the user:

* an exchange recalled for a question *about the conversation* ("what did I ask before?") supports it fully
  (``conversation_support``): it is exactly what was asked for;
* for a question about *the user's own facts* ("what is my project code?", "what's my name?", memory/statements.py)
  the user's own statement of that fact ("my project code is BLUEFALCON-7731", recalled by tools/memory_recall.py
  as a ``user_statement`` chunk) supports it fully (``stated_fact_support``), whatever the earlier answer was; every
  other memory chunk supports it not at all — the assistant's earlier answers are not evidence of what the user
  said about themself (basis ``not_stated``);
* any other memory — the user's earlier questions beside a research question, the entity graph, and never the
  assistant's own earlier answers (``contracts.chunks.is_evidence``, issue 20) — is context and supports nothing
  (basis ``context``);
* an earlier answer that claimed nothing (uncertainty, refusal, clarifying questions) supports nothing;
* the earlier question counts clause by clause ("My project codename is BLUEFALCON-7731, what is …?" states the
  codename), except a clause that merely repeats the current question, which is not evidence of anything.

A knowledge-base passage that holds a rare name or identifier of the question word for word (``exact_terms``,
``knowledge/_exact.py``) is also measured by its sentences holding it (the best cosine counts): the passage's own
cosine dilutes a one-sentence answer about a name the model does not know.

Cost: the int8 model embeds one text per call, so the number of texts is what a question pays. Knowledge-base hits
found for the question itself already carry the question–passage cosine their search computed with the same model
(``metadata["scores"]["dense"]``) and are not embedded again; web and arXiv passages are embedded once (title and
the first ``PASSAGE_CHARS``); of memory, only the ``MEMORY_CHUNKS`` most relevant exchanges, a few clauses and
sentences each. Each text is embedded once per process: its vector is kept (by text), and the question's own vector
is the one the search computed (the model remembers recent queries, ``embedding/_query_cache.py``).

``EmbeddingSupport`` is what the assembled pipeline uses; ``relevance_support`` (each source's own relevance) is the
fallback without a model, and what scripted test stages use. Neither raises.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np
import numpy.typing as npt

from researchcrew.contracts.chunks import MEMORY_SOURCE_TYPE, ContextChunk, is_evidence
from researchcrew.contracts.synthesizer import NO_ANSWER_KINDS
from researchcrew.embedding.tokens import TokenEmbedder
from researchcrew.errors import ModelUnavailableError
from researchcrew.memory.statements import PersonalQuestion, personal_question, stated_answers
from researchcrew.pipeline._late import late_support, max_sim
from researchcrew.pipeline._null import (
    MAX_NULL_SHIFT,
    OFF_TOPIC_PROBES,
    REFERENCE_NULL_COSINE,
    KnowledgeBaseNull,
    NullCosine,
    knowledge_base_null,
)
from researchcrew.pipeline._statement import statement_factors
from researchcrew.settings import ConfidenceSettings
from researchcrew.text.sentences import split_sentences
from researchcrew.text.terms import QUERY_STOP_WORDS, content_terms, term_set

if TYPE_CHECKING:
    from researchcrew.embedding.embedder import Embedder

logger = logging.getLogger(__name__)

SupportBasis = Literal[
    "embedding", "source_relevance", "conversation", "no_answer", "user_statement", "not_stated", "context"
]
PASSAGE_CHARS = 1_000  # enough for the model's view of a passage; more text only costs time
MEMORY_CLAUSES = 3  # of an earlier question
MEMORY_SENTENCES = 2  # of an earlier answer (its opening says what it answered)
EXACT_SENTENCES = 3  # sentences holding a rare name of the question, measured on their own
MEMORY_CHUNKS = 3  # the most relevant recalled exchanges are measured; the rest keep their recall relevance
REPEAT_COSINE = 0.92  # an earlier question this close to the current one is the same question asked again
_CACHE_SIZE = 2_048
_VECTORS_SIZE = 4_096  # passage vectors kept (1.5 KB each with the default model)
_ANSWER_MARK = "The answer given then:"
_CLAUSE = re.compile(r"(?<=[,;:?!.])\s+")
KNOWLEDGE_BASE_SOURCE_TYPE = "rag"  # tools/rag.py (the pipeline layer does not import tools)


@dataclass(frozen=True)
class Support:
    """How well one piece of evidence supports the question."""

    score: float  # in [0, 1]
    semantic: float | None  # the question–passage cosine it came from (None when not measured)
    coverage: float  # share of the question's content words the passage contains
    basis: SupportBasis


_NAME_TOKEN = re.compile(r"[^\W_][\w'.\-]*[^\W_]|[^\W_]")
_NAME_PARTS = re.compile(r"[\-.']")


def question_names(question: str) -> list[str]:
    """The names ``question`` uses, lower-cased, in order: words with a capital letter after their first character
    ("QuickCheck", "GraphQL", "AI"), capitalised words other than the question's first ("Tesla", "Python") and words
    of letters and digits ("MATH500", "COVID-19"); stop words never ("Which", "The")."""
    names: list[str] = []
    for index, token in enumerate(_NAME_TOKEN.findall(question.replace("\u2019", "'"))):
        inner_capital = any(c.isupper() for c in token[1:])
        letters_and_digits = any(c.isdigit() for c in token) and any(c.isalpha() for c in token)
        if not (inner_capital or letters_and_digits or (index > 0 and token[0].isupper())):
            continue
        name = token.lower().rstrip(".")
        name = name[:-2] if name.endswith("'s") else name
        if name and name not in QUERY_STOP_WORDS and name not in names:
            names.append(name)
    return names


def names_found(names: Sequence[str], chunk: ContextChunk) -> float:
    """Share of ``names`` the chunk's title and text hold (as written, or each part of a compound: "anti-IL-2")."""
    if not names:
        return 1.0
    text = f"{chunk.title or ''}\n{chunk.content}".lower()
    found = 0
    for name in names:
        parts = [part for part in _NAME_PARTS.split(name) if len(part) >= 2]
        found += name in text or (bool(parts) and all(part in text for part in parts))
    return found / len(names)


def name_factor(names: Sequence[str], chunk: ContextChunk, settings: ConfidenceSettings) -> float:
    """What a passage's support is multiplied by for the question's names it lacks (1 when it holds them all)."""
    if not names or settings.name_penalty >= 1.0:
        return 1.0
    share = names_found(names, chunk)
    return 1.0 if share >= 1.0 else settings.name_penalty + (1 - settings.name_penalty) * share


class SupportScorer(Protocol):
    """Scores evidence against the question: chunk id → ``Support``. Never raises."""

    async def __call__(self, question: str, chunks: Sequence[ContextChunk], /) -> dict[str, Support]: ...


def coverage(question: str, chunk: ContextChunk) -> float:
    """Share of the question's content words (stemmed, stopwords left out) found in the chunk's title and text."""
    wanted = content_terms(question)
    if not wanted:
        return 1.0  # a question without content words asks about nothing in particular
    found = term_set(f"{chunk.title or ''} {chunk.content}")
    return sum(term in found for term in wanted) / len(wanted)


async def relevance_support(
    question: str, chunks: Sequence[ContextChunk], settings: ConfidenceSettings | None = None
) -> dict[str, Support]:
    """Without a model: each source's own relevance stands in for support (the pre-issue-13 gate); conversation
    memory is judged by the same rules as with the model (``memory_support``)."""
    settings = settings or ConfidenceSettings()
    asked = personal_question(question)
    names = question_names(question)
    result: dict[str, Support] = {}
    for chunk in chunks:
        share = coverage(question, chunk)
        judged = memory_support(asked, chunk, share, settings)
        named = 1.0 if chunk.source_type == MEMORY_SOURCE_TYPE else name_factor(names, chunk, settings)
        score = chunk.semantic_relevance * named
        result[chunk.chunk_id] = judged or Support(score, None, share, "source_relevance")
    return result


def about_conversation(chunk: ContextChunk) -> bool:
    """A memory chunk recalled because the question is about the conversation itself."""
    return chunk.source_type == MEMORY_SOURCE_TYPE and chunk.metadata.get("recalled_as") == "conversation"


def user_statement(chunk: ContextChunk) -> str | None:
    """What the user said, for a memory chunk quoting the user's own statement (tools/memory_recall.py)."""
    if chunk.source_type != MEMORY_SOURCE_TYPE or chunk.metadata.get("recalled_as") != "user_statement":
        return None
    said = chunk.metadata.get("statement")
    return said if isinstance(said, str) and said.strip() else None


def memory_support(
    asked: PersonalQuestion | None, chunk: ContextChunk, share: float, settings: ConfidenceSettings
) -> Support | None:
    """The rules for conversation memory (module docstring), or None when the chunk is to be measured like any
    other passage. ``asked``: the fact the question asks about the user, if it does."""
    if chunk.source_type != MEMORY_SOURCE_TYPE:
        return None
    if about_conversation(chunk) and is_evidence(chunk):
        return Support(settings.conversation_support, None, share, "conversation")
    if asked is not None:
        said = user_statement(chunk)
        if said is not None and stated_answers(said, asked):
            return Support(settings.stated_fact_support, None, share, "user_statement")
        return Support(0.0, None, share, "not_stated")
    if not is_evidence(chunk):
        return Support(0.0, None, share, "context")
    if chunk.metadata.get("answer_kind") in NO_ANSWER_KINDS:
        return Support(0.0, None, share, "no_answer")
    return None


class EmbeddingSupport:
    """Support measured with the shared embedding model (see the module docstring). Results are cached per
    (question, chunk), so a reformulated search does not embed the same passages again."""

    def __init__(
        self, embedder: Embedder, settings: ConfidenceSettings | None = None, *, null: NullCosine | None = None
    ) -> None:
        self.embedder = embedder
        self.settings = settings or ConfidenceSettings()
        self.null = null if self.settings.null_calibration else None
        self._cache: OrderedDict[tuple[str, str, str], Support] = OrderedDict()
        self._vectors: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()  # passage text → its vector
        self._vectors_lock = threading.Lock()  # questions are measured on worker threads, several at a time

    async def __call__(self, question: str, chunks: Sequence[ContextChunk]) -> dict[str, Support]:
        if not chunks:
            return {}
        try:
            return await asyncio.to_thread(self.score, question, chunks)
        except (ModelUnavailableError, RuntimeError, ValueError, OSError) as error:
            # The model failing mid-run must not sink the answer: fall back to the sources' own relevance.
            logger.warning("measuring support with the embedding model failed (%s); using source relevance", error)
            return await relevance_support(question, chunks, self.settings)

    def score(self, question: str, chunks: Sequence[ContextChunk]) -> dict[str, Support]:
        """The blocking part: embed what is not cached, in one batch."""
        result: dict[str, Support] = {}
        todo: list[ContextChunk] = []
        for chunk in chunks:
            cached = self._cache.get(self._key(question, chunk))
            if cached is not None:
                result[chunk.chunk_id] = cached
            else:
                todo.append(chunk)
        if todo:
            result.update(self._measure(question, todo))
        return result

    def semantic(self, cosine: float, shift: float = 0.0) -> float:
        """The cosine mapped from the floor (0) to the full match (1), both raised by ``shift`` (the knowledge
        base's null above the reference's)."""
        floor, full = self.settings.semantic_floor + shift, self.settings.semantic_full + shift
        return float(min(1.0, max(0.0, (cosine - floor) / (full - floor))))

    def null_shift(self) -> float:
        """How far the knowledge base's null sits above the reference's (0 when unknown or below)."""
        null = self.null() if self.null is not None else None
        return 0.0 if null is None else min(MAX_NULL_SHIFT, max(0.0, null - REFERENCE_NULL_COSINE))

    def _measure(self, question: str, chunks: Sequence[ContextChunk]) -> dict[str, Support]:
        weight = self.settings.coverage_weight
        texts: list[str] = []
        owners: list[int] = []  # which chunk each text belongs to
        repeats: list[bool] = []  # texts that restate an earlier question (dropped if they repeat this one)
        fixed: dict[int, Support] = {}
        best = [-1.0] * len(chunks)
        memory = sorted(
            (i for i, c in enumerate(chunks) if c.source_type == MEMORY_SOURCE_TYPE),
            key=lambda i: -chunks[i].semantic_relevance,
        )
        measured_memory = set(memory[:MEMORY_CHUNKS])
        asked = personal_question(question)
        for index, chunk in enumerate(chunks):
            share = coverage(question, chunk)
            judged = memory_support(asked, chunk, share, self.settings)
            if judged is not None:
                fixed[index] = judged
                continue
            if chunk.source_type == MEMORY_SOURCE_TYPE and index not in measured_memory:
                fixed[index] = Support(
                    chunk.semantic_relevance * (1 - weight) + weight * share, None, share, "source_relevance"
                )
                continue
            known = _searched_cosine(chunk, question)
            passages = _exact_sentences(chunk)  # measured beside the whole passage, whose cosine may be known
            if known is not None:
                best[index] = known
            else:
                passages = _passages(chunk) + passages
            for text, is_question in passages:
                texts.append(text)
                owners.append(index)
                repeats.append(is_question)
        if texts:
            query = self.embedder.embed_query(question)  # the search already embedded it: the model remembers
            vectors = self._passage_vectors(texts, {text for text, flag in zip(texts, repeats, strict=True) if flag})
            cosines = vectors @ query
            for text_index, cosine in enumerate(np.asarray(cosines, dtype=float)):
                if repeats[text_index] and cosine >= REPEAT_COSINE:
                    continue  # the same question asked again is not evidence
                owner = owners[text_index]
                best[owner] = max(best[owner], float(cosine))
        measured: dict[str, Support] = {}
        names = question_names(question)
        stated = statement_factors(question, chunks, self.settings)  # does a sentence state the answer?
        measured_here = any(
            i not in fixed and c.source_type == KNOWLEDGE_BASE_SOURCE_TYPE for i, c in enumerate(chunks)
        )
        shift = self.null_shift() if measured_here else 0.0
        for index, chunk in enumerate(chunks):
            support = fixed.get(index)
            if support is None:
                share = coverage(question, chunk)
                cosine = best[index] if best[index] > -1.0 else None
                moved = shift if chunk.source_type == KNOWLEDGE_BASE_SOURCE_TYPE else 0.0
                semantic = self.semantic(cosine, moved) if cosine is not None else 0.0
                named = 1.0 if chunk.source_type == MEMORY_SOURCE_TYPE else name_factor(names, chunk, self.settings)
                named *= stated[chunk.chunk_id]
                score = round(((1 - weight) * semantic + weight * share) * named, 4)
                support = Support(score, None if cosine is None else round(cosine, 4), round(share, 4), "embedding")
            measured[chunk.chunk_id] = support
        self._read_closely(question, chunks, fixed, measured)
        for chunk in chunks:
            self._remember(self._key(question, chunk), measured[chunk.chunk_id])
        return measured

    def _read_closely(
        self, question: str, chunks: Sequence[ContextChunk], fixed: dict[int, Support], measured: dict[str, Support]
    ) -> None:
        """Late interaction (``pipeline/_late.py``) for the passages of highest support, in ``measured``; a passage
        not read so is capped at the least support of those that were."""
        settings = self.settings
        embedder = self.embedder
        if settings.late_interaction_passages <= 0 or not isinstance(embedder, TokenEmbedder):
            return
        candidates = sorted(
            (c for i, c in enumerate(chunks) if i not in fixed and c.source_type != MEMORY_SOURCE_TYPE),
            key=lambda c: -measured[c.chunk_id].score,
        )
        chosen = candidates[: settings.late_interaction_passages]
        if not chosen:
            return
        texts = [question, *(_passages(chunk)[0][0] for chunk in chosen)]
        asked, *read = embedder.embed_tokens(texts)
        for chunk, tokens in zip(chosen, read, strict=True):
            before = measured[chunk.chunk_id]
            score = late_support(
                before.score,
                max_sim(asked, tokens),
                weight=settings.late_interaction_weight,
                floor=settings.late_interaction_floor,
                full=settings.late_interaction_full,
            )
            measured[chunk.chunk_id] = replace(before, score=round(score, 4))
        ceiling = min(measured[chunk.chunk_id].score for chunk in chosen)
        for chunk in candidates[len(chosen) :]:
            before = measured[chunk.chunk_id]
            if before.score > ceiling:
                measured[chunk.chunk_id] = replace(before, score=ceiling)

    def _passage_vectors(self, texts: list[str], questions: set[str]) -> npt.NDArray[np.float32]:
        """The vectors of ``texts``, each embedded once per process: a recalled exchange is measured against every
        later question of its session, and the passage (or sentence) is the same text each time. An earlier
        question (``questions``) was a query itself, whose vector the model remembers (``embed_query``)."""
        with self._vectors_lock:
            found = {text: self._vectors[text] for text in texts if text in self._vectors}
            for text in found:
                self._vectors.move_to_end(text)
        for text in questions.difference(found):
            found[text] = self.embedder.embed_query(text)
        missing = [text for text in dict.fromkeys(texts) if text not in found]
        if missing:
            found.update(zip(missing, self.embedder.embed_documents(missing), strict=True))
        with self._vectors_lock:
            for text in texts:
                self._vectors[text] = found[text]
            while len(self._vectors) > _VECTORS_SIZE:
                self._vectors.popitem(last=False)
        return np.stack([found[text] for text in texts])

    def _key(self, question: str, chunk: ContextChunk) -> tuple[str, str, str]:
        return (question, chunk.chunk_id, chunk.content[:64])

    def _remember(self, key: tuple[str, str, str], support: Support) -> None:
        self._cache[key] = support
        self._cache.move_to_end(key)
        while len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)


def _searched_cosine(chunk: ContextChunk, question: str) -> float | None:
    """The question–passage cosine a knowledge-base search already computed (same model), when the chunk has it
    for this very question (a reformulated search scored it against other words)."""
    if chunk.metadata.get("query") != question:
        return None
    scores = chunk.metadata.get("scores")
    dense = scores.get("dense") if isinstance(scores, dict) else None
    return float(dense) if isinstance(dense, int | float) and not isinstance(dense, bool) else None


def _exact_sentences(chunk: ContextChunk) -> list[tuple[str, bool]]:
    """The sentences of a knowledge-base passage that hold a rare name or identifier of the question word for word
    (``knowledge/_exact.py``): the passage's cosine dilutes a one-sentence answer about a name the model does not
    know ("Who wrote QuickCheck?": 0.28 for the passage, 0.70 for its sentence naming the authors)."""
    terms = chunk.metadata.get("exact_terms")
    if chunk.source_type == MEMORY_SOURCE_TYPE or not isinstance(terms, list) or not terms:
        return []
    wanted = {str(term).lower() for term in terms}
    holding = [s for s in split_sentences(chunk.content) if wanted & set(re.findall(r"\w[\w-]*", s.lower()))]
    return [(sentence[:PASSAGE_CHARS], False) for sentence in holding[:EXACT_SENTENCES]]


def _passages(chunk: ContextChunk) -> list[tuple[str, bool]]:
    """What of a chunk is compared with the question: the passage itself; for conversation memory, the earlier
    question clause by clause (flagged, so a mere repeat of the current question is dropped) and the earlier answer
    sentence by sentence."""
    if chunk.source_type != MEMORY_SOURCE_TYPE:
        return [(f"{chunk.title or ''}\n{chunk.content}"[:PASSAGE_CHARS], False)]
    earlier = str(chunk.metadata.get("question") or "")
    answer = chunk.content.split(_ANSWER_MARK, 1)[1] if _ANSWER_MARK in chunk.content else ""
    if not earlier and not answer:
        return [(chunk.content[:PASSAGE_CHARS], False)]
    passages = [(earlier[:PASSAGE_CHARS], True)] if earlier else []
    clauses = [clause.strip() for clause in _CLAUSE.split(earlier) if len(clause.split()) >= 3]
    passages += [(clause, True) for clause in clauses[:MEMORY_CLAUSES] if clause != earlier]
    passages += [(sentence, False) for sentence in split_sentences(answer)[:MEMORY_SENTENCES] if sentence.strip()]
    return passages


__all__ = [
    "OFF_TOPIC_PROBES",
    "REFERENCE_NULL_COSINE",
    "EmbeddingSupport",
    "KnowledgeBaseNull",
    "NullCosine",
    "Support",
    "SupportBasis",
    "SupportScorer",
    "about_conversation",
    "coverage",
    "knowledge_base_null",
    "memory_support",
    "name_factor",
    "names_found",
    "question_names",
    "relevance_support",
    "user_statement",
]
