"""`researchcrew --help` works and stays light: no heavy library is imported to print help (speed: benchmarks/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from researchcrew.cli import SUBCOMMANDS

HEAVY_MODULES = ("crewai", "torch", "pymilvus", "sentence_transformers", "litellm", "firecrawl", "zep_python")

pytestmark = pytest.mark.slow  # subprocesses


def test_help_imports_no_heavy_library() -> None:
    code = (
        "import json, sys\n"
        "from researchcrew.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit as exit:\n"
        "    code = exit.code\n"
        f"heavy = sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules)\n"
        "print(json.dumps({'code': code, 'heavy': heavy}))\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report == {"code": 0, "heavy": []}


def test_console_script_help_exits_zero_and_lists_every_command() -> None:
    script = Path(sys.executable).parent / "researchcrew"
    if not script.exists():
        pytest.skip(f"console script not installed at {script} (pip install -e . creates it)")
    completed = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert "Usage: researchcrew" in completed.stdout
    for name, (_, _, help_text) in SUBCOMMANDS.items():
        assert name in completed.stdout
        assert help_text[:30] in completed.stdout
    assert completed.stderr == ""


def test_unknown_command_is_one_clear_error() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "researchcrew", "no-such-command"], capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 2
    assert "No such command 'no-such-command'" in completed.stderr
    assert "Traceback" not in completed.stderr
