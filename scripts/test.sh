#!/usr/bin/env bash
# The one test command: set up (if needed), then lint, type-check and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CREWAI_DISABLE_TELEMETRY=true OTEL_SDK_DISABLED=true HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
echo "== ruff" && .venv/bin/ruff check researchcrew tests benchmarks
echo "== ruff format" && .venv/bin/ruff format --check researchcrew tests benchmarks
# mypy (about 30 s of one core from a clean clone) checks beside the tests, at a lower priority: the test processes
# spend part of their time waiting on servers and subprocesses, and that time is mypy's. Its report follows
# pytest's; either failing fails the command.
mypy_report="$(mktemp)"
trap 'rm -f "$mypy_report"' EXIT
nice -n 10 .venv/bin/mypy > "$mypy_report" 2>&1 &
mypy_pid=$!
# Four processes (pytest-xdist; a module's tests stay on one): on a 2-core machine two processes left a third of it
# idle, waiting on servers and subprocesses; more processes fill that time (pytest alone, idle, one machine: two
# 523 s, three 467 s, four 446 s, of which 44 s is four processes collecting at once). xdist hands out the modules
# with the most tests first; handing out the slow-marked ones first instead balanced the processes' ends but ran
# every subprocess test at once, and the whole took longer (487 s against 435-498 s). Arguments come after, so
# `bash scripts/test.sh -n 0` runs in one.
echo "== pytest"
pytest_status=0
.venv/bin/python -m pytest -n 4 --dist loadfile "$@" || pytest_status=$?
mypy_status=0
wait "$mypy_pid" || mypy_status=$?
echo "== mypy" && cat "$mypy_report"
exit $((pytest_status != 0 ? pytest_status : mypy_status))
