"""A structured answer's table in a session through the SDK (issue 22 items 3–4): "show the rest" pages through
the last table from where the session left it, "export that table" gives CSV, ``table``/``export_table`` read it by
id; another user's or another session's table is not found; export and forget of the user include the tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from researchcrew.assistant import ResearchAssistant
from researchcrew.errors import TableNotFoundError
from researchcrew.memory.store import MemoryStore
from researchcrew.pipeline.conversation import table_action
from researchcrew.settings import Settings
from tests.deep.corpus import CorpusTool
from tests.tables.support import PANELS_QUESTION, FixedStage


@pytest.mark.parametrize(
    ("message", "action"),
    [
        ("show the rest", "page"),
        ("Show me the rest of the table.", "page"),
        ("more rows", "page"),
        ("Next page please", "page"),
        ("export that table", "export"),
        ("Download as CSV", "export"),
        ("export the results to csv", "export"),
        ("What is the rest of the proof?", None),
        ("export controls on solar panels", None),
        ("how do I download a table as csv from the page?", None),
    ],
)
def test_table_commands_are_told_from_questions(message: str, action: str | None) -> None:
    assert table_action(message) == action


async def test_paging_and_export_in_a_session(memory: MemoryStore, tmp_path: Path) -> None:
    async with ResearchAssistant(
        Settings(data_dir=tmp_path), tools=[CorpusTool()], memory_store=memory, remember=False, structured=FixedStage()
    ) as assistant:
        first = await assistant.ask(PANELS_QUESTION, user_id="ada", session_id="s1")
        assert first.table is not None and first.table.total_rows == 23
        table_id = first.table.table_id

        second = await assistant.ask("show the rest", user_id="ada", session_id="s1")
        assert second.table is not None and (second.table.offset, len(second.table.rows)) == (10, 10)
        assert "Rows 11–20 of 23" in second.answer and "3 more rows" in second.answer
        assert "| SP-11 | 1.11 | SP-11 spec sheet, p. 1 |" in second.answer  # the source named: no citation here
        third = await assistant.ask("more rows", user_id="ada", session_id="s1")
        assert third.table is not None and [row.values[0] for row in third.table.rows] == ["SP-21", "SP-22", "SP-23"]
        assert "That is the last row." in third.answer
        done = await assistant.ask("next page", user_id="ada", session_id="s1")
        assert "That was all 23 rows" in done.answer

        exported = await assistant.ask("export that table", user_id="ada", session_id="s1")
        assert '```csv\n"Panel","Width (m)","document","location","citation"\n' in exported.answer
        assert exported.answer.count('\n"SP-') == 23

        csv_text = await assistant.export_table("s1", table_id, user_id="ada", path=tmp_path / "t.csv")
        assert csv_text.splitlines()[1].startswith('"SP-01","1.01","SP-01 spec sheet","p. 1","')
        assert len(csv_text.splitlines()) == 24 and (tmp_path / "t.csv").read_text(encoding="utf-8") == csv_text
        page = await assistant.table("s1", table_id, offset=20, limit=5, user_id="ada")
        assert (page.offset, len(page.rows), page.total_rows, page.more_rows) == (20, 3, 23, 0)

        for user, session in (("bob", "s1"), ("ada", "s2")):
            with pytest.raises(TableNotFoundError):
                await assistant.table(session, table_id, user_id=user)
        nothing = await assistant.ask("show the rest", user_id="ada", session_id="s2")
        assert nothing.table is None and "no table" in nothing.answer

    exported_user = await memory.export_user(user_id="ada")
    assert [table["table_id"] for table in exported_user["answer_tables"]] == [table_id]
    assert len(exported_user["answer_tables"][0]["rows"]) == 23
    counts = await memory.forget_user(user_id="ada")
    assert counts["answer_tables"] == 1
    assert await memory.answer_table(user_id="ada", session_id="s1", table_id=table_id) is None
