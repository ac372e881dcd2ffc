#!/usr/bin/env bash
# Easy-Step latency of two builds, interleaved (docs/reliability.md, "Step
# pool"): for each of REPEATS rounds, each build (before, then after) starts
# maskd on a unix socket with ../shared's llama3 and runs `maskctl bench` on a
# free-text regex, one session, unary and streamed. One JSON line per run,
# prefixed by the build ("before" or "after") and the mode.
#   bench/step_ab.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR [REPEATS] [STEPS]
# REPEATS defaults to 3, STEPS to 3000. A before build: `git worktree add
# ../before COMMIT && cmake -S ../before -B ../before/build -G Ninja
# -DCMAKE_BUILD_TYPE=Release && cmake --build ../before/build --target maskd maskctl`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BEFORE=${1:?before build dir}
AFTER=${2:?after build dir}
REPEATS=${3:-3}
STEPS=${4:-3000}
LLAMA3=$ROOT/../shared/tokenizers/llama3
if [[ ! -d $LLAMA3 ]]; then
  echo "$(basename "$0"): $LLAMA3 not found (needs ../shared); skipping" >&2
  exit 0
fi
WORK=$(mktemp -d /tmp/maskd-step-ab-XXXXXX)
PID=
trap 'kill $PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/tokenizers"
ln -s "$(cd "$LLAMA3" && pwd)" "$WORK/tokenizers/llama3"
n=0
run() {  # BUILD LABEL
  n=$((n + 1))
  local sock=unix://$WORK/maskd-$n.sock log=$WORK/maskd-$n.log
  "$1/bin/maskd" --listen "$sock" --metrics-listen 127.0.0.1:0 \
    --tokenizer-dir "$WORK/tokenizers" 2> "$log" &
  PID=$!
  for _ in $(seq 300); do grep -q ' INFO start ' "$log" 2>/dev/null && break; sleep 0.1; done
  for mode in unary stream; do
    local flag=()
    [[ $mode == stream ]] && flag=(--stream)
    echo "{\"build\": \"$2\", \"mode\": \"$mode\", $("$1/bin/maskctl" --addr "$sock" bench \
      --tokenizer llama3 --regex '[^\n]*' --sessions 1 --steps "$STEPS" --pings 200 \
      "${flag[@]}" | sed 's/^{//')"
  done
  kill "$PID"
  wait "$PID" 2>/dev/null || true
}
for _ in $(seq "$REPEATS"); do
  run "$BEFORE" before
  run "$AFTER" after
done
