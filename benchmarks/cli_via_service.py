"""`researchcrew ask` with the data folder's service running: wall time of the whole command, start-up included.

    .venv/bin/python benchmarks/cli_via_service.py [--runs 20]

Setup (not timed): a fresh data folder with the bundled demo corpus ingested (`researchcrew ingest --demo`), then
`researchcrew serve --no-auth` of it (which listens on `<data folder>/service.sock` too), offline: no LLM, web search
unconfigured, arXiv pointed at a closed loopback port, sources rag + memory. After two warm-up questions, each run is
a new `researchcrew ask "..." --json` process (the venv's console script) that finds the service through the socket;
every answer is checked to be JSON citing the knowledge base. Prints one JSON document: p50/p95 of the wall time, the
load average before and after, and the CPU. Target (issue 19): p50 ≤ 0.6 s on an idle 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from first_answer import closed_port, console_script, environment  # a sibling script: benchmarks/ is on sys.path
from machine import describe_cpu

TARGET_P50_S = 0.6
QUESTIONS = ["What is metamorphic testing?", "How are flaky tests detected?", "What is mutation testing?"]


def _run(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(console_script()), *args], capture_output=True, text=True, env=env, timeout=timeout)


def _start_service(env: dict[str, str], socket_path: Path, log: Path) -> subprocess.Popen[bytes]:
    port = closed_port()
    with log.open("wb") as out:
        service = subprocess.Popen(
            [str(console_script()), "serve", "--no-auth", "--port", str(port)], env=env, stdout=out, stderr=out
        )
    deadline = time.monotonic() + 300
    while not socket_path.exists():
        if service.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"`researchcrew serve` did not start:\n{log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)
    return service


def _timed_ask(env: dict[str, str], question: str) -> float:
    started = time.perf_counter()
    done = _run(env, "ask", question, "--json")
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"`researchcrew ask` failed: {done.stderr.strip()[-2000:]}")
    answer = json.loads(done.stdout)
    if not any(citation["source_type"] == "rag" for citation in answer["citations"]):
        raise SystemExit(f"an answer without a knowledge-base citation: {answer['answer'][:200]}")
    return wall


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def measure(runs: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="rc-bench-"))  # short: a Unix socket path has at most 107 bytes
    data_dir = folder / "data"
    env = {**environment(data_dir), "RESEARCHCREW_ENABLED_SOURCES": "rag,memory"}
    try:
        ingested = _run(env, "ingest", "--demo", "--json", timeout=900)
        if ingested.returncode != 0:
            raise SystemExit(f"`researchcrew ingest --demo` failed: {ingested.stderr.strip()[-2000:]}")
        service = _start_service(env, data_dir / "service.sock", folder / "serve.log")
        try:
            route = json.loads(_run(env, "status", "--json").stdout)["commands"]
            if route["mode"] != "service":
                raise SystemExit(f"the CLI does not use the service: {route['reason']}")
            for question in QUESTIONS[:2]:  # warm-up: the service's first questions load what is lazy
                _timed_ask(env, question)
            load_before = os.getloadavg()
            walls = [_timed_ask(env, QUESTIONS[n % len(QUESTIONS)]) for n in range(runs)]
            load_after = os.getloadavg()
        finally:
            service.send_signal(signal.SIGTERM)
            service.wait(timeout=120)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    p50 = statistics.median(walls)
    return {
        "benchmark": "cli_via_service",
        "command": "researchcrew ask QUESTION --json (console script, a fresh process each run)",
        "mode": route["mode"],
        "runs": runs,
        "wall_s": {
            "p50": round(p50, 3),
            "p95": round(_percentile(walls, 0.95), 3),
            "min": round(min(walls), 3),
            "max": round(max(walls), 3),
        },
        "target_p50_s": TARGET_P50_S,
        "meets_target": p50 <= TARGET_P50_S,
        "load_average_before": [round(value, 2) for value in load_before],
        "load_average_after": [round(value, 2) for value in load_after],
        "cpu": describe_cpu(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="Timed `ask` processes (default 20).")
    args = parser.parse_args()
    print(json.dumps(measure(args.runs), indent=2))


if __name__ == "__main__":
    main()
