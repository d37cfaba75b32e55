"""A data folder holding the whole demo corpus, ingested by a real `researchcrew ingest --demo` once per test run and
copied for each module that needs one (the copy is the module's own: it may ask, add jobs, upload, serve).

Ingesting the 105 demo abstracts costs a process start, the embedding model and Milvus Lite (~10 s idle, 30 s and
more under load); several process-test modules each did it. One run's xdist workers share the first ingest: they
build it under an exclusive lock in the directory their temporary directories have in common, and copy it. A copy
of a closed Milvus Lite folder is a working knowledge base (the ingesting process has ended, so nothing holds it).

    data_dir = copy_of_the_demo_folder(tmp_path_factory, tmp_path_factory.mktemp("rc") / "d")
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.support import offline_environment

# Variables the ingesting process gets besides the offline ones (as the tests' own processes have them).
_QUIET = {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "OTEL_SDK_DISABLED": "true",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}


def _run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory this test run's processes have in common: under pytest-xdist, the parent of each worker's
    ``popen-gwN`` base directory (the run's own ``pytest-N``); in a single process, its base directory."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _ingest(data_dir: Path) -> None:
    from tests.service.processes import child_environment

    env = child_environment({**offline_environment(data_dir), **_QUIET})
    done = subprocess.run(
        [sys.executable, "-c", "from researchcrew.cli import main; main()", "ingest", "--demo", "--no-progress"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def copy_of_the_demo_folder(tmp_path_factory: pytest.TempPathFactory, destination: Path) -> Path:
    """``destination`` (which must not exist yet), a data folder whose knowledge base holds the demo corpus."""
    root = _run_root(tmp_path_factory)
    built = root / "demo-folder"
    with (root / ".demo-folder.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not built.is_dir():
                staging = root / f".demo-folder-{os.getpid()}"
                shutil.rmtree(staging, ignore_errors=True)
                _ingest(staging)
                staging.rename(built)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    shutil.copytree(built, destination)
    return destination
