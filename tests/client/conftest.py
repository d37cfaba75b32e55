"""A data folder holding the demo corpus (a copy of the run's one ingest, tests/helpers/demo_folder.py), and a real
`researchcrew serve` of it (tests/service/processes.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.support import offline_environment
from tests.helpers.demo_folder import copy_of_the_demo_folder
from tests.service.processes import ServeProcess, child_environment, serve


@pytest.fixture(scope="module")
def demo_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A short data-folder path (a Unix socket path has at most 107 bytes) with the demo corpus ingested."""
    data_dir = copy_of_the_demo_folder(tmp_path_factory, tmp_path_factory.mktemp("rc") / "d")
    env = child_environment(
        {
            **offline_environment(data_dir),
            "RESEARCHCREW_ENABLED_SOURCES": "rag",  # the same evidence in both modes: no memory recall in between
            "CREWAI_DISABLE_TELEMETRY": "true",
            "OTEL_SDK_DISABLED": "true",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
    )
    return data_dir, env


@pytest.fixture(scope="module")
def served(
    demo_folder: tuple[Path, dict[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServeProcess]:
    """One `researchcrew serve` of the module's folder for the tests that use it (each start costs seconds: crewAI's
    imports, the model, Milvus Lite); it runs from the first such test to the end of the module. Stopped (SIGTERM),
    it has removed its Unix socket."""
    data_dir, env = demo_folder
    with serve("--no-auth", env=env, log_path=tmp_path_factory.mktemp("serve") / "serve.log") as server:
        yield server
    assert not (data_dir / "service.sock").exists()  # removed when the service stopped
