"""Follow-up questions end to end: a real knowledge base (demo corpus), the real memory store and Memory stage; the
follow-up is asked right after the first answer, while that answer is still being remembered in the background."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from researchcrew.assistant import ResearchAssistant
from researchcrew.contracts import FinalResponse, ProgressEvent
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.settings import MilvusSettings, Settings
from researchcrew.testing.llm import FakeLLM, Message
from tests.e2e.support import offline_settings

pytestmark = pytest.mark.slow  # loads the embedding model and starts Milvus Lite (once per session)

FIRST = "What is metamorphic testing?"
FOLLOW_UP = "What are its limitations?"
STANDALONE = "What are the limitations of metamorphic testing?"


def kb_settings(tmp_path: Path, demo_kb_settings: Settings, **fields: Any) -> Settings:
    return offline_settings(tmp_path, milvus=MilvusSettings(uri=demo_kb_settings.milvus_uri), **fields)


def cites_metamorphic_testing(response: FinalResponse) -> bool:
    return any("metamorphic" in (citation.title or "").lower() for citation in response.citations)


async def test_a_follow_up_in_a_session_is_researched_about_the_previous_subject(
    tmp_path: Path, demo_kb: KnowledgeBase, demo_kb_settings: Settings
) -> None:
    async with ResearchAssistant(kb_settings(tmp_path, demo_kb_settings), knowledge_base=demo_kb) as assistant:
        first = await assistant.ask(FIRST, user_id="ada", session_id="s1")
        events: list[ProgressEvent] = []
        answer: FinalResponse | None = None
        async for item in assistant.stream(FOLLOW_UP, user_id="ada", session_id="s1"):
            if isinstance(item, FinalResponse):
                answer = item
            else:
                events.append(item)
        alone = await assistant.ask(FOLLOW_UP, user_id="ada", session_id="s2")  # a new session: nothing to resolve
        assert await assistant.flush_memory(timeout_s=60)
        exported = await assistant.export_memory("ada")
        assert await assistant.last_session("ada") == "s2" and await assistant.last_session("nobody") is None

    assert first.rewrite is None and cites_metamorphic_testing(first)
    assert answer is not None and answer.rewrite is not None
    assert (answer.query.text, answer.rewrite.standalone, answer.rewrite.method) == (FOLLOW_UP, STANDALONE, "rule")
    assert answer.answer_kind == "extractive" and cites_metamorphic_testing(answer)
    rewrite = next(e for e in events if e.stage == "rewrite" and e.status == "finished")
    assert rewrite.detail["standalone"] == STANDALONE
    retrieve = next(e for e in events if e.stage == "retrieve" and e.status == "started")
    assert retrieve.detail["query_text"] == STANDALONE
    assert alone.rewrite is None and not cites_metamorphic_testing(alone)
    # Memory keeps the conversation in the user's words, and the session's summary knows the subject.
    questions = [(e["session_id"], e["question"]) for e in exported["exchanges"]]
    assert questions == [("s1", FIRST), ("s1", FOLLOW_UP), ("s2", FOLLOW_UP)]
    assert exported["exchanges"][1]["context"]["standalone_question"] == STANDALONE
    summaries = {s["session_id"]: s for s in exported["session_summaries"]}
    assert summaries["s1"]["turns"] == 2 and summaries["s1"]["topics"] == ["metamorphic testing"]


async def test_with_an_llm_the_model_rewrites_and_its_tokens_are_counted(
    tmp_path: Path, demo_kb: KnowledgeBase, demo_kb_settings: Settings
) -> None:
    def reply(messages: list[Message]) -> str:
        system = str(messages[0]["content"])
        if "follow-up question" in system:
            return "Which limitations does metamorphic testing have in practice?"
        if "Research synthesizer" in system:
            body = {"heading": "", "perspective": None, "claims": [{"text": "It needs relations.", "citations": [1]}]}
            return json.dumps({"sections": [body]})
        return json.dumps({"entities": [], "relations": []})  # entity extraction, in the background

    llm = FakeLLM([reply] * 20)
    settings = kb_settings(tmp_path, demo_kb_settings)
    async with ResearchAssistant(settings, knowledge_base=demo_kb, llm=llm) as assistant:
        await assistant.ask(FIRST, user_id="ada", session_id="s1")
        answer = await assistant.ask("Which limitations does it have in practice?", user_id="ada", session_id="s1")
        await assistant.flush_memory()

    assert answer.rewrite is not None and answer.rewrite.method == "llm"
    assert answer.rewrite.standalone == "Which limitations does metamorphic testing have in practice?"
    [rewrite_call] = [c for c in llm.calls if "follow-up question" in str(c.messages[0]["content"])]
    assert FIRST in str(rewrite_call.messages[1]["content"])  # the summary held the first exchange already
    usage = answer.token_usage
    assert usage.follow_up.calls == 1 and usage.follow_up.total_tokens == rewrite_call.usage["total_tokens"]  # type: ignore[index]
    assert usage.synthesis.calls == 1 and usage.total.calls == 2
