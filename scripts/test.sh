#!/usr/bin/env bash
# The one test command: set up (if needed), then lint, type-check and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CREWAI_DISABLE_TELEMETRY=true OTEL_SDK_DISABLED=true HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
echo "== ruff" && .venv/bin/ruff check researchcrew tests benchmarks
echo "== ruff format" && .venv/bin/ruff format --check researchcrew tests benchmarks
echo "== mypy" && .venv/bin/mypy
# Two processes (pytest-xdist; a module's tests stay on one): about half the wall time on a 2-core machine, whose one
# process spends a third of its time waiting. Arguments come after, so `bash scripts/test.sh -n 0` runs in one.
echo "== pytest" && .venv/bin/python -m pytest -n 2 --dist loadfile "$@"
