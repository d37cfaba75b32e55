"""A data folder holding the demo corpus, and a real `researchcrew serve` of it (tests/service/processes.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.support import offline_environment
from tests.service.processes import ServeProcess, child_environment, cli, serve


@pytest.fixture(scope="module")
def demo_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A short data-folder path (a Unix socket path has at most 107 bytes) with the demo corpus ingested."""
    data_dir = tmp_path_factory.mktemp("rc") / "d"
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
    done = cli("ingest", "--demo", "--no-progress", env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return data_dir, env


@pytest.fixture
def served(demo_folder: tuple[Path, dict[str, str]], tmp_path: Path) -> Iterator[ServeProcess]:
    _, env = demo_folder
    with serve("--no-auth", env=env, log_path=tmp_path / "serve.log") as server:
        yield server
