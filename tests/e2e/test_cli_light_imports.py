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
from tests.helpers.demo_folder import copy_of_the_demo_folder

pytestmark = pytest.mark.slow  # the embedding model, Milvus Lite, a fresh interpreter

# scipy: pymilvus imports scipy.sparse on a process's first search only to ask whether the query is a SciPy matrix
# (knowledge/_store.py tells it there is none).
NOT_NEEDED = ("crewai", "chromadb", "fastapi", "litellm", "lancedb", "openai", "uvicorn", "scipy")

PROBE = """
import json, sys
from researchcrew.cli import main
for question in sys.argv[2:]:
    try:
        main(["ask", question, "--json"])
    except SystemExit as exit:
        code = exit.code
    loaded = sorted(m for m in sys.argv[1].split(",") if m in sys.modules)
    print("\\nPROBE=" + json.dumps({"code": code, "loaded": loaded}), flush=True)
"""


ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory whose knowledge base holds the demo corpus (a copy of the run's one ingest, made by another
    process: Milvus Lite keeps a file locked by the process that opened it until that process ends)."""
    return copy_of_the_demo_folder(tmp_path_factory, tmp_path_factory.mktemp("light_cli") / "d")


def run_probe(data_dir: Path, *questions: str) -> list[tuple[dict[str, object], str]]:
    """Each question asked in turn in one fresh process: (what was loaded after it, its answer) per question. What
    one question imported stays in ``sys.modules``, so a later question's list holds every earlier one's too."""
    env = {**os.environ, **offline_environment(data_dir)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(NOT_NEEDED), *questions],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    parts = done.stdout.split("\nPROBE=")
    answers, probes = [parts[0]], []
    for part in parts[1:]:
        probe, _, after = part.partition("\n")
        probes.append(json.loads(probe))
        answers.append(after)
    return list(zip(probes, answers[:-1], strict=True))


ANSWERED = "What is metamorphic testing?"
REFUSED_AND_UNANSWERABLE = ("sdfghjkl qwrtzpsd", "What is the capital of Peru?")


@pytest.fixture(scope="module")
def probes(data_dir: Path) -> list[tuple[dict[str, object], str]]:
    """The module's questions asked in one fresh process (a start, the model and Milvus Lite once): what each
    loaded is what it and the ones before it loaded, so a question's empty list clears every earlier one too."""
    return run_probe(data_dir, ANSWERED, *REFUSED_AND_UNANSWERABLE)


def test_an_extractive_ask_imports_no_crewai_nor_what_it_drags_in(
    probes: list[tuple[dict[str, object], str]],
) -> None:
    probe, answer = probes[0]
    response = json.loads(answer)

    assert probe == {"code": 0, "loaded": []}
    assert response["answer_kind"] == "extractive" and response["citations"]
    assert {r["source_type"]: r["status"] for r in response["source_reports"]}["rag"] == "success"


def test_a_refused_and_an_unanswerable_question_stay_light_too(probes: list[tuple[dict[str, object], str]]) -> None:
    for question, (probe, answer) in zip(REFUSED_AND_UNANSWERABLE, probes[1:], strict=True):
        assert probe == {"code": 0, "loaded": []}, question
        assert json.loads(answer)["answer_kind"] in ("refusal", "uncertainty", "clarification")
