#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) into build-fuzz/ and runs
# each for SECONDS (default 60), one process per fuzzer, in parallel up to
# $MASKD_FUZZ_JOBS (default: nproc). Fails when any fuzzer finds a crash,
# hang (-timeout), leak or sanitizer report.
#
#   scripts/fuzz.sh [SECONDS] [FUZZER...]
#   FUZZER: regex_fuzzer json_schema_fuzzer tokenizer_json_fuzzer request_fuzzer
#           grammar_fuzzer lark_fuzzer session_fuzzer (default: all seven)
#
# The committed seed corpus (fuzz/corpus/<fuzzer>/) is read, never written:
# new inputs go to $MASKD_FUZZ_WORK (default build-fuzz/work/<fuzzer>/corpus),
# crashes to .../<fuzzer>/artifacts/, each run's log and final stats to
# .../<fuzzer>/log. Add a crash input to fuzz/corpus/<fuzzer>/ together with
# its fix. Environment: MASKD_FUZZ_NICE (default 19), MASKD_FUZZ_ARGS (extra
# libFuzzer flags), MASKD_FUZZ_NO_BUILD=1 (run what is built).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER="${1:-60}"
shift || true
FUZZERS=("$@")
if [ ${#FUZZERS[@]} -eq 0 ]; then
  FUZZERS=(regex_fuzzer json_schema_fuzzer tokenizer_json_fuzzer request_fuzzer grammar_fuzzer lark_fuzzer
           session_fuzzer)
fi
BUILD_DIR="${MASKD_FUZZ_BUILD_DIR:-build-fuzz}"
WORK="${MASKD_FUZZ_WORK:-$BUILD_DIR/work}"
JOBS="${MASKD_FUZZ_JOBS:-$(nproc)}"
NICE="${MASKD_FUZZ_NICE:-19}"

if [ "${MASKD_FUZZ_NO_BUILD:-0}" != 1 ]; then
  launcher=()
  if command -v ccache >/dev/null; then  # as scripts/build.sh: clones share hits
    export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  fi
  CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMASKD_FUZZ=ON -DMASKD_BUILD_TESTS=OFF -DMASKD_BUILD_BENCH=OFF -DMASKD_WITH_CUDA=OFF \
    "${launcher[@]}" >/dev/null
  nice -n "$NICE" cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${FUZZERS[@]}"
fi

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

run_one() {
  local f="$1" dir="$WORK/$1"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  local seeds="fuzz/corpus/$f" dict=()
  [ -f "fuzz/$f.dict" ] && dict=("-dict=fuzz/$f.dict")
  # -max_total_time bounds the run; -timeout flags a single slow input as a
  # hang; -rss_limit_mb flags runaway memory.
  # CPU time (user + system) goes to the log's last line ("fuzz-cpu-seconds").
  local timer=()
  [ -x /usr/bin/time ] && timer=(/usr/bin/time -f "fuzz-cpu-seconds %U %S")
  local limit=(-max_total_time="$SECONDS_PER")
  [ "${MASKD_FUZZ_CPU:-0}" = 1 ] && limit=(-max_total_time=0)
  nice -n "$NICE" "${timer[@]}" "$BUILD_DIR/bin/$f" "$dir/corpus" "$seeds" "${dict[@]}" \
    "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/" ${MASKD_FUZZ_ARGS:-} >"$dir/log" 2>&1 &
  local runner=$! interrupted=0
  if [ "${MASKD_FUZZ_CPU:-0}" = 1 ]; then
    # The fuzzer is the runner itself, or its child under /usr/bin/time.
    local fuzzer=$runner
    sleep 1
    [ ${#timer[@]} -gt 0 ] && fuzzer=$(pgrep -P "$runner" | head -1)
    while kill -0 "$fuzzer" 2>/dev/null; do
      local used
      used=$(ps -o times= -p "$fuzzer" 2>/dev/null | tr -d ' ')
      if [ -n "$used" ] && [ "$used" -ge "$SECONDS_PER" ]; then
        kill -INT "$fuzzer"
        interrupted=1
        break
      fi
      sleep 5
    done
  fi
  local rc=0
  wait "$runner" || rc=$?
  # libFuzzer (clang 14) exits 72 when interrupted, and has no flag to change it.
  [ "$interrupted" = 1 ] && [ "$rc" = 72 ] && rc=0
  return "$rc"
}

pids=()
names=()
status=0
for f in "${FUZZERS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do sleep 1; done
  run_one "$f" &
  pids+=($!)
  names+=("$f")
done
for i in "${!pids[@]}"; do
  f="${names[$i]}"
  if wait "${pids[$i]}"; then
    execs=$(grep -m1 '^stat::number_of_executed_units' "$WORK/$f/log" | awk '{print $2}')
    cpu=$(awk '/^fuzz-cpu-seconds/ {printf "%.0f", $2 + $3}' "$WORK/$f/log")
    echo "fuzz: $f: ok, ${execs:-?} executions, ${cpu:-?} CPU s"
  else
    status=1
    echo "fuzz: $f: FAILED (log: $WORK/$f/log, inputs: $WORK/$f/artifacts/)"
    grep -m5 -E 'ERROR|SUMMARY|deadly|Test unit written' "$WORK/$f/log" || true
  fi
done
exit $status
