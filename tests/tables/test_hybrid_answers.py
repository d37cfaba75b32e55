"""The hybrid route's answer text (issue 22): a question that is half a table and half text ("Which studies report a
sample size above 1,000 and what did they find?") is answered with the table's answer first — how many rows match,
the rows' values each cited by the passage it was extracted from, how many more and how to page — then the passages'
synthesis, every statement cited and nothing cited that was not read; "show the rest" and "export that table" page
and export the hybrid answer's table. Offline (extractive) over a small corpus in Milvus Lite, through the SDK; and
with a language model, the rows are in the prompt as evidence tied to their blocks and the reply is still checked."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from researchcrew.assistant import ResearchAssistant
from researchcrew.contracts import FinalResponse
from researchcrew.embedding.embedder import Embedder
from researchcrew.knowledge.annotations import parse_question
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.knowledge.ingest import ingest_paths
from researchcrew.memory.store import MemoryStore
from researchcrew.pipeline._structured import Coverage, rule_route
from researchcrew.pipeline.synthesize._rendering import EXTRACTIVE_NOTICE
from researchcrew.settings import StructuredSettings
from researchcrew.testing.llm import FakeLLM
from tests.e2e.support import assert_every_claim_cited, offline_settings, shared_embedder

QUESTION = "Which studies report a sample size above 1,000 and what did they find?"
STUDIES = {
    "schools.md": (
        "# Pooled testing in schools\n\nSample size: 1,204\n\n"
        "Pooling saliva samples in groups of eight cut the number of tests by 80% and missed no positive case.\n"
    ),
    "clinics.md": (
        "# Pooled testing in clinics\n\nSample size: 640\n\n"
        "Pooling in clinics missed infections once prevalence rose above 10%.\n"
    ),
    "screening.md": (
        "# Mass screening by pooling\n\n**Sample size:** 5,310 participants\n\n"
        "Pools of ten kept a sensitivity of 97% and lowered the reagent cost per test to $1.10.\n"
    ),
}
SCREENING_FINDING = "Pools of ten kept a sensitivity of 97%"
SCHOOLS_FINDING = "Pooling saliva samples in groups of eight cut the number of tests by 80%"
_MARKER = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return shared_embedder()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Path:
    """A knowledge base holding the three studies (their annotations and passages), ingested once."""
    root = tmp_path_factory.mktemp("hybrid")
    folder = root / "studies"
    folder.mkdir()
    for name, text in STUDIES.items():
        (folder / name).write_text(text, encoding="utf-8")
    with KnowledgeBase(offline_settings(root / "data"), embedder=embedder) as kb:
        report = ingest_paths(kb, folder, progress=False)
        assert report.aborted is None and not report.errors, report.errors
        assert report.annotations_added >= 3
    return root / "data"


def _assistant(data_dir: Path, embedder: Embedder, memory: MemoryStore, **options: object) -> ResearchAssistant:
    settings = offline_settings(data_dir, enabled_sources=["rag"], structured=StructuredSettings(page_size=1))
    kb = KnowledgeBase(settings, embedder=embedder)
    return ResearchAssistant(settings, knowledge_base=kb, memory_store=memory, remember=False, **options)  # type: ignore[arg-type]


def _cited_chunks(response: FinalResponse, number: int) -> set[str]:
    [citation] = [citation for citation in response.citations if citation.number == number]
    return {citation.chunk_id, *(passage.chunk_id for passage in citation.passages)}


def _source_of(response: FinalResponse, number: int) -> str:
    [citation] = [citation for citation in response.citations if citation.number == number]
    return citation.title or ""


def test_a_table_question_that_also_asks_what_the_passages_say_takes_the_hybrid_route() -> None:
    parsed = parse_question(QUESTION)
    assert parsed.intent == "enumeration" and parsed.text_part == "and what did they find"
    decision = rule_route(parsed, Coverage(10, True))
    assert (decision.route, decision.fallbacks) == ("hybrid", ["long_text"])
    assert "and what did they find" in decision.reason
    plain = parse_question("Which studies report a sample size above 1,000?")
    assert plain.text_part is None and rule_route(plain, Coverage(10, True)).route == "structured"
    lookup = parse_question("Which solar panels are wider than 1 m and what is their power?")
    assert lookup.text_part is None  # a field of the table, not a question for the passages


async def test_the_hybrid_answer_states_the_table_then_the_passages(
    data_dir: Path, embedder: Embedder, memory: MemoryStore
) -> None:
    async with _assistant(data_dir, embedder, memory) as assistant:
        response = await assistant.ask(QUESTION, user_id="ada", session_id="s1")
        assert response.route is not None and response.route.route == "hybrid", response.route
        assert response.answer_kind == "extractive"
        table = response.table
        assert table is not None and (table.total_rows, len(table.rows), table.more_rows) == (2, 1, 1)
        [row] = table.rows
        assert row.values[-1] == 5310 and row.citation == 1  # the first row is cited first, by its own passage
        assert row.chunk_id in _cited_chunks(response, 1) and _source_of(response, 1) == "Mass screening by pooling"

        answer = response.answer
        table_part, _, synthesis = answer.partition(EXTRACTIVE_NOTICE)
        # The table's answer first, in the structured route's words: how many rows, the rows shown, how to page.
        assert table_part.startswith(f"2 rows match “{QUESTION.rstrip('?')}”, from 2 documents.")
        assert "| Mass screening by pooling | 5310 | [1] |" in table_part
        assert "1 more row — say 'show the rest' or 'export that table'." in table_part
        # Then the passages' synthesis: what the studies found, quoted and cited by the documents they come from.
        # Then the passages' synthesis: what the study found, quoted and cited by the document it comes from.
        [line] = [line for line in synthesis.splitlines() if SCREENING_FINDING in line]
        assert line.endswith("[1].")  # the row's passage and the finding's are one source: one number
        # Every statement is cited (the rows too), every marker in the text is a listed citation, and every
        # citation is a passage of the corpus that was read.
        assert_every_claim_cited(response)
        assert response.sections[0].claims[0].text.endswith("Sample size: 5310")
        listed = {citation.number for citation in response.citations}
        assert {int(n) for group in _MARKER.findall(answer) for n in group.split(",")} <= listed
        titles = {"Pooled testing in schools", "Pooled testing in clinics", "Mass screening by pooling"}
        assert {citation.title for citation in response.citations} <= titles
        assert [citation.number for citation in response.citations] == list(range(1, len(listed) + 1))

        rest = await assistant.ask("show the rest", user_id="ada", session_id="s1")
        assert rest.table is not None and rest.table.table_id == table.table_id
        assert (rest.table.offset, [r.values[-1] for r in rest.table.rows]) == (1, [1204])
        assert "That is the last row." in rest.answer
        exported = await assistant.ask("export that table", user_id="ada", session_id="s1")
        assert exported.answer.count('\n"Mass screening by pooling","5310"') == 1
        assert exported.answer.count('\n"Pooled testing in schools","1204"') == 1


async def test_the_text_is_about_the_rows_not_the_other_studies(
    data_dir: Path, embedder: Embedder, memory: MemoryStore
) -> None:
    question = "Which studies report a sample size under 1,000 and what did they find?"
    async with _assistant(data_dir, embedder, memory) as assistant:
        response = await assistant.ask(question, user_id="ada", session_id="s3")
    assert response.route is not None and response.route.route == "hybrid"
    assert response.table is not None and [row.values[-1] for row in response.table.rows] == [640]
    synthesis = response.answer.partition(EXTRACTIVE_NOTICE)[2]
    assert "- Pooling in clinics missed infections once prevalence rose above 10% [1]." in synthesis
    assert SCREENING_FINDING not in synthesis and SCHOOLS_FINDING not in synthesis  # studies the table excludes
    assert {citation.title for citation in response.citations} == {"Pooled testing in clinics"}
    assert_every_claim_cited(response)


async def test_with_a_model_the_rows_are_evidence_in_the_prompt_and_the_reply_is_checked(
    data_dir: Path, embedder: Embedder, memory: MemoryStore
) -> None:
    # The model cites block 1 (a passage it was given) and block 99 (none): the second statement is dropped.
    reply = {
        "sections": [
            {
                "heading": "",
                "perspective": None,
                "claims": [
                    {"text": "Pooling kept sensitivity high in the large studies.", "citations": [1]},
                    {"text": "Pooling is always free.", "citations": [99]},
                ],
            }
        ]
    }
    llm = FakeLLM([json.dumps(reply)] * 3)
    async with _assistant(data_dir, embedder, memory, llm=llm) as assistant:
        response = await assistant.ask(QUESTION, user_id="ada", session_id="s2")
    assert response.route is not None and response.route.route == "hybrid"
    assert response.answer_kind == "generated" and response.table is not None
    prompt = next(
        str(message["content"])
        for call in llm.calls
        for message in call.messages
        if "<<<TABLE>>>" in str(message["content"])
    )
    block = prompt.split("<<<TABLE>>>")[1].split("<<<END TABLE>>>")[0]
    assert "rows matching: 2 (the first 1 are shown to the reader)" in block
    assert re.search(r"row 1 \(block \d+\): document: Mass screening by pooling; Sample size: 5310", block), block
    assert "do not list them again one by one" in prompt
    answer = response.answer
    assert answer.startswith("2 rows match") and "| Mass screening by pooling | 5310 | [1] |" in answer
    # The table's answer, then the model's statement after it, cited; the statement citing no given block is gone.
    assert re.search(r"\n\nPooling kept sensitivity high in the large studies \[\d+\]\.$", answer), answer
    assert "always free" not in answer and response.citation_stats.claims_removed >= 1
    assert_every_claim_cited(response)
