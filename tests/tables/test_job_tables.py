"""Batch jobs ask structured questions too (issue 22 item 4): the answer's table is in the JSONL and Markdown
exports, and ``export_tables`` (``jobs results --tables DIR``) gives each structured question's whole table as CSV."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from researchcrew.errors import JobNotFoundError
from researchcrew.jobs.api import Jobs
from researchcrew.memory.store import MemoryStore
from researchcrew.runtime import open_runtime
from researchcrew.settings import JobsSettings, Settings
from tests.deep.corpus import CorpusTool
from tests.tables.support import PANELS_QUESTION, FixedStage


async def test_a_job_exports_its_structured_questions_tables(tmp_path: Path, memory: MemoryStore) -> None:
    settings = Settings(data_dir=tmp_path / "data", jobs=JobsSettings(concurrency=2))
    runtime = open_runtime(settings, tools=[CorpusTool()], memory_store=memory, remember=False, structured=FixedStage())
    try:
        jobs = Jobs(runtime)
        await jobs.create("ada", name="panels", questions=[PANELS_QUESTION, "How do solar panels work?"])
        run = await jobs.run("ada", "panels")
        files = await jobs.export_tables("ada", run.id)
        [(name, text)] = files.items()
        assert name.startswith("q000-") and name.endswith(".csv")
        lines = text.splitlines()
        assert len(lines) == 24 and lines[0] == '"Panel","Width (m)","document","location","citation"'

        records = [json.loads(line) for line in (await jobs.export("ada", run.id, "jsonl")).splitlines()]
        tables = [record["response"]["table"] for record in records]
        assert tables[0]["total_rows"] == 23 and tables[1] is None
        assert name == f"q000-{tables[0]['table_id']}.csv"
        report = await jobs.export("ada", run.id, "md")
        assert "| Panel | Width (m) | Source |" in report and "13 more rows" in report
        with pytest.raises(JobNotFoundError):
            await jobs.export_tables("bob", run.id)
        await jobs.aclose()
    finally:
        await runtime.aclose()
