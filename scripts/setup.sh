#!/usr/bin/env bash
# Create .venv and install researchcrew with its dev tools. Idempotent: a second run with an unchanged
# pyproject.toml does nothing. torch is installed first as the CPU build (torch==2.13.0) so that pip never
# resolves the multi-GB CUDA build for sentence-transformers.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.researchcrew-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi
echo "setup: installing into .venv (first run takes a few minutes)" >&2
.venv/bin/python -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[dev]"
echo "$want" > "$stamp"
