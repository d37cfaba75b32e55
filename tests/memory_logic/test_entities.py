"""Entity and relationship extraction: rule-based on real research exchanges, and with an LLM (the shared fake)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from researchcrew.pipeline.remember._entities import (
    ABBREVIATION_OF,
    CO_OCCURS,
    RuleBasedExtractor,
    clean_text,
    find_entities,
    normalize,
    sentences,
)
from researchcrew.pipeline.remember._entities_llm import LLMEntityExtractor, parse_answer
from researchcrew.testing.llm import FakeLLM
from tests.memory_logic import exchanges

rules = RuleBasedExtractor()


def _types(question: str, answer: str) -> dict[str, str]:
    return {m.name: m.type for m in rules.extract_sync([question, answer]).mentions}


# ---- what the rules find in real exchanges ----------------------------------------------------------------------


def test_rag_exchange() -> None:
    found = _types(*exchanges.RAG)
    assert found == {
        "Retrieval-Augmented Generation": "method",
        "RAG": "method",
        "Dense Passage Retrieval": "method",
        "DPR": "method",
        "2005.11401": "paper",
        "BART": "model",
        "T5": "model",
        "Lewis": "person",
        "Natural Questions": "concept",
        "Wikipedia": "concept",
    }


def test_bert_exchange() -> None:
    found = _types(*exchanges.BERT)
    assert found == {
        "BERT": "model",
        "Bidirectional Encoder Representations from Transformers": "model",
        "Jacob Devlin": "person",
        "Google AI Language": "organization",
        "MLM": "method",
        "masked language modeling": "method",
        "BooksCorpus": "dataset",
        "English Wikipedia": "concept",
        "RoBERTa": "model",
        "GLUE": "dataset",
        "SQuAD": "dataset",
        "10.18653/v1/N19-1423": "paper",
    }


def test_scifact_exchange() -> None:
    found = _types(*exchanges.SCIFACT)
    assert found == {
        "SciFact": "dataset",
        "Allen Institute for AI": "organization",
        "VeriSci": "concept",
        "BEIR": "dataset",
        "NDCG@10": "metric",
        "BM25": "method",
    }


def test_dense_retrieval_exchange() -> None:
    found = _types(*exchanges.DENSE)
    assert found == {
        "Thakur": "person",
        "BEIR": "dataset",
        "2104.08663": "paper",
        "BM25": "method",
        "DPR": "method",
        "ColBERT": "model",
        "SPLADE": "model",
        "Reciprocal Rank Fusion": "method",
        "RRF": "method",
    }


@pytest.mark.parametrize("name", list(exchanges.ALL))
def test_no_junk_from_sentence_starts_headings_emphasis_or_labels(name: str) -> None:
    question, answer = exchanges.ALL[name]
    names = {normalize(m.name) for m in rules.extract_sync([question, answer]).mentions}
    junk = {
        "overview",
        "however",
        "it",
        "the",
        "on",
        "not always",
        "systems",
        "supports",
        "refutes",
        "in",
        "what",
        "how",
        "is",
        "unlike",
        "late",
        "hybrid",
        "transformers",
        "ai",
        "google",
    }
    assert not names & junk


def test_relations_co_occurrence_is_symmetric_and_grows_with_shared_sentences() -> None:
    text = "BM25 and DPR were compared on BEIR. Later, BM25 and DPR were fused. SciFact is small."
    found = rules.extract_sync([text])
    pairs = {(r.source, r.target): r for r in found.relations}
    bm25_dpr = pairs.get(("BM25", "DPR")) or pairs[("DPR", "BM25")]
    bm25_beir = pairs.get(("BM25", "BEIR")) or pairs[("BEIR", "BM25")]
    assert bm25_dpr.relation == CO_OCCURS and bm25_dpr.symmetric
    assert bm25_dpr.confidence > bm25_beir.confidence  # two shared sentences beat one
    assert not any("SciFact" in (r.source, r.target) for r in found.relations)  # alone in its sentence
    assert len(pairs) == len(found.relations)  # each pair once (the store keeps both directions)


def test_acronym_definitions_become_abbreviation_relations_both_ways_round() -> None:
    found = rules.extract_sync([exchanges.BERT[1], exchanges.RAG[1]])
    defined = {(r.source, r.target) for r in found.relations if r.relation == ABBREVIATION_OF}
    assert defined == {
        ("BERT", "Bidirectional Encoder Representations from Transformers"),
        ("MLM", "masked language modeling"),
        ("RAG", "Retrieval-Augmented Generation"),
        ("DPR", "Dense Passage Retrieval"),
    }


def test_repeated_mentions_in_one_exchange_are_one_entity_with_more_confidence() -> None:
    once = {m.name: m for m in rules.extract_sync(["We evaluate on SciFact."]).mentions}
    thrice = {
        m.name: m for m in rules.extract_sync(["We evaluate on SciFact. SciFact is small. So is SciFact."]).mentions
    }
    assert list(thrice) == ["SciFact"] and thrice["SciFact"].confidence > once["SciFact"].confidence


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("See arXiv:2104.12255v2 and hep-th/9901001v1.", {"2104.12255", "hep-th/9901001"}),
        ("The DOI is 10.1038/nature14539).", {"10.1038/nature14539"}),
        ("Scores rose from 2019.12345 to 2020.5.", set()),  # "2019.12345" would be month 19: not an arXiv id
        ("LLMs such as GPT-4 and Llama-2-7B hallucinate.", {"LLM", "GPT-4", "Llama-2-7B"}),
        ("NDCG@10 and MRR are ranking metrics.", {"NDCG@10", "MRR"}),
        ("IMPORTANT: THE RESULTS ARE IN.", set()),
    ],
)
def test_identifiers_and_names(text: str, expected: set[str]) -> None:
    assert {f.name for f in find_entities(text)} == expected


def test_sentences_do_not_split_after_abbreviations_or_inside_ids() -> None:
    split = [s for s, _ in sentences("Lewis et al. (2020) proposed RAG, e.g. for QA. It uses arXiv:2005.11401 well.")]
    assert split == ["Lewis et al. (2020) proposed RAG, e.g. for QA.", "It uses arXiv:2005.11401 well."]


def test_markdown_links_and_citation_markers_are_cleaned_but_link_targets_kept() -> None:
    cleaned = clean_text("**RAG** [1, 2] is in [the paper](https://arxiv.org/abs/2005.11401) [3].")
    assert cleaned == "RAG  is in the paper (https://arxiv.org/abs/2005.11401) ."
    assert {f.name for f in find_entities(cleaned)} == {"RAG", "2005.11401"}


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.characters(codec="utf-8", categories=["L", "N", "P", "Zs", "S"]), max_size=400)
    | st.lists(
        st.sampled_from(
            [
                "BERT",
                "SciFact",
                "The",
                "Dense",
                "Retrieval",
                "(DPR)",
                "of",
                "et",
                "al.",
                ".",
                "2104.12255",
                "10.1/x",
                "GPT-4",
                "\n",
                "##",
                "-",
                "Hinton",
                "and",
            ]
        ),
        max_size=60,
    ).map(" ".join)
)
def test_extraction_never_fails_and_only_names_what_the_text_contains(text: str) -> None:
    found = rules.extract_sync([text])
    haystack = clean_text(text)
    for mention in found.mentions:
        assert 0 <= mention.confidence <= 1
        assert mention.name in haystack or mention.type == "paper" or mention.name + "s" in haystack
    names = {m.name for m in found.mentions}
    for relation in found.relations:
        assert relation.source in names and relation.target in names and relation.source != relation.target


# ---- with an LLM ------------------------------------------------------------------------------------------------

LLM_ANSWER = """```json
{"entities": [
  {"name": "SciFact", "type": "dataset", "confidence": 0.97},
  {"name": "VeriSci", "type": "model", "confidence": 0.8},
  {"name": "Allen Institute for AI", "type": "organization", "confidence": 0.9},
  {"name": "FEVER", "type": "dataset", "confidence": 0.9}
 ],
 "relations": [
  {"source": "VeriSci", "target": "SciFact", "relation": "evaluated on", "confidence": 0.85},
  {"source": "SciFact", "target": "Allen Institute for AI", "relation": "released_by", "confidence": 0.8},
  {"source": "SciFact", "target": "FEVER", "relation": "similar_to", "confidence": 0.6}
 ]}
```"""


async def test_llm_extraction_adds_types_and_typed_relations_and_drops_what_the_text_lacks() -> None:
    llm = FakeLLM([LLM_ANSWER])
    found = await LLMEntityExtractor(llm).extract(list(exchanges.SCIFACT))

    assert found.method == "llm"
    types = {m.name: m.type for m in found.mentions}
    assert types["VeriSci"] == "model"  # the LLM's type replaces the rules' "concept"
    assert "FEVER" not in types  # not in the text: invented
    assert types["NDCG@10"] == "metric" and types["BM25"] == "method"  # the rules' finds are kept
    typed = {(r.source, r.relation, r.target) for r in found.relations if r.relation != CO_OCCURS}
    assert typed == {("VeriSci", "evaluated_on", "SciFact"), ("SciFact", "released_by", "Allen Institute for AI")}
    assert all(m.confidence <= 0.95 for m in found.mentions)
    (call,) = llm.calls
    assert call.asynchronous and call.messages[0]["role"] == "system"
    assert "SciFact" in call.messages[1]["content"]


@pytest.mark.parametrize(
    "failure",
    [
        "I could not find any entities, sorry.",
        '{"entities": [{"name": ""}]}',
        '{"entities": "SciFact"}',
        RuntimeError("provider exploded"),
        ConnectionError("refused"),
    ],
)
async def test_llm_failures_fall_back_to_the_rules(failure: str | BaseException) -> None:
    found = await LLMEntityExtractor(FakeLLM([failure])).extract(list(exchanges.SCIFACT))
    expected = rules.extract_sync(list(exchanges.SCIFACT))
    assert found.method == "rules" and found.mentions == expected.mentions


async def test_a_slow_llm_is_cut_off_and_the_rules_answer() -> None:
    llm = FakeLLM([LLM_ANSWER], delay_s=5)
    found = await LLMEntityExtractor(llm, timeout_s=0.2).extract(list(exchanges.SCIFACT))
    assert found.method == "rules"


def test_parse_answer_accepts_bare_json_and_snake_cases_relations() -> None:
    answer = parse_answer(
        'Sure: {"entities": [], "relations": [{"source": "a", "target": "b", '
        '"relation": "Evaluated On"}]} Hope this helps.'
    )
    assert answer.relations[0].relation == "evaluated_on"
