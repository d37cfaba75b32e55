"""Start-up time of the `researchcrew` command: `researchcrew --help`, the venv's console script.

    .venv/bin/python benchmarks/cli_startup.py [--runs 10]

Each run is a fresh process (what a user waits for). One warm-up run first, so that the numbers measure start-up
with the OS file cache warm, as a user typing commands experiences it. Prints one JSON document; the target is
from issue 2.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TARGET_MEDIAN_S = 0.5
HEAVY_MODULES = ("crewai", "torch", "pymilvus", "sentence_transformers", "litellm")


def console_script() -> Path:
    script = Path(sys.executable).parent / "researchcrew"
    if not script.exists():
        raise SystemExit(f"console script not found at {script}; run `pip install -e .` in this venv first")
    return script


def time_once(command: list[str]) -> tuple[float, float]:
    """Wall time and CPU time (user + sys) of one run. CPU time barely moves when other processes load the
    machine, so it tells a slow start-up apart from a busy machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({completed.returncode}): {completed.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def heavy_imports_for_help() -> list[str]:
    """Which heavy libraries `--help` imports (should be none): the usual reason start-up regresses."""
    code = (
        "import sys\nfrom researchcrew.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print('HEAVY=' + ','.join(m for m in {HEAVY_MODULES!r} if m in sys.modules))"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    marker = next(line for line in completed.stdout.splitlines() if line.startswith("HEAVY="))
    return [name for name in marker.removeprefix("HEAVY=").split(",") if name]


def main(runs: int) -> dict[str, Any]:
    command = [str(console_script()), "--help"]
    time_once(command)  # warm-up
    measured = [time_once(command) for _ in range(runs)]
    times = [wall for wall, _ in measured]
    median = statistics.median(times)
    bare = statistics.median(time_once([sys.executable, "-c", "pass"])[0] for _ in range(runs))
    return {
        "benchmark": "cli_startup",
        "command": "researchcrew --help",
        "runs": runs,
        "median_s": round(median, 4),
        "min_s": round(min(times), 4),
        "max_s": round(max(times), 4),
        "cpu_median_s": round(statistics.median(cpu for _, cpu in measured), 4),
        "bare_interpreter_median_s": round(bare, 4),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "heavy_modules_imported": heavy_imports_for_help(),
        "target_median_s": TARGET_MEDIAN_S,
        "meets_target": median <= TARGET_MEDIAN_S,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="measured runs (default 10)")
    print(json.dumps(main(parser.parse_args().runs), indent=2))
