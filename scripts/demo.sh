#!/usr/bin/env bash
# The README's first command: set up, load the bundled demo corpus (105 arXiv abstracts on testing, CC0), and ask
# it a question. Needs no keys and no network for the answer: without an LLM the answer is extractive (every
# sentence quoted and cited); web search is reported as not configured and arXiv as failed when offline.
#
#   bash scripts/demo.sh ["your question"]
#
# State goes to the platform data directory, or RESEARCHCREW_DATA_DIR. Ingesting is idempotent: a second run
# skips the unchanged corpus and only asks.
set -euo pipefail
cd "$(dirname "$0")/.."
question=${1:-"What is metamorphic testing and which problem does it address?"}

bash scripts/setup.sh
echo "demo: loading the bundled demo corpus into the knowledge base" >&2
.venv/bin/researchcrew ingest --demo --no-progress
echo "demo: asking: $question" >&2
.venv/bin/researchcrew ask "$question"
