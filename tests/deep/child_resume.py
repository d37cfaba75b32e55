"""Run as a separate process by test_cross_process.py: open the memory database, decide a paused deep run's plan
(cut its first item) and resume it to the end; print the run as JSON."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from researchcrew.contracts.deep import PlanDecision
from researchcrew.memory.store import MemoryStore
from researchcrew.runtime import open_runtime
from researchcrew.settings import DeepResearchSettings, Settings
from tests.deep.corpus import CorpusTool

# The six-passage corpus answers nearly every query with the same passages: checked against it, a plan keeps one
# sub-question; these tests cut an item of a plan of several, judged in the probe.
UNCHECKED = DeepResearchSettings(plan_checks=0)


async def main(url: str, run_id: str, data_dir: str) -> None:
    store = await MemoryStore.open(url)
    try:
        async with open_runtime(
            Settings(data_dir=Path(data_dir), deep=UNCHECKED), tools=[CorpusTool()], memory_store=store, remember=False
        ) as runtime:
            run = await (await runtime.deep_research()).get_research_run(run_id, user_id="ada")
            assert run.plan is not None, run
            await (await runtime.deep_research()).decide_plan(
                run_id, user_id="ada", decision=PlanDecision.edits(run.plan, cut=[1])
            )
            done = await (await runtime.deep_research()).resume_research(run_id, user_id="ada")
    finally:
        await store.close()
    sys.stdout.write(done.model_dump_json())


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
