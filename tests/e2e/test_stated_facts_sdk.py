"""Issue 17, item 10, through the SDK on the embedded defaults (Milvus Lite knowledge base, SQLite memory, the
packaged embedding model): what the user said about themself answers questions about it, quoted and cited as
"you said, earlier in this conversation"; a fact never stated is not found; the assistant's words are never
cited as the user's. Extractive (no model) and generated (a scripted model) answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from researchcrew.assistant import ResearchAssistant
from researchcrew.contracts import FinalResponse
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.memory.store import MemoryStore
from researchcrew.settings import MilvusSettings, Settings
from researchcrew.testing.llm import FakeLLM, Message
from tests.e2e.support import assert_every_claim_cited, offline_settings
from tests.memory_store.conftest import add

pytestmark = pytest.mark.slow  # loads the embedding model and starts Milvus Lite (once per session)

HERE = "you said, earlier in this conversation"
# What the user tells the assistant, one message each, and questions about each fact in several phrasings.
TOLD = {
    "my project code is BLUEFALCON-7731": (
        "BLUEFALCON-7731",
        ["what is my project code?", "What did I say my project code was?", "remind me of my project code"],
    ),
    "call me Zed": ("Zed", ["what's my name?", "Who am I?"]),
    "our deadline is March 3rd": ("March 3rd", ["when is our deadline?", "Can you remind me what our deadline is?"]),
    "I'm using Postgres for the database": ("Postgres", ["which database am I using?"]),
}


def _settings(tmp_path: Path, demo_kb_settings: Settings) -> Settings:
    return offline_settings(tmp_path, milvus=MilvusSettings(uri=demo_kb_settings.milvus_uri))


def said(response: FinalResponse) -> list[Any]:
    """The citations that attribute a statement to the user."""
    return [c for c in response.citations if (c.location or "").startswith("you said")]


def assert_not_found(response: FinalResponse) -> None:
    assert response.answer_kind in ("uncertainty", "clarification"), response.final_reason
    assert response.confidence_level == "insufficient"
    assert "could not find" in response.answer or "found nothing" in response.answer
    assert said(response) == []


async def test_facts_the_user_stated_answer_questions_about_them(
    tmp_path: Path, demo_kb: KnowledgeBase, demo_kb_settings: Settings
) -> None:
    async with ResearchAssistant(_settings(tmp_path, demo_kb_settings), knowledge_base=demo_kb) as assistant:
        for statement in TOLD:
            await assistant.ask(statement, user_id="ada", session_id="s1")
        assert await assistant.flush_memory(timeout_s=60)
        answers = {
            (statement, question): await assistant.ask(question, user_id="ada", session_id="s1")
            for statement, (_, questions) in TOLD.items()
            for question in questions
        }
        never_said = await assistant.ask("what is my favourite colour?", user_id="ada", session_id="s1")
        later = await assistant.ask("what is my project code?", user_id="ada", session_id="s2")

    for (statement, question), response in answers.items():
        value = TOLD[statement][0]
        assert response.answer_kind == "extractive", (question, response.final_reason)
        assert response.confidence_level != "insufficient", (question, response.final_reason)
        assert value in response.answer, (question, response.answer)
        [citation] = response.citations
        assert (citation.source_type, citation.location) == ("memory", HERE), question
        assert citation.snippet == f'You said: "{statement}".'  # the user's words, not the assistant's reply
        assert_every_claim_cited(response)
    assert_not_found(never_said)
    assert "BLUEFALCON" not in never_said.answer and "Zed" not in never_said.answer
    assert "BLUEFALCON-7731" in later.answer
    assert [c.location for c in later.citations] == ["you said, in an earlier conversation (session s1)"]


async def test_what_only_the_assistant_said_is_not_the_users_fact(
    tmp_path: Path, demo_kb: KnowledgeBase, demo_kb_settings: Settings, memory_store: MemoryStore
) -> None:
    # The assistant suggested a code (word for word what the question asks about); the user never stated one.
    await add(
        memory_store,
        "ada",
        "s1",
        "Can you suggest a code name for my project?",
        "Your project code could be REDFOX-12. My project code is REDFOX-12 too [1].",
    )
    settings = _settings(tmp_path, demo_kb_settings)
    async with ResearchAssistant(settings, knowledge_base=demo_kb, memory_store=memory_store) as assistant:
        response = await assistant.ask("what is my project code?", user_id="ada", session_id="s1")

    assert_not_found(response)
    assert "REDFOX-12" not in response.answer


async def test_a_generated_answer_gets_the_users_statement_marked_as_theirs(
    tmp_path: Path, demo_kb: KnowledgeBase, demo_kb_settings: Settings, memory_store: MemoryStore
) -> None:
    prompts: list[str] = []

    def reply(messages: list[Message]) -> str:
        prompts.append("\n".join(str(m["content"]) for m in messages))
        claim = {"text": "You said your project code is BLUEFALCON-7731.", "citations": [1]}
        return json.dumps({"sections": [{"heading": "", "perspective": None, "claims": [claim]}]})

    await add(memory_store, "ada", "s1", "my project code is BLUEFALCON-7731", "I found nothing on this question.")
    llm = FakeLLM([reply])
    settings = _settings(tmp_path, demo_kb_settings)
    async with ResearchAssistant(
        settings, knowledge_base=demo_kb, memory_store=memory_store, llm=llm, remember=False
    ) as assistant:
        response = await assistant.ask("what is my project code?", user_id="ada", session_id="s1")

    assert response.answer_kind == "generated", response.final_reason
    assert [c.location for c in response.citations] == [HERE]
    [prompt] = prompts
    evidence_1 = prompt.split("<<<EVIDENCE 1>>>", 1)[1].split("<<<END EVIDENCE 1>>>", 1)[0]
    assert f"speaker: the user, about themself ({HERE})" in evidence_1
    assert "my project code is BLUEFALCON-7731" in evidence_1
    assert "The answer given then" not in prompt  # the assistant's earlier reply is not offered as evidence
