"""Deep research end to end, with the scripted fake LLM (issue 14's acceptance run): clarification asked and
answered, the plan edited (reworded, reordered, cut), two references followed — an arXiv id resolved through the
real ``arxiv`` client against the loopback arXiv server replaying recorded feeds, and a "[2]" citation resolved
through its reference list to a knowledge-base document by a scoped search — one remediation retry, and a final
report whose every citation is valid. The run pauses twice and is resumed each time by a new runtime on the same
memory database, as another process after a restart would."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from researchcrew.contracts import ContextChunk, FinalResponse
from researchcrew.contracts.deep import DeepProgressEvent, PlanDecision
from researchcrew.contracts.request import ResearchRequest
from researchcrew.embedding.embedder import Embedder
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.knowledge.documents import Document
from researchcrew.memory.store import MemoryStore
from researchcrew.runtime import open_runtime
from researchcrew.settings import ArxivSettings, ClarificationSettings, DeepResearchSettings, RetrievalSettings
from researchcrew.testing import FakeLLM
from researchcrew.tools.arxiv import ArxivTool, RequestSpacer
from researchcrew.tools.rag import RAGTool
from tests.e2e.support import SpyTool, assert_every_claim_cited, offline_settings
from tests.loopback.arxiv import ArxivFake
from tests.loopback.server import LoopbackServer

pytestmark = pytest.mark.slow  # the embedding model and Milvus Lite

QUESTION = "What is known about testing?"
REPLY = "bugs in BLS signature libraries, and metamorphic testing of large language models"
METAL_TITLE = "METAL: Metamorphic Testing Framework for Analyzing Large-Language Model Qualities"
NOTES = [
    Document(
        source_key="notes/llm-relations.md",
        title="Notes on metamorphic relations for chat assistants",
        text="Metamorphic relations compare a chatbot's answers to paraphrased prompts. A relation that fails "
        "reveals an inconsistency in the assistant without a test oracle.",
        source_date=datetime(2025, 2, 1, tzinfo=UTC),
        metadata={"source": "notes"},
    ),
]
LIBRARY = [
    Document(
        source_key="library/metal.pdf",
        title=METAL_TITLE,
        text="METAL applies metamorphic testing to large language models. Its metamorphic relations perturb the "
        "input text and compare the outputs, measuring qualities such as robustness, fairness and efficiency of "
        "large language models.",
        source_date=datetime(2023, 12, 11, tzinfo=UTC),
        metadata={"source": "library"},
    ),
]
WEB = [
    ContextChunk(
        chunk_id="web-bls",
        source_type="web",
        content="Several bugs were found in BLS signature libraries around the value zero; the details are in "
        "arXiv:2104.12255v1.",
        semantic_relevance=0.62,
        title="Crypto library bugs (blog)",
        url="https://example.org/bls-bugs",
        source_date=datetime(2025, 1, 10, tzinfo=UTC),
        tool_name="web_spy",
    ),
    ContextChunk(
        chunk_id="web-metal",
        source_type="web",
        content="Metamorphic relations are used to test the quality of large language models [2].\n\n"
        f"References\n[1] T. Y. Chen. Metamorphic testing: a new approach. 1998.\n[2] S. Hyland et al. {METAL_TITLE}. "
        "2023.",
        semantic_relevance=0.6,
        title="Testing LLMs (blog)",
        url="https://example.org/llm-testing",
        source_date=datetime(2025, 1, 12, tzinfo=UTC),
        tool_name="web_spy",
    ),
]


class FocusedWeb(SpyTool):
    """Web search that finds nothing for the vague question and the two pages once the question names them."""

    async def _search(
        self, query: str, *, num_results: int = 5, user_id: str | None = None, session_id: str | None = None
    ) -> list[ContextChunk]:
        self.queries.append(query)
        lowered = query.lower()
        return [
            chunk
            for chunk in self.chunks
            if ("bls" in lowered and "bls" in chunk.chunk_id)
            or ("language model" in lowered and "metal" in chunk.chunk_id)
        ]


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[Path]:
    data_dir = tmp_path_factory.mktemp("deep_kb")
    with KnowledgeBase(offline_settings(data_dir), embedder=embedder) as knowledge_base:
        report = knowledge_base.add_documents([*NOTES, *LIBRARY])
    assert report.documents_added == 2
    yield data_dir


EDITED = "How do metamorphic relations evaluate the quality of large language models?"


def draft(*sections: tuple[str, str, int]) -> str:
    """An answer draft: (heading, statement, the block it cites) per section."""
    return json.dumps(
        {
            "sections": [
                {"heading": heading, "perspective": None, "claims": [{"text": text, "citations": [number]}]}
                for heading, text, number in sections
            ]
        }
    )


def block_with(numbers: dict[int, str], text: str) -> int:
    """The number of the evidence block that contains ``text`` (a test failure, not a StopIteration, if none)."""
    found = [number for number, body in numbers.items() if text in body]
    if not found:
        raise AssertionError(f"no evidence block contains {text!r}: {numbers}")
    return found[0]


def blocks(prompt: str) -> dict[int, str]:
    """Evidence block number → its text, from a prompt."""
    return {
        int(number): body
        for number, body in re.findall(r"<<<EVIDENCE (\d+)>>>\n(.*?)<<<END EVIDENCE \1>>>", prompt, flags=re.DOTALL)
    }


class ScriptedModel:
    """The fake LLM's script, by what each prompt asks for; records the order of the calls."""

    def __init__(self) -> None:
        self.kinds: list[str] = []

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        system, user = messages[0]["content"], messages[-1]["content"]
        if "clarifying questions" in system:
            self.kinds.append("clarify")
            return json.dumps(
                {
                    "questions": [
                        {
                            "facet": "sub_topic",
                            "question": "Which systems' testing matters to you?",
                            "options": ["cryptography libraries", "language models"],
                        },
                        {"facet": "time_range", "question": "Any period?", "options": ["since 2020"]},
                    ]
                }
            )
        if "sub_questions" in system:
            self.kinds.append("plan")
            return json.dumps(
                {
                    "sub_questions": [
                        {"question": "Which bugs were found in BLS signature libraries?", "rationale": "crypto"},
                        {"question": "How do metamorphic relations test large language models?", "rationale": "LLMs"},
                        {"question": "What is the history of cryptography?", "rationale": "background"},
                    ]
                }
            )
        if "<<<REVIEW>>>" in user:
            self.kinds.append("retry")
            numbers = blocks(user)
            bls = block_with(numbers, "BLS signatures' libraries")
            metal = block_with(numbers, "METAL applies metamorphic testing")
            first = "METAL's metamorphic relations perturb the input text and compare the outputs."
            second = "Crypto bugs around zero were found in four BLS signature libraries."
            return draft(
                (f"1. {EDITED}", first, metal), ("2. Which bugs were found in BLS signature libraries?", second, bls)
            )
        if "<<<QUESTION>>>" in user and "Evidence:" in user:
            question = re.search(r"<<<QUESTION>>>\n(.*?)\n<<<END QUESTION>>>", user, flags=re.DOTALL)
            assert question is not None
            self.kinds.append(f"answer: {question.group(1)}")
            numbers = blocks(user)
            if "BLS" in question.group(1):
                bls = block_with(numbers, "BLS signatures' libraries")
                claims = [{"text": "Bugs around zero were found in four BLS signature libraries.", "citations": [bls]}]
            else:
                metal = block_with(numbers, "METAL applies")
                claims = [
                    {"text": "METAL measures robustness and fairness of large language models.", "citations": [metal]},
                    {"text": "A made-up statement citing nothing that was given.", "citations": [len(numbers) + 5]},
                ]
            return json.dumps({"sections": [{"heading": "", "perspective": None, "claims": claims}]})
        raise AssertionError(f"unexpected LLM call: {system[:80]!r} / {user[:200]!r}")


async def test_deep_research_end_to_end_with_the_scripted_model(
    kb_dir: Path, embedder: Embedder, fixtures_dir: Path, tmp_path: Path
) -> None:
    settings = offline_settings(
        kb_dir,
        retrieval=RetrievalSettings(timeout_per_source_s=5, num_results=4),
        clarification=ClarificationSettings(),
        deep=DeepResearchSettings(quality_threshold=0.9),
    )
    model = ScriptedModel()
    llm = FakeLLM([model] * 12)
    url = f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}"
    request = ResearchRequest(
        question=QUESTION,
        user_id="ada",
        session_id="s1",
        tool_options={"rag": {"filters": {"sources": ["notes"]}}},  # search the notes; references reach the library
    )
    arxiv_fake = ArxivFake(fixtures_dir / "arxiv")
    with (
        LoopbackServer(arxiv_fake) as server,
        KnowledgeBase(settings, embedder=embedder) as knowledge_base,
        closing(RequestSpacer(0)) as spacer,
        # Closed when done: its requests session keeps a keep-alive socket to the loopback server.
        closing(
            ArxivTool(
                ArxivSettings(api_url=f"{server.url}/api/query", min_interval_s=0, num_retries=0, timeout_s=5),
                spacer=spacer,
            )
        ) as arxiv,
    ):
        tools = [RAGTool(knowledge_base), FocusedWeb(WEB, source_type="web"), arxiv]

        async def runtime_segment(step: Any) -> Any:
            store = await MemoryStore.open(url, embedder=embedder)
            try:
                async with open_runtime(settings, tools=tools, llm=llm, memory_store=store, remember=False) as runtime:
                    return await step(runtime)
            finally:
                await store.close()

        async def start(runtime: Any) -> Any:
            return await (await runtime.deep_research()).research(request)

        first = await runtime_segment(start)
        assert (first.status, first.awaiting) == ("awaiting_human_feedback", "clarification")
        assert first.clarification.reason == "no_evidence" and first.clarification.written_by == "llm"
        assert first.clarification.questions[0].question == "Which systems' testing matters to you?"

        async def answer(runtime: Any) -> Any:
            await (await runtime.deep_research()).answer_clarification(first.run_id, user_id="ada", answer=REPLY)
            return await (await runtime.deep_research()).resume_research(first.run_id, user_id="ada")

        second = await runtime_segment(answer)  # a new runtime: as after a restart
        assert (second.status, second.awaiting) == ("awaiting_human_feedback", "plan_approval")
        assert second.plan.question == f"{QUESTION} ({REPLY})" and second.plan.written_by == "llm"
        assert [item.id for item in second.plan.items] == [1, 2, 3]

        events: list[DeepProgressEvent] = []
        decision = PlanDecision.edits(
            second.plan,
            cut=[3],
            order=[2],
            reword={2: "How do metamorphic relations evaluate the quality of large language models?"},
        )

        async def decide(runtime: Any) -> Any:
            await (await runtime.deep_research()).decide_plan(first.run_id, user_id="ada", decision=decision)
            return await (await runtime.deep_research()).resume_research(
                first.run_id, user_id="ada", on_event=events.append
            )

        done = await runtime_segment(decide)

    assert done.status == "completed", done.error
    report = done.report
    assert model.kinds[:4] == [
        "clarify",
        "plan",
        "answer: How do metamorphic relations evaluate the quality of large language models?",
        "answer: Which bugs were found in BLS signature libraries?",
    ]
    # The first report fails (a made-up citation, each section on one source): its flawed sections are researched
    # again once with reformulated sub-questions (issue 21), then the report is written once more.
    again = [revision.question for revision in report.revisions if revision.action == "researched_again"]
    assert again and model.kinds[4:] == [*(f"answer: {question}" for question in again), "retry"]
    # The plan as edited: reworded, reordered, the third item cut.
    assert [(item.id, item.question) for item in report.plan.items] == [
        (2, "How do metamorphic relations evaluate the quality of large language models?"),
        (1, "Which bugs were found in BLS signature libraries?"),
    ]
    assert report.clarification_answer == REPLY
    # Two references followed: the [2] citation through its list to the library's METAL paper, the arXiv id.
    kept = [(r.sub_question, r.kind, r.outcome) for r in report.references if r.outcome == "kept"]
    assert kept == [(1, "numbered", "kept"), (2, "arxiv", "kept")]
    metal, bls = (r for r in report.references if r.outcome == "kept")
    assert METAL_TITLE in metal.target and "knowledge-base document" in metal.reason
    assert bls.target == "2104.12255v1" and bls.resolved == ["arxiv:2104.12255v1"]
    id_lookups = [request.query["id_list"] for _, request in arxiv_fake.arrivals if request.query.get("id_list")]
    assert id_lookups == [["2104.12255v1"]]  # one request, through the real arxiv client
    # One remediation retry, which scored better and replaced the first report.
    first_score, retry_score = report.quality
    assert not first_score.passed and first_score.citation_correctness < 1
    assert any("pointed to evidence that was not given" in issue for issue in first_score.issues)
    assert retry_score.attempt == 2 and retry_score.citation_correctness == 1.0
    assert report.remediated and retry_score.overall > first_score.overall
    # The final report: every claim cited, every citation a chunk the run gathered (incl. the followed ones).
    response: FinalResponse = report.response
    assert_every_claim_cited(response)
    assert response.citation_stats.removed == 0
    cited = {citation.chunk_id for citation in response.citations}
    assert cited == {"arxiv:2104.12255v1", *metal.resolved[:1]}
    assert [section.heading for section in response.sections] == [
        "1. How do metamorphic relations evaluate the quality of large language models?",
        "2. Which bugs were found in BLS signature libraries?",
    ]
    assert report.budget.tokens_used > 0 and report.budget.token_budget == settings.deep.token_budget
    assert {e.sub_question for e in events if e.phase == "references" and e.detail.get("outcome") == "kept"} == {1, 2}
