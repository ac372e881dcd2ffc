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
LLAMA3=$ROOT/../shared/tokenizers/llama3
if [[ ! -d $LLAMA3 ]]; then
  echo "shm_demo_bench: $LLAMA3 not found (needs ../shared); skipping" >&2
  exit 0
fi
WORK=$(mktemp -d /tmp/maskd-shmbench-XXXXXX)
trap 'kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/tokenizers"
ln -s "$(cd "$LLAMA3" && pwd)" "$WORK/tokenizers/llama3"
SOCK=unix://$WORK/maskd.sock
"$BUILD/bin/maskd" --listen "$SOCK" --metrics-listen 127.0.0.1:0 --allow_shm \
  --tokenizer-dir "$WORK/tokenizers" --max-batch 4096 2> "$WORK/maskd.log" &
PID=$!
for _ in $(seq 300); do grep -q ' INFO start ' "$WORK/maskd.log" 2>/dev/null && break; sleep 0.1; done
M="$BUILD/bin/maskctl --addr $SOCK"
REGEX='[^\n]*'   # free text: thousands of tokens allowed at every step
for dtype in fp32 bf16; do
  echo "# shm-demo --rows $ROWS --steps $STEPS --dtype $dtype" >&2
  $M shm-demo --tokenizer llama3 --regex "$REGEX" --rows "$ROWS" --steps "$STEPS" --dtype "$dtype"
done
