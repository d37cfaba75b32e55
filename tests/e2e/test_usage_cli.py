"""`researchcrew usage`: what a user's answers cost by day, read from the same ledger every door writes (here the SDK
with a priced model); other users' answers are not counted."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from researchcrew.assistant import ResearchAssistant
from researchcrew.cli import cli
from researchcrew.contracts import FinalResponse
from researchcrew.testing import FakeLLM
from tests.e2e.support import SpyTool, offline_environment, offline_settings
from tests.e2e.test_token_usage import CHUNKS, GOOD, QUESTION


async def _answers(tmp_path: Path) -> list[FinalResponse]:
    llm = FakeLLM([GOOD] * 4, model="openai/gpt-4o-mini")
    async with ResearchAssistant(offline_settings(tmp_path), tools=[SpyTool(CHUNKS)], llm=llm) as assistant:
        return [await assistant.ask(QUESTION, user_id="ada"), await assistant.ask(QUESTION, user_id="bob")]


def test_usage_shows_a_user_s_questions_tokens_and_cost(tmp_path: Path) -> None:
    ada_answer = asyncio.run(_answers(tmp_path))[0]  # the CLI runs its own event loop: this test has none

    runner = CliRunner()
    env = offline_environment(tmp_path)
    as_json = runner.invoke(cli, ["usage", "--user", "ada", "--since", "7d", "--json"], env=env)
    assert as_json.exit_code == 0, as_json.output
    report = json.loads(as_json.stdout)
    [today] = report["days"]
    assert today["questions"] == 1
    assert today["prompt_tokens"] == ada_answer.token_usage.total.prompt_tokens
    assert today["cost_usd"] == pytest.approx(ada_answer.cost.usd)
    assert report["month_cost_usd"] == pytest.approx(ada_answer.cost.usd)

    table = runner.invoke(cli, ["usage", "--user", "ada"], env=env)
    assert table.exit_code == 0 and "cost (USD)" in table.stdout and "This month so far: $" in table.stdout
    nobody = runner.invoke(cli, ["usage", "--user", "carol"], env=env)
    assert nobody.exit_code == 0 and "No usage by carol" in nobody.stdout
    wrong = runner.invoke(cli, ["usage", "--user", "ada", "--since", "last week"], env=env)
    assert wrong.exit_code == 2 and "7d" in wrong.output
