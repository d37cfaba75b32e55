"""Issue 17, item 10: ``memory_recall`` answers a question about the user's own facts with what the user said, on
SQLite and PostgreSQL (the ``store`` fixture): found even where word-overlap recall misses it ("call me Zed" for
"what's my name?"), across the user's sessions, never another user's, and never the assistant's words."""

from __future__ import annotations

from researchcrew.memory.store import MemoryStore
from researchcrew.tools.memory_recall import MemoryTool
from tests.memory_store.conftest import add

ANSWER = "I found nothing on this question in your knowledge base."


def statements_of(chunks: list) -> list[str]:  # type: ignore[type-arg]
    return [c.metadata["statement"] for c in chunks if c.metadata.get("recalled_as") == "user_statement"]


async def test_the_users_statement_answers_a_question_that_shares_no_word_with_it(store: MemoryStore) -> None:
    said = await add(store, "ada", "s1", "call me Zed", ANSWER)
    await add(store, "ada", "s1", "What is mutation testing?", "Mutation testing injects faults [1].", minutes=1)

    result = await MemoryTool(store).search("what's my name?", user_id="ada", session_id="s1")

    assert result.ok, result.failure
    [chunk] = [c for c in result.chunks if c.metadata.get("recalled_as") == "user_statement"]
    assert chunk.content == 'You said: "call me Zed".'
    assert (chunk.source_id, chunk.metadata["same_session"]) == (said, True)
    assert chunk.title == "What you said earlier in this conversation"
    assert "The answer given then" not in " ".join(c.content for c in result.chunks if c.source_id == said)


async def test_a_fact_stated_in_an_earlier_session_is_recalled_newest_first(store: MemoryStore) -> None:
    await add(store, "ada", "s0", "my project code is BLUEFALCON-7731", ANSWER)
    await add(store, "ada", "s0", "Actually, my project code is REDFOX-12 now.", ANSWER, minutes=5)

    result = await MemoryTool(store).search("What did I say my project code was?", user_id="ada", session_id="s1")

    assert statements_of(result.chunks) == [
        "my project code is REDFOX-12 now",
        "my project code is BLUEFALCON-7731",
    ]
    assert all(not c.metadata["same_session"] for c in result.chunks if c.metadata.get("recalled_as"))
    narrowed = await MemoryTool(store).search(
        "what is my project code?", user_id="ada", session_id="s1", scope="session"
    )
    assert statements_of(narrowed.chunks) == []  # this session was never told


async def test_only_the_users_words_count_not_the_assistants(store: MemoryStore) -> None:
    await add(
        store,
        "ada",
        "s1",
        "Can you suggest a code name for my project?",
        "My project code is REDFOX-12, and your project code could be REDFOX-12 too [1].",
    )
    result = await MemoryTool(store).search("what is my project code?", user_id="ada", session_id="s1")
    assert statements_of(result.chunks) == []


async def test_another_users_statement_is_never_recalled(store: MemoryStore) -> None:
    await add(store, "bob", "s1", "call me Bob", ANSWER)
    result = await MemoryTool(store).search("what's my name?", user_id="ada", session_id="s1")
    assert result.chunks == [] or statements_of(result.chunks) == []
