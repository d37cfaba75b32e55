"""A deep run paused in one process is decided and finished by another, through the PostgreSQL memory database
(the chat service's workers share it). Skips locally without PostgreSQL; fails under CI=true."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from researchcrew.contracts.deep import DeepRun
from researchcrew.contracts.request import ResearchRequest
from researchcrew.memory.store import MemoryStore
from researchcrew.runtime import open_runtime
from researchcrew.settings import DeepResearchSettings, Settings
from tests.conftest import PROJECT_ROOT
from tests.deep.corpus import CorpusTool
from tests.helpers.services import fresh_postgres_database

pytestmark = pytest.mark.postgres


# The six-passage corpus answers nearly every query with the same passages: checked against it, a plan keeps one
# sub-question; these tests cut an item of a plan of several, judged in the probe.
UNCHECKED = DeepResearchSettings(plan_checks=0)


@pytest.fixture
def postgres_url(migrated_postgres_template: str) -> Iterator[str]:
    """A copy of the session's migrated database (what the first open would make of an empty one, faster)."""
    with fresh_postgres_database("rc_deeptest", template=migrated_postgres_template) as url:
        yield url


async def test_another_process_decides_and_finishes_a_paused_run(postgres_url: str, tmp_path: Path) -> None:
    store = await MemoryStore.open(postgres_url)
    try:
        async with open_runtime(
            Settings(data_dir=tmp_path, deep=UNCHECKED), tools=[CorpusTool()], memory_store=store, remember=False
        ) as runtime:
            paused = await (await runtime.deep_research()).research(
                ResearchRequest(question="What is known about pooled testing?", user_id="ada", session_id="s")
            )
        assert paused.status == "awaiting_human_feedback" and paused.plan is not None

        env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
        child = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "tests.deep.child_resume", postgres_url, paused.run_id, str(tmp_path)],
            capture_output=True,
            text=True,
            env=env,
            cwd=PROJECT_ROOT,
            timeout=300,
            check=False,
        )
        assert child.returncode == 0, child.stderr[-3000:]
        finished = DeepRun.model_validate_json(child.stdout)
        assert finished.status == "completed" and finished.report is not None

        async with open_runtime(
            Settings(data_dir=tmp_path, deep=UNCHECKED), tools=[CorpusTool()], memory_store=store, remember=False
        ) as runtime:
            seen_here = await (await runtime.deep_research()).get_research_run(paused.run_id, user_id="ada")
    finally:
        await store.close()
    assert seen_here.status == "completed" and seen_here.report == finished.report
    assert [item.question for item in seen_here.report.plan.items] == [item.question for item in paused.plan.items[1:]]  # type: ignore[union-attr]
