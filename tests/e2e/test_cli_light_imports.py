"""An extractive `researchcrew ask` (no LLM configured) in a fresh process imports none of the heavy libraries it
does not use (issue 19): crewAI and what crewAI drags in (chromadb, fastapi, litellm, LanceDB, the openai SDK), and
SciPy. The quick pipeline's Flow routes without crewAI (``pipeline/_routing.py``); crewAI comes in with an LLM.

pandas is not on the list: pymilvus 3 imports it at the top of its ORM modules, which the knowledge base needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.support import offline_environment

pytestmark = pytest.mark.slow  # the embedding model, Milvus Lite, a fresh interpreter

# scipy: pymilvus imports scipy.sparse on a process's first search only to ask whether the query is a SciPy matrix
# (knowledge/_store.py tells it there is none).
NOT_NEEDED = ("crewai", "chromadb", "fastapi", "litellm", "lancedb", "openai", "uvicorn", "scipy")

PROBE = """
import json, sys
from researchcrew.cli import main
try:
    main(["ask", sys.argv[1], "--json"])
except SystemExit as exit:
    code = exit.code
print("\\nPROBE=" + json.dumps({"code": code, "loaded": sorted(m for m in sys.argv[2].split(",") if m in sys.modules)}))
"""


INGEST = """
import sys
from pathlib import Path
from researchcrew.knowledge.collection import KnowledgeBase
from tests.e2e.support import demo_documents, offline_settings
with KnowledgeBase(offline_settings(Path(sys.argv[1]))) as knowledge_base:
    assert knowledge_base.add_documents(demo_documents(("Metamorphic Testing for",))).documents_added
"""
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory whose knowledge base holds the metamorphic-testing demo abstracts. Ingested in another
    process: Milvus Lite keeps a file locked by the process that opened it until that process ends."""
    directory = tmp_path_factory.mktemp("light_cli")
    done = subprocess.run(
        [sys.executable, "-c", INGEST, str(directory)], cwd=ROOT, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return directory


def run_probe(data_dir: Path, question: str, extra_env: dict[str, str] | None = None) -> tuple[dict[str, object], str]:
    env = {**os.environ, **offline_environment(data_dir), **(extra_env or {})}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, question, ",".join(NOT_NEEDED)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer, _, probe = done.stdout.rpartition("\nPROBE=")
    return json.loads(probe), answer


def test_an_extractive_ask_imports_no_crewai_nor_what_it_drags_in(data_dir: Path) -> None:
    probe, answer = run_probe(data_dir, "What is metamorphic testing?")
    response = json.loads(answer)

    assert probe == {"code": 0, "loaded": []}
    assert response["answer_kind"] == "extractive" and response["citations"]
    assert {r["source_type"]: r["status"] for r in response["source_reports"]}["rag"] == "success"


def test_a_refused_and_an_unanswerable_question_stay_light_too(data_dir: Path) -> None:
    for question in ("sdfghjkl qwrtzpsd", "What is the capital of Peru?"):
        probe, answer = run_probe(data_dir, question)
        assert probe == {"code": 0, "loaded": []}, question
        assert json.loads(answer)["answer_kind"] in ("refusal", "uncertainty", "clarification")
