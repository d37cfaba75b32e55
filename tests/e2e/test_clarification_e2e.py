"""Clarifying questions in quick answers, through the SDK: asked when the question is unclear, the next message of the
session taken as the reply (also by another process, from the conversation history), "just answer" answering the
question as asked, and an unrelated new question left alone."""

from __future__ import annotations

from pathlib import Path

from researchcrew.assistant import ResearchAssistant
from researchcrew.embedding.embedder import Embedder
from researchcrew.memory.store import MemoryStore
from tests.deep.corpus import CorpusTool
from tests.e2e.support import offline_settings

VAGUE = "What is known about the screening method?"


async def test_the_next_message_is_the_reply_to_the_clarifying_questions(tmp_path: Path) -> None:
    tool = CorpusTool(only_if="pooled")
    async with ResearchAssistant(offline_settings(tmp_path), tools=[tool], remember=False) as assistant:
        asked = await assistant.ask(VAGUE, session_id="s1")
        assert asked.answer_kind == "clarification" and asked.clarification is not None
        assert asked.clarification.reason == "too_broad" and asked.citations == []

        answered = await assistant.ask("pooled testing of samples", session_id="s1")
        assert answered.answer_kind == "extractive" and answered.citations
        assert answered.query.text == f"{VAGUE} (pooled testing of samples)"
        assert tool.queries[-1].startswith(answered.query.text)

        again = await assistant.ask(VAGUE, session_id="s1")  # asks again: the last answer closed the clarification
        assert again.answer_kind == "clarification"
        declined = await assistant.ask("just answer", session_id="s1")
        assert declined.answer_kind == "uncertainty" and declined.query.text == VAGUE  # as asked, never asked twice

        await assistant.ask(VAGUE, session_id="s2")
        other = await assistant.ask("What is the capital of Australia?", session_id="s2")
        assert other.query.text == "What is the capital of Australia?"  # a new question, not a reply


async def test_another_process_takes_the_reply_from_the_conversation_history(
    tmp_path: Path, embedder: Embedder
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}"
    settings = offline_settings(tmp_path)
    store = await MemoryStore.open(url, embedder=embedder)
    try:
        async with ResearchAssistant(settings, tools=[CorpusTool(only_if="pooled")], memory_store=store) as first:
            assert (await first.ask(VAGUE, user_id="ada", session_id="s1")).answer_kind == "clarification"
    finally:
        await store.close()
    store = await MemoryStore.open(url, embedder=embedder)
    try:
        async with ResearchAssistant(settings, tools=[CorpusTool(only_if="pooled")], memory_store=store) as second:
            reply = await second.ask("pooled testing of samples", user_id="ada", session_id="s1")
            elsewhere = await second.ask("pooled testing of samples", user_id="ada", session_id="s2")
    finally:
        await store.close()
    assert reply.query.text == f"{VAGUE} (pooled testing of samples)" and reply.answer_kind == "extractive"
    assert elsewhere.query.text == "pooled testing of samples"  # another session has no open clarification
