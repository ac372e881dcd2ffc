#!/usr/bin/env bash
# Shared-memory apply figures (docs/benchmarks.md, "Shared-memory apply
# (shm-demo)"): starts build/bin/maskd --allow_shm on a unix socket with a
# tokenizer folder holding a symlink to the shared llama3 tokenizer, then runs
# `maskctl shm-demo` (one JSON line per run) for fp32 and bf16.
#   bench/shm_demo_bench.sh [BUILD_DIR] [ROWS] [STEPS]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
ROWS=${2:-64}
STEPS=${3:-200}
source "$ROOT/bench/start_maskd.sh" --allow_shm --max-batch 4096
REGEX='[^\n]*'   # free text: thousands of tokens allowed at every step
for dtype in fp32 bf16; do
  echo "# shm-demo --rows $ROWS --steps $STEPS --dtype $dtype" >&2
  $M shm-demo --tokenizer llama3 --regex "$REGEX" --rows "$ROWS" --steps "$STEPS" --dtype "$dtype"
done
