"""Issue 19 item 2: the README's "At scale" recipe names a Milvus server, and its settings are checked when a worker
starts: on a Milvus Lite file another process holds (a running `serve`, another worker), or shared by its own
processes, `researchcrew worker` refuses in one line saying what to do, before it touches Redis."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from researchcrew.cli import cli
from researchcrew.cli._startup import require_own_knowledge_base
from researchcrew.settings import Settings
from tests.conftest import PROJECT_ROOT
from tests.e2e.test_cli_trust import held_environment, held_knowledge_base  # noqa: F401 - fixtures
from tests.loopback.server import closed_port

pytestmark = pytest.mark.slow


def _at_scale_recipe() -> str:
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"\*\*At scale:\*\*(.*?)\n\n", readme, re.S)
    assert match is not None, "the README has no **At scale:** paragraph"
    return match.group(1)


def test_the_recipe_names_the_milvus_server() -> None:
    named = set(re.findall(r"RESEARCHCREW_[A-Z_]+", _at_scale_recipe()))
    assert {"RESEARCHCREW_REDIS__URL", "RESEARCHCREW_MEMORY__DATABASE_URL", "RESEARCHCREW_MILVUS__URI"} <= named


def test_a_worker_refuses_a_lite_file_another_process_holds(
    held_environment: dict[str, str],  # noqa: F811
    held_knowledge_base: subprocess.Popen[str],  # noqa: F811
) -> None:
    """The recipe without its Milvus server: Redis and PostgreSQL set (unreachable ones: the check comes first)."""
    recipe = {
        **held_environment,
        "RESEARCHCREW_REDIS__URL": f"redis://127.0.0.1:{closed_port()}/0",
        "RESEARCHCREW_MEMORY__DATABASE_URL": f"postgresql+asyncpg://rc@127.0.0.1:{closed_port()}/rc",
    }
    result = CliRunner().invoke(cli, ["worker"], env=recipe)
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert f"held by process {held_knowledge_base.pid}" in lines[0]
    assert "RESEARCHCREW_MILVUS__URI=http://host:19530" in lines[0] and "researchcrew serve" in lines[0]


def test_a_worker_of_several_processes_refuses_one_lite_file(tmp_path: Path) -> None:
    env = {"RESEARCHCREW_DATA_DIR": str(tmp_path / "data"), "RESEARCHCREW_ENABLED_SOURCES": "rag,memory"}
    result = CliRunner().invoke(cli, ["worker", "--processes", "2"], env=env)
    assert result.exit_code == 2, result.output
    assert "cannot share the Milvus Lite file" in result.output and "RESEARCHCREW_MILVUS__URI" in result.output


def test_a_milvus_server_or_no_knowledge_base_passes_the_check(tmp_path: Path) -> None:
    server = Settings(data_dir=tmp_path, milvus={"uri": "http://milvus:19530"})
    require_own_knowledge_base("worker", server, processes=4)
    require_own_knowledge_base("worker", Settings(data_dir=tmp_path, enabled_sources=["memory"]), processes=4)
