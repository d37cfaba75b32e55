"""Plans from the evidence (issue 21 item 1): the rule plan's sub-questions are facets of what the probe found —
groups of its documents named by the phrases they share — worded as questions about the broad topic, and never
carry template artefacts: conversation text, "What is known about", a year the evidence does not hold, repeated
words, a sentence ending on a function word. With an LLM, the plan prompt gets the same facets."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import pytest

from researchcrew.contracts import ContextChunk
from researchcrew.deep._facets import artefacts, find_facets, topic_phrase
from researchcrew.deep._plan import llm_plan, rule_plan, topic_of
from researchcrew.embedding.embedder import Embedder
from researchcrew.testing import FakeLLM
from tests.deep.corpus import PASSAGES
from tests.e2e.support import demo_documents, shared_embedder

# Broad questions over the bundled demo corpus (105 arXiv abstracts, mostly about testing of one kind or another).
BROAD_QUESTIONS = [
    "How are machine learning systems tested?",
    "What is known about group testing?",
    "How are large language models used in software testing?",
    "What is known about statistical hypothesis testing?",
    "How are autonomous driving systems tested?",
    "What causes flaky tests and how are they handled?",
    "Where has metamorphic testing been applied?",
    "How is regression testing organised in continuous integration?",
    "What is known about mutation testing?",
    "Tell me about fuzzing",
    "How do researchers test deep learning models?",
    "What is known about quantum computing?",
]

# What a sub-question must never read like: (text, what ``artefacts`` must name). The first comes from issue 21.
FORBIDDEN = [
    ("What is known about earlier question in testing ML systems?", "conversation text"),
    ("What did you asked about testing before?", "conversation text"),
    ("What is known about mutation testing?", "stock template"),
    ("What has been reported on testing ML systems since 2026?", "year 2026 not in the evidence"),
    ("What is the role of testing testing in software?", "word repeated back to back"),
    ("Which testing methods of testing suit testing?", "content word used three times"),
    ("What is the role of mutation in the?", "ends on a function word"),
    ("What have studies of fuzzing found about?", "ends on a function word"),
    ("What is the role of () in fuzzing?", "empty brackets"),
    ("What is fuzzing? How is it used?", "question mark mid-text"),
]


@pytest.mark.parametrize(("text", "named"), FORBIDDEN)
def test_each_forbidden_pattern_is_named(text: str, named: str) -> None:
    assert named in artefacts(text, evidence_years=[2019, 2023])


@pytest.mark.parametrize(
    "text",
    [
        "What is the role of metamorphic testing in testing machine learning systems?",
        "What have studies of online GANs found about generating tests automatically?",
        "Which results on sample complexity bear on statistical hypothesis testing since 2019?",  # 2019 is evidence
    ],
)
def test_clean_sub_questions_have_no_artefacts(text: str) -> None:
    assert artefacts(text, evidence_years=[2019, 2023]) == []


@pytest.mark.parametrize(
    ("question", "phrase"),
    [
        ("How are machine learning systems tested?", "testing machine learning systems"),
        (
            "How is regression testing organised in continuous integration?",
            "organising regression testing in continuous integration",
        ),
        ("How are cyber-physical and embedded systems tested?", "testing cyber-physical and embedded systems"),
        ("How is HIV infection treated and prevented?", "treating and preventing HIV infection"),
        ("How do transformers use attention?", "how transformers use attention"),
        ("What causes flaky tests and how are they handled?", "flaky tests"),
        ("What is known about mutation testing?", "mutation testing"),
    ],
)
def test_the_topic_reads_as_a_phrase(question: str, phrase: str) -> None:
    assert topic_phrase(question, topic_of(question)) == phrase


# ---- the planner over the demo corpus ----------------------------------------------------------------------------


class DemoProbe:
    """The demo corpus embedded once; a probe is its best 20 abstracts for a question (dense search, as the
    knowledge base's dense half), plus one memory chunk of an earlier exchange, as a deep run's probe has."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.documents = demo_documents([""])
        texts = [f"{d.title}. {d.text}" for d in self.documents]
        self.vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float64)

    def __call__(self, question: str, count: int = 20) -> list[ContextChunk]:
        query = np.asarray(self.embedder.embed_query(question), dtype=np.float64).ravel()
        scores = self.vectors @ query
        order = np.argsort(-scores)[:count]
        chunks = [
            ContextChunk(
                chunk_id=f"demo-{index}",
                source_type="rag",
                content=self.documents[index].text[:600],
                title=self.documents[index].title,
                source_id=self.documents[index].source_key,
                source_date=self.documents[index].source_date,
                semantic_relevance=float(max(0.0, min(1.0, scores[index]))),
                tool_name="rag_search",
            )
            for index in order
        ]
        memory = ContextChunk(
            chunk_id="memory-1",
            source_type="memory",
            content=f"earlier question: {question} Answer: sources disagree; the language model wrote this.",
            title="earlier question in this conversation",
            source_date=datetime(2026, 11, 1, tzinfo=UTC),
            semantic_relevance=0.9,
            tool_name="memory_recall",
        )
        return [memory, *chunks]


@pytest.fixture(scope="module")
def demo_probe() -> DemoProbe:
    return DemoProbe(shared_embedder())


def _years(probe: Sequence[ContextChunk]) -> list[int]:
    return [c.source_date.year for c in probe if c.source_date is not None and c.source_type != "memory"]


def test_plans_over_many_broad_questions_carry_no_template_artefacts(demo_probe: DemoProbe) -> None:
    flawed: list[str] = []
    from_facets = 0
    for number, question in enumerate(BROAD_QUESTIONS):
        probe = demo_probe(question)
        embedder = demo_probe.embedder if number % 2 else None  # both ways: with the model loaded, and words alone
        plan = rule_plan(question, None, max_items=8, evidence=probe, embedder=embedder)
        assert 1 <= len(plan.items) <= 8 and plan.written_by == "rules"
        texts = [item.question for item in plan.items]
        assert len({text.lower() for text in texts}) == len(texts)
        from_facets += all(item.rationale.split(" ", 1)[0].isdigit() for item in plan.items)
        flawed += [f"{text}: {found}" for text in texts if (found := artefacts(text, _years(probe)))]
        flawed += [text for text in texts if "earlier" in text.lower() or "conversation" in text.lower()]
    assert flawed == []
    assert from_facets >= len(BROAD_QUESTIONS) - 2  # nearly every plan comes from the evidence, not the angles


def test_each_facet_names_its_own_documents_and_reads_evidence_the_others_do_not(demo_probe: DemoProbe) -> None:
    question = "How are machine learning systems tested?"
    probe = demo_probe(question)
    facets = find_facets(question, topic_of(question), probe, max_facets=8, embedder=demo_probe.embedder)
    assert len(facets) >= 2
    years = set(_years(probe))
    for facet in facets:
        assert facet.keys and set(facet.years) <= years and "memory-1" not in facet.keys
        assert set(facet.keys) & set(facet.top_evidence)  # its question finds its own documents
        assert facet.label.lower() in facet.question.lower()
    for first, second in itertools.combinations(facets, 2):
        assert len(set(first.top_evidence) & set(second.top_evidence)) <= 1


def test_without_the_embedding_model_facets_come_from_the_words_alone() -> None:
    probe = [
        ContextChunk(
            chunk_id=chunk_id,
            source_type="rag",
            content=text,
            title=title,
            source_id=chunk_id,
            semantic_relevance=0.8,
            tool_name="corpus_search",
        )
        for chunk_id, (title, text) in PASSAGES.items()
    ]
    plan = rule_plan("What is known about pooled testing?", None, max_items=4, evidence=probe)
    assert len(plan.items) >= 2
    assert all(artefacts(item.question) == [] for item in plan.items)
    assert all("pool" in item.question.lower() for item in plan.items)


def test_with_nothing_found_the_plan_asks_the_topic_from_a_few_angles_without_dates() -> None:
    plan = rule_plan("What is known about fuzzing?", None, max_items=8, evidence=[])
    assert plan.items[0].question == "What does fuzzing cover, and how is it defined?"
    assert all(artefacts(item.question) == [] for item in plan.items)


async def test_the_models_plan_prompt_gets_the_same_facets(demo_probe: DemoProbe) -> None:
    question = "How are autonomous driving systems tested?"
    probe = demo_probe(question)
    facets = find_facets(question, topic_of(question), probe, max_facets=5, embedder=demo_probe.embedder)
    reply = json.dumps({"sub_questions": [{"question": "How are driving simulators used to test autonomy?"}]})
    llm = FakeLLM([reply, RuntimeError("provider down")])
    proposed = await llm_plan(llm, question, None, probe, max_items=5, facets=facets)
    prompt = llm.calls[0].messages[1]["content"]
    assert proposed.written_by == "llm"
    assert "<<<FACETS FOUND>>>" in prompt and all(facet.label in prompt for facet in facets)
    assert "earlier question in this conversation" not in prompt  # memory is not material for a plan
    fallback = await llm_plan(llm, question, None, probe, max_items=5, facets=facets)
    assert fallback.written_by == "rules"
    assert [item.question for item in fallback.items] == [facet.question for facet in facets]
