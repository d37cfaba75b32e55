"""The CLI's side of answer tables (issue 22 item 4): `researchcrew ask` prints the table with its route and how to
get the rest; `researchcrew tables show SESSION TABLE` pages through it or writes all of it as CSV; an unknown table
(or another user's) ends in one line."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from click.testing import CliRunner

from researchcrew.assistant import ResearchAssistant
from researchcrew.cli import cli
from researchcrew.cli._ask import _print_answer
from researchcrew.contracts import FinalResponse
from tests.deep.corpus import CorpusTool
from tests.e2e.support import offline_environment, offline_settings
from tests.tables.support import PANELS_QUESTION, FixedStage


async def _answer(data_dir: Path) -> FinalResponse:
    settings = offline_settings(data_dir)
    async with ResearchAssistant(settings, tools=[CorpusTool()], remember=False, structured=FixedStage()) as assistant:
        return await assistant.ask(PANELS_QUESTION, user_id="local", session_id="cli-s1")


def test_ask_prints_the_table_and_tables_show_pages_and_exports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = asyncio.run(_answer(tmp_path))  # the CLI runs its own event loop: this test has none
    assert answer.table is not None
    table_id = answer.table.table_id

    _print_answer(answer, as_json=False)
    printed = capsys.readouterr().out
    assert "Route: structured" in printed and "| SP-10 | 1.1 | [10] |" in printed
    assert f"Table: {table_id}, 23 rows (researchcrew tables show cli-s1 {table_id} --csv -o table.csv)" in printed

    runner = CliRunner()
    env = offline_environment(tmp_path)
    page = runner.invoke(cli, ["tables", "show", "cli-s1", table_id, "--offset", "10", "--limit", "5"], env=env)
    assert page.exit_code == 0, page.output
    assert "Rows 11–15 of 23" in page.stdout and "| SP-15 | 1.15 | SP-15 spec sheet, p. 1 |" in page.stdout
    assert "8 more rows (--offset 15)" in page.stdout

    target = tmp_path / "panels.csv"
    exported = runner.invoke(cli, ["tables", "show", "cli-s1", table_id, "--csv", "-o", str(target)], env=env)
    assert exported.exit_code == 0, exported.output
    lines = target.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 24 and lines[0] == '"Panel","Width (m)","document","location","citation"'

    for args in (["cli-s1", "nope"], ["cli-s1", table_id, "--user", "bob"]):
        missing = runner.invoke(cli, ["tables", "show", *args], env=env)
        assert missing.exit_code == 1 and "no table" in missing.output
    wrong = runner.invoke(cli, ["tables", "show", "cli-s1", table_id, "-o", str(target)], env=env)
    assert wrong.exit_code == 2 and "--csv" in wrong.output
