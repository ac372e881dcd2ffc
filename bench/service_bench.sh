#!/usr/bin/env bash
# Service figures (docs/benchmarks.md, section "Service"): starts build/bin/maskd
# on a unix socket with a tokenizer folder holding a symlink to the shared
# llama3 tokenizer, then runs `maskctl bench` (one JSON line per run).
#   bench/service_bench.sh [BUILD_DIR] [LONG_STEPS]
# BUILD_DIR defaults to build; LONG_STEPS (the 256-session run) to 10000;
# SERVICE_STEPS (environment) replaces the 3000 and 1000 steps of the 1- and
# 64-session runs (for smoke checks).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
LONG_STEPS=${2:-10000}
source "$ROOT/bench/start_maskd.sh" --max-batch 4096 --max-sessions 100000
REGEX='[^\n]*'   # free text: thousands of tokens allowed at every step
# Each JSON line gets "mode" (unary or stream) first: bench/tables/service.py reads it.
run() {
  local mode=unary
  [[ " $* " == *" --stream "* ]] && mode=stream
  echo "# $*" >&2
  $M bench --tokenizer llama3 --regex "$REGEX" "$@" | sed "s/^{/{\"mode\": \"$mode\", /"
}
run --sessions 1 --steps "${SERVICE_STEPS:-3000}"
run --sessions 1 --steps "${SERVICE_STEPS:-3000}" --stream
run --sessions 64 --steps "${SERVICE_STEPS:-1000}"
run --sessions 64 --steps "${SERVICE_STEPS:-1000}" --stream
run --sessions 256 --steps "$LONG_STEPS" --stream --rss --pings 200
