#!/usr/bin/env bash
# Service figures (docs/benchmarks.md, section "Service"): starts build/bin/maskd
# on a unix socket with a tokenizer folder holding a symlink to the shared
# llama3 tokenizer, then runs `maskctl bench` (one JSON line per run).
#   bench/service_bench.sh [BUILD_DIR] [LONG_STEPS]
# BUILD_DIR defaults to build; LONG_STEPS (the 256-session run) to 10000.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
LONG_STEPS=${2:-10000}
LLAMA3=$ROOT/../shared/tokenizers/llama3
if [[ ! -d $LLAMA3 ]]; then
  echo "service_bench: $LLAMA3 not found (needs ../shared); skipping" >&2
  exit 0
fi
WORK=$(mktemp -d /tmp/maskd-bench-XXXXXX)
trap 'kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/tokenizers"
ln -s "$(cd "$LLAMA3" && pwd)" "$WORK/tokenizers/llama3"
SOCK=unix://$WORK/maskd.sock
"$BUILD/bin/maskd" --listen "$SOCK" --metrics-listen 127.0.0.1:0 \
  --tokenizer-dir "$WORK/tokenizers" --max-batch 4096 --max-sessions 100000 \
  2> "$WORK/maskd.log" &
PID=$!
for _ in $(seq 200); do grep -q ' INFO start ' "$WORK/maskd.log" 2>/dev/null && break; sleep 0.1; done
M="$BUILD/bin/maskctl --addr $SOCK"
REGEX='[^\n]*'   # free text: thousands of tokens allowed at every step
run() { echo "# $*" >&2; $M bench --tokenizer llama3 --regex "$REGEX" "$@"; }
run --sessions 1 --steps 3000
run --sessions 1 --steps 3000 --stream
run --sessions 64 --steps 1000
run --sessions 64 --steps 1000 --stream
run --sessions 256 --steps "$LONG_STEPS" --stream --rss --pings 200
