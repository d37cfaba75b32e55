#!/usr/bin/env bash
# Create .venv and install researchcrew with its dev tools, and Debian's chromium for the browser tests when it is
# missing. Idempotent: a second run with unchanged pyproject.toml and constraints.txt does nothing. torch is first, the
# CPU build (torch==2.13.0) so that pip never resolves the multi-GB CUDA build for sentence-transformers.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

# Debian's Chromium drives the web page's browser tests (tests/browser, through Playwright; no browser is ever
# downloaded). Installed once when missing, quietly; without it those tests skip locally and fail under CI.
if [ ! -x /usr/bin/chromium ]; then
    if command -v apt-get >/dev/null 2>&1; then
        as_root=""
        [ "$(id -u)" -eq 0 ] || as_root="sudo -n"
        echo "setup: installing Debian's chromium for the browser tests" >&2
        log=$(mktemp)
        if ! { $as_root apt-get update -qq && $as_root env DEBIAN_FRONTEND=noninteractive \
                apt-get install -y -qq chromium; } >"$log" 2>&1; then
            tail -n 5 "$log" >&2
            echo "setup: could not install chromium; install it (apt-get install chromium) to run the browser tests" >&2
        fi
        rm -f "$log"
    else
        echo "setup: /usr/bin/chromium is missing and there is no apt-get; install Chromium for the browser tests" >&2
    fi
fi

# DejaVu Sans is the Unicode font of the PDF report export (deep/export/_pdf.py); without it PDFs fall back to Latin-1.
if [ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] && command -v apt-get >/dev/null 2>&1; then
    as_root=""
    [ "$(id -u)" -eq 0 ] || as_root="sudo -n"
    $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-dejavu-core >/dev/null 2>&1 \
        || echo "setup: could not install fonts-dejavu-core; PDF exports will print Latin-1 text only" >&2
fi

if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.researchcrew-installed
# Installed again whenever pyproject.toml or constraints.txt (the exact versions CI runs with) changes.
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi
echo "setup: installing into .venv (first run takes a few minutes)" >&2
.venv/bin/python -m pip install --quiet --disable-pip-version-check -c constraints.txt "torch==2.13.0"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[dev]"
echo "$want" > "$stamp"
