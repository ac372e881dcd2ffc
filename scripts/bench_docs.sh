#!/usr/bin/env bash
# Regenerates the tables of docs/benchmarks.md in place: each table sits
# between <!-- bench_docs:NAME --> and <!-- /bench_docs:NAME --> and is
# replaced by its generator's Markdown under a stamp line naming the command,
# the commit, the date and the load average of the run. One command:
#
#   scripts/bench_docs.sh                      # every table (about 1-1.5 h on 2 idle vCPUs, as run on 2026-12-02)
#   ONLY=kernels,service scripts/bench_docs.sh # some tables
#   SKIP=adapters,adapters_idle scripts/bench_docs.sh
#
# Tables (NAME: what runs; the formatter; expected time on the 2-vCPU development machine,
# estimated from smoke runs and earlier runs of the same commands, not timed end to end):
#   kernels           apply_mask_bench, 5 repetitions; bench/tables/kernels.py; ~1 min
#   kernels_gpu       tests/gpu/run.sh (apply_mask_cuda_bench); bench/tables/kernels_gpu.py; ~5 min
#                     with a GPU. Without one (no GPU in `nvidia-smi -L`) the table is left as
#                     it is and the kernels stamp says so; GPU_BENCH_JSON=FILE formats the
#                     apply_mask_cuda_bench.json a GPU machine's tests/gpu/run.sh wrote instead.
#   coldpath          bench/coldpath.py, llama3, every engine, eager builds; ~30-60 min (xgrammar's
#                     120 s timeout on `url` 3 times, outlines-core's full index builds); with it, from
#                     its results, coldpath_goals (bench/tables/coldpath_goals.py)
#   others            bench/coldpath.py, qwen3 and gemma3; ~20-30 min
#   index_bench       index_bench: first mask (cold/warm memo), first walk, WriteMaskReady,
#                     NextState, GuideAdvance; bench/tables/index_bench.py; ~8-10 min (llama3 alone: 2.5 min)
#   regex_conformance regex_conformance_test (../shared corpora); bench/tables/regex_conformance.py; <1 min
#   service           bench/service_bench.sh; bench/tables/service.py; ~2 min
#   vocab_vs_json     scripts/bench_vocab_load.py (gemma3); bench/tables/vocab_vs_json.py; <1 min
#   vocab_load        vocab_load_bench, 3 repetitions; bench/tables/vocab_load.py; <1 min
#   shm_demo          bench/shm_demo_bench.sh (CPU regions); bench/tables/shm_demo.py; ~1 min
#   maskbench         bench/maskbench_table.py, warm and fresh; ~10-20 min; with it, from the
#                     warm run's --verbose output, maskbench_reasons (bench/tables/maskbench_reasons.py)
#   maskbench_limit   maskctl maskbench on the four largest-schema files at --max-regex-bytes 1 MiB
#                     and 8 MiB; bench/tables/maskbench_limit.py; ~5-10 min
#   maskbench_routes  maskctl maskbench on every file, --route regex, --route auto, then --route
#                     auto --any-property-order; bench/tables/maskbench_routes.py; ~25 min; with it, from the auto run's
#                     --verbose output, maskbench_routes_reasons (bench/tables/maskbench_reasons.py)
#   maskbench_peers   bench/maskbench_ttfm.py: fresh TTFM p50/p99/max, maskd's automatic route
#                     beside llguidance, over every schema, those both compile, their 60 largest;
#                     ~6 min
#   json_schema_suite json_schema_suite_test; bench/tables/json_schema_suite.py; <1 min
#   dfa_construction  index_bench --benchmark_filter='^Dfa'; bench/tables/dfa_construction.py; <1 min
#   restructure_ab    (only when named in ONLY: the record of issue #13)
#                     bench/ab_compare.py: this checkout against AB_BEFORE (default fcda933, main
#                     before the issue #13 restructuring), built in build/ab-before/src (a git
#                     worktree; maskctl and index_bench only); MaskBench fresh, 2 repeats, and
#                     index_bench, 3 repeats, interleaved; ~30-40 min (the before build ~10 min more)
#   adapters          bench/python/bench_adapters.py with peers; bench/tables/adapters.py; ~10-25 min
#   adapters_idle     the same, --idle-forward-ms 5 --no-peers, schema only; ~7 min
#   processor_step    bench/python/bench_processor_step.py (the transformers processor's own
#                     per-step work, no RPC, beside masked_fill_ alone and the peers' torch CPU
#                     applies on the same packed rows); bench/tables/processor_step.py; ~3 min
#   budget            bench/python/bench_budget.py; bench/tables/budget.py; <1 min
#   engines           bench/engines/bench_engines.sh: scripts/engine_e2e.sh per engine (vllm, sglang,
#                     llama.cpp, transformers, mlx-lm), constraint (regex, JSON Schema, GBNF) and
#                     batch (1, 16), built-in backend and maskd; bench/tables/engines.py; ~30-40 min
#                     (installs an engine's venv on first use: GBs; ENGINE_LIST to choose)
#   grammar           grammar_bench (bundled qwen3, llama3, qwen3); bench/tables/grammar.py; ~1 min
#   grammar_peers     bench/grammar_peers.py, llama3 and qwen3, maskd beside llguidance and xgrammar
#                     (PEER_ENGINES); bench/tables/grammar_peers.py; ~15-25 min (xgrammar's
#                     masks take up to 0.5 s per token on sql)
#   tools             bench/tools_bench.py, llama3, N = 16, 128, 400 seeded tools (bench/tool_gen.py)
#                     as a structural tag, maskd beside llguidance and xgrammar (PEER_ENGINES);
#                     bench/tables/tools.py; ~5-10 min (xgrammar's compile of 400 tools dominates)
#
# Knobs (environment): ONLY, SKIP (comma-separated NAMEs); for coldpath/others:
# REPEATS (3), CLOCK (cpu: each process's CPU time, which a loaded machine
# distorts less; wall), ENGINES for llama3 (every engine; llama3 also runs the
# eager builds), PEER_TOKENIZERS (qwen3,gemma3) and PEER_ENGINES for them
# (maskd,llguidance,xgrammar); MASKBENCH_FILES (comma-separated names; default
# all); GPU_BENCH_JSON (above); SMOKE=1 cuts every run to its minimum (one
# repetition, a few steps, one tokenizer, no peers) to check the script and
# the generators: the tables it writes say so and are not figures to keep.
# Needs ../shared (tokenizers, corpora): a table whose inputs are absent is
# reported and left as it is. coldpath/others need .venv-bench (made with
# scripts/bench_venv.sh when missing); adapters/budget the Python venv of
# scripts/setup_python.sh (xgrammar and llguidance in build/bench-peers, not in that venv).
# Never part of the default tests. Exit status: 1 when a table failed.
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${REPEATS:-3}
CLOCK=${CLOCK:-cpu}
PEER_TOKENIZERS=${PEER_TOKENIZERS:-qwen3,gemma3}
ENGINES=${ENGINES:-maskd,llguidance,xgrammar,outlines}
PEER_ENGINES=${PEER_ENGINES:-maskd,llguidance,xgrammar}
ONLY=${ONLY:-}
SKIP=${SKIP:-}
SMOKE=${SMOKE:-}
smoke() { [[ -n $SMOKE ]]; }
if smoke; then
  REPEATS=1 PEER_TOKENIZERS=qwen3 ENGINES=maskd PEER_ENGINES=maskd MASKBENCH_FILES=${MASKBENCH_FILES:-BFCL_sql}
fi
TABLES=(kernels_gpu kernels coldpath others index_bench regex_conformance service vocab_vs_json
        vocab_load shm_demo maskbench maskbench_limit maskbench_routes maskbench_peers json_schema_suite dfa_construction
        restructure_ab adapters adapters_idle processor_step budget engines grammar grammar_peers tools)
out=build/bench-docs
mkdir -p "$out"
# Added to the kernels stamp when the GPU table is not regenerated (kernels_gpu runs first).
GPU_NOTE=""

in_list() { [[ ",$2," == *",$1,"* ]]; }
# restructure_ab is the record of issue #13 (two fixed commits): only when named.
wanted() {
  if [[ $1 == restructure_ab ]]; then in_list "$1" "$ONLY"; return; fi
  { [[ -z $ONLY ]] || in_list "$1" "$ONLY"; } && ! in_list "$1" "$SKIP"
}
build() { nice cmake --build build --target "$@" >/dev/null; }
gpu_visible() { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; }
# show ARGS...: the command line as a shell would read it back (arguments with
# characters other than [A-Za-z0-9_./=:,@+-] single-quoted).
show() {
  local a s=""
  for a; do
    if [[ $a =~ ^[A-Za-z0-9_./=:,@+-]+$ ]]; then s+=" $a"; else s+=" '$a'"; fi
  done
  echo "${s# }"
}

# stamp COMMAND [NOTE]: the line above every generated table.
stamp() {
  local dirty="" note=""
  git diff --quiet HEAD -- index grammar kernels service shm tools client bench 2>/dev/null || dirty=" (with uncommitted changes)"
  [[ -n ${2:-} ]] && note=" $2"
  smoke && note+=" **SMOKE run (SMOKE=1: minimal settings): not figures to keep.**"
  echo "Generated by \`scripts/bench_docs.sh\` running \`$1\` at commit \`$(git rev-parse --short HEAD)\`$dirty, $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) vCPUs.$note"
  echo
}

# emit NAME COMMAND FORMATTER INPUT [NOTE]: stamp + the formatter's Markdown of
# INPUT into $out/NAME.md. The formatter exits 2 when INPUT measured nothing.
emit() {
  local name=$1 cmd=$2 formatter=$3 input=$4 note=${5:-}
  { stamp "$cmd" "$note"; python3 "bench/tables/$formatter" "$input"; } > "$out/$name.md.new"
  mv "$out/$name.md.new" "$out/$name.md"
}

# A maskd on a private unix socket (the bundled tokenizers), stopped on exit.
start_maskd() {
  MASKD_DIR=$(mktemp -d /tmp/maskd-docs-XXXXXX)
  MASKD_ADDR=unix://$MASKD_DIR/maskd.sock
  build/bin/maskd --listen "$MASKD_ADDR" --metrics-listen= "$@" 2> "$MASKD_DIR/maskd.log" &
  MASKD_PID=$!
  trap 'kill "$MASKD_PID" 2>/dev/null || true; wait "$MASKD_PID" 2>/dev/null || true; rm -rf "$MASKD_DIR"' EXIT
  for _ in $(seq 300); do grep -q ' INFO start ' "$MASKD_DIR/maskd.log" && return 0; sleep 0.1; done
  echo "maskd did not start: $(tail -3 "$MASKD_DIR/maskd.log")" >&2
  return 1
}

# The venv of scripts/setup_python.sh (shared with the tests: never changed
# here). The in-process peers the adapter bench compares (xgrammar,
# llguidance; pinned) go to their own folder, build/bench-peers, which
# pyclient puts on PYTHONPATH.
python_venv() { scripts/setup_python.sh; }
PEERS_DIR=build/bench-peers
bench_peers() {
  if [ ! -f "$PEERS_DIR/.ready" ]; then
    "$1/bin/pip" install -q --target "$PEERS_DIR" --no-deps xgrammar==0.2.9 llguidance==1.9.1 \
      "apache-tvm-ffi>=0.1.11" >&2
    touch "$PEERS_DIR/.ready"
  fi
}

# gbench NAME FORMATTER NOTE BINARY ARGS...: a Google Benchmark binary's JSON,
# formatted.
gbench() {
  local name=$1 formatter=$2 note=$3
  shift 3
  build "$(basename "$1")"
  local extra=()
  smoke && extra=(--benchmark_min_time=0.01 --benchmark_repetitions=1)
  nice "$@" "${extra[@]}" --benchmark_format=json > "$out/$name.json"
  emit "$name" "$(show "$@" "${extra[@]}")" "$formatter" "$out/$name.json" "$note"
}

# lines NAME FORMATTER NOTE COMMAND...: a command's stdout, formatted.
lines() {
  local name=$1 formatter=$2 note=$3
  shift 3
  nice "$@" > "$out/$name.out"
  emit "$name" "$(show "$@")" "$formatter" "$out/$name.out" "$note"
}

table_kernels() {
  gbench kernels kernels.py "$GPU_NOTE" build/bin/apply_mask_bench --benchmark_min_time=0.3 \
    --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
}

table_kernels_gpu() {
  local src gpu note="" cmd="OUT=build/bench-docs/gpu tests/gpu/run.sh build-gpu"
  if [[ -n ${GPU_BENCH_JSON:-} ]]; then
    src=$GPU_BENCH_JSON
    cmd="$cmd\` on a GPU machine, formatted here from \`$src"
    note="The commit is this checkout's; the GPU machine's must be the same for the figures to describe it."
  elif gpu_visible; then
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
    OUT=$out/gpu tests/gpu/run.sh build-gpu > "$out/gpu.log" 2>&1 || { tail -20 "$out/gpu.log" >&2; return 1; }
    src=$out/gpu/apply_mask_cuda_bench.json
    cmd="$cmd\` on \`$gpu"
  else
    return 3
  fi
  emit kernels_gpu "$cmd" kernels_gpu.py "$src" "$note"
}

coldpath() {  # NAME ARGS...: bench/coldpath.py
  local name=$1
  shift
  [ -x .venv-bench/bin/python ] || scripts/bench_venv.sh
  build maskd_coldpath maskctl
  local cmd=(.venv-bench/bin/python bench/coldpath.py "$@" --repeats "$REPEATS" --clock "$CLOCK")
  { stamp "$(show "${cmd[@]}")" "Medians of $REPEATS fresh processes per engine and case."
    nice "${cmd[@]}" --json "$out/coldpath-$name.json"; } > "$out/$name.md.new"
  mv "$out/$name.md.new" "$out/$name.md"
}
table_coldpath() {
  coldpath coldpath --tokenizers llama3 --eager --threads "$(nproc)" --engines "$ENGINES"
  emit coldpath_goals "python3 bench/tables/coldpath_goals.py build/bench-docs/coldpath-coldpath.json" \
    coldpath_goals.py "$out/coldpath-coldpath.json" "From the llama3 run above." || rm -f "$out/coldpath_goals.md"
}
table_others() { coldpath others --tokenizers "$PEER_TOKENIZERS" --engines "$PEER_ENGINES"; }

table_index_bench() {
  gbench index_bench index_bench.py "CPU time, medians of 3." build/bin/index_bench \
    '--benchmark_filter=^(Memcpy|CompileFirstMask|FirstVisitWriteMask|WriteMaskReady|NextState|GuideAdvance)' \
    --benchmark_min_time=0.2 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
}

table_regex_conformance() {
  build regex_conformance_test
  lines regex_conformance regex_conformance.py "" build/bin/regex_conformance_test \
    --gtest_filter=RegexConformance.SharedCorpora
}

table_service() {
  build maskd maskctl
  if smoke; then
    SERVICE_STEPS=30 lines service service.py "" bench/service_bench.sh build 20
  else
    lines service service.py "" bench/service_bench.sh build
  fi
}

table_vocab_vs_json() {
  build maskctl
  local runs=()
  smoke && runs=(--tokenizer ../shared/tokenizers/llama2 --runs 1)
  lines vocab_vs_json vocab_vs_json.py "" python3 scripts/bench_vocab_load.py --maskctl build/bin/maskctl \
    "${runs[@]}" --json
}

table_grammar() {
  build grammar_bench
  local extra=()
  smoke && extra=(--reps 1 --walks 1 --steps 8)
  lines grammar grammar.py "" build/bin/grammar_bench --tokenizers bundled,llama3,qwen3 "${extra[@]}"
}

table_grammar_peers() {
  [ -x .venv-bench/bin/python ] || scripts/bench_venv.sh
  build maskd_grammar_coldpath maskctl
  local cmd=(.venv-bench/bin/python bench/grammar_peers.py --tokenizers llama3,qwen3 --engines "$PEER_ENGINES"
             --repeats "$REPEATS" --clock "$CLOCK")
  smoke && cmd=(.venv-bench/bin/python bench/grammar_peers.py --tokenizers qwen3 --grammars json
                --engines "$PEER_ENGINES" --repeats 1 --warm-reps 1 --clock "$CLOCK")
  nice "${cmd[@]}" --json "$out/grammar_peers.json" 2> "$out/grammar_peers.log" || { tail -3 "$out/grammar_peers.log" >&2; return 1; }
  emit grammar_peers "$(show "${cmd[@]}")" grammar_peers.py "$out/grammar_peers.json" \
    "Medians of ${REPEATS} fresh processes per engine and case; clock $CLOCK."
}

table_tools() {
  [ -x .venv-bench/bin/python ] || scripts/bench_venv.sh
  build maskd_grammar_coldpath maskctl
  local cmd=(.venv-bench/bin/python bench/tools_bench.py --tokenizer llama3 --counts 16,128,400
             --engines "$PEER_ENGINES" --repeats "$REPEATS" --clock "$CLOCK")
  smoke && cmd=(.venv-bench/bin/python bench/tools_bench.py --tokenizer llama3 --counts 16
                --engines "$PEER_ENGINES" --repeats 1 --warm-reps 1 --clock "$CLOCK")
  nice "${cmd[@]}" --json "$out/tools.json" 2> "$out/tools.log" || { tail -3 "$out/tools.log" >&2; return 1; }
  emit tools "$(show "${cmd[@]}")" tools.py "$out/tools.json" \
    "Medians of ${REPEATS} fresh processes per engine and N; clock $CLOCK; seed 26."
}

table_vocab_load() {
  gbench vocab_load vocab_load.py "Medians of 3." build/bin/vocab_load_bench --benchmark_min_time=1 \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
}

table_shm_demo() {
  build maskd maskctl
  lines shm_demo shm_demo.py \
    "POSIX shared memory only: CUDA regions are checked (not timed) by tests/gpu/run.sh's round-trip test." \
    bench/shm_demo_bench.sh build $(smoke && echo 4 5 || echo 64 200)
}

table_maskbench() {
  build maskctl
  local cmd=(python3 bench/maskbench_table.py --clock "$CLOCK")
  [[ -n ${MASKBENCH_FILES:-} ]] && cmd+=(--files "$MASKBENCH_FILES")
  cmd+=(--reasons "$out/maskbench_reasons.txt")
  { stamp "$(show "${cmd[@]}")" "llama3, ${MASKBENCH_FILES:-every file of maskbench-dev}."
    nice "${cmd[@]}"; } > "$out/maskbench.md.new"
  mv "$out/maskbench.md.new" "$out/maskbench.md"
  emit maskbench_reasons "$(show "${cmd[@]}")" maskbench_reasons.py "$out/maskbench_reasons.txt" \
    "The failure reasons of its warm run (\`--verbose\`)." || rm -f "$out/maskbench_reasons.md"
}

table_maskbench_limit() {
  build maskctl
  local dir=../shared/corpora/maskbench-dev files=() n
  local names=(Github_ultra Kubernetes JsonSchemaStore Github_hard)
  smoke && names=(BFCL_sql)
  for n in "${names[@]}"; do files+=("$dir/$n.jsonl"); done
  [[ -e ${files[0]} ]] || return 2
  for n in 1048576 8388608; do
    echo "# limit $n"
    nice build/bin/maskctl maskbench --tokenizer ../shared/tokenizers/llama3 --max-regex-bytes "$n" "${files[@]}"
  done > "$out/maskbench_limit.txt"
  emit maskbench_limit "build/bin/maskctl maskbench --tokenizer ../shared/tokenizers/llama3 --max-regex-bytes N $(show "${files[@]}")" \
    maskbench_limit.py "$out/maskbench_limit.txt" "N = 1048576, then 8388608."
}

table_maskbench_peers() {
  [ -x .venv-bench/bin/python ] || scripts/bench_venv.sh
  build maskctl
  [[ -d ../shared/corpora/maskbench-dev ]] || return 2
  local cmd=(.venv-bench/bin/python bench/maskbench_ttfm.py --peers llguidance)
  [[ -n ${MASKBENCH_FILES:-} ]] && cmd+=(--files "$MASKBENCH_FILES")
  { stamp "$(show "${cmd[@]}")" "llama3, ${MASKBENCH_FILES:-every file of maskbench-dev}; CPU time; maskd fresh per schema (\`maskctl maskbench --fresh --route auto\`), llguidance 1.9.1 in one process per file, its caches kept."
    nice "${cmd[@]}" --raw "$out/maskbench_peers.json" 2> "$out/maskbench_peers.log"; } > "$out/maskbench_peers.md.new"
  mv "$out/maskbench_peers.md.new" "$out/maskbench_peers.md"
}

table_maskbench_routes() {
  build maskctl
  local dir=../shared/corpora/maskbench-dev files=() n
  if [[ -n ${MASKBENCH_FILES:-} ]]; then
    IFS=, read -ra names <<< "$MASKBENCH_FILES"
    for n in "${names[@]}"; do files+=("$dir/$n.jsonl"); done
  else
    files=("$dir"/*.jsonl)
  fi
  [[ -e ${files[0]} ]] || return 2
  {
    echo "# route regex"
    nice build/bin/maskctl maskbench --tokenizer ../shared/tokenizers/llama3 --require-text --cpu-time \
      --route regex "${files[@]}"
    echo "# route auto"
    nice build/bin/maskctl maskbench --tokenizer ../shared/tokenizers/llama3 --require-text --cpu-time \
      --route auto --verbose "${files[@]}" 2> "$out/maskbench_routes_reasons.txt"
    echo "# route auto-any-order"
    nice build/bin/maskctl maskbench --tokenizer ../shared/tokenizers/llama3 --require-text --cpu-time \
      --route auto --any-property-order --verbose "${files[@]}" 2> "$out/maskbench_routes_anyorder.txt"
  } > "$out/maskbench_routes.txt"
  { stamp "build/bin/maskctl maskbench --tokenizer ../shared/tokenizers/llama3 --require-text --cpu-time --route R $(show "${files[@]}")" \
      "R = regex, then auto (with --verbose), then auto with --any-property-order (with --verbose); warm (one process per run), CPU time."
    python3 bench/tables/maskbench_routes.py "$out/maskbench_routes.txt" \
      --verbose-auto "$out/maskbench_routes_reasons.txt" --verbose-any "$out/maskbench_routes_anyorder.txt" \
      --corpus "$dir"; } > "$out/maskbench_routes.md.new"
  mv "$out/maskbench_routes.md.new" "$out/maskbench_routes.md"
  emit maskbench_routes_reasons "build/bin/maskctl maskbench --tokenizer ../shared/tokenizers/llama3 --require-text --cpu-time --route auto --verbose $(show "${files[@]}")" \
    maskbench_reasons.py "$out/maskbench_routes_reasons.txt" \
    "Its failure reasons (\`--verbose\`), counted in failures, not schemas." || rm -f "$out/maskbench_routes_reasons.md"
}

table_json_schema_suite() {
  build json_schema_suite_test
  lines json_schema_suite json_schema_suite.py "" build/bin/json_schema_suite_test
}

table_dfa_construction() {
  gbench dfa_construction dfa_construction.py "Wall time, medians of 5." build/bin/index_bench \
    '--benchmark_filter=^Dfa' --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
}

# The build of AB_BEFORE that restructure_ab compares with: a detached worktree
# under build/ (ignored), configured without CUDA, two targets.
AB_BEFORE=${AB_BEFORE:-fcda933}
table_restructure_ab() {
  local src=build/ab-before/src
  [[ -d ../shared/corpora/maskbench-dev ]] || return 2
  if [[ ! -d $src ]]; then
    mkdir -p build/ab-before
    git worktree add --detach "$src" "$AB_BEFORE" >&2
  fi
  git -C "$src" checkout -q --detach "$AB_BEFORE"
  cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMASKD_WITH_CUDA=OFF >/dev/null
  nice cmake --build "$src/build" --target maskctl index_bench >/dev/null
  build maskctl index_bench
  local cmd=(python3 bench/ab_compare.py --before "$src/build/bin" --modes fresh --maskbench-repeats 2
             --index-repeats 3)
  smoke && cmd+=(--files BFCL_sql --maskbench-repeats 1 --index-repeats 1
                 "--index-filter=^(Memcpy|NextState)/llama3")
  { stamp "$(show "${cmd[@]}")" "Before: \`$(git -C "$src" rev-parse --short HEAD)\`; after: this commit."
    nice "${cmd[@]}"; } > "$out/restructure_ab.md.new"
  mv "$out/restructure_ab.md.new" "$out/restructure_ab.md"
}

# pyclient NAME FORMATTER [peers] SCRIPT ARGS...: a bench/python script
# against a private maskd, in the venv, at nice 19 (the stamp shows the
# command with the socket elided).
pyclient() {
  local name=$1 formatter=$2 venv peers=""
  shift 2
  [[ $1 == peers ]] && { peers=peers; shift; }
  build maskd
  venv=$(python_venv)
  local pythonpath=${PYTHONPATH:-}
  if [[ -n $peers ]]; then
    bench_peers "$venv"
    pythonpath=$PWD/$PEERS_DIR${pythonpath:+:$pythonpath}
  fi
  start_maskd
  PYTHONPATH=$pythonpath nice -n 19 "$venv/bin/python" "$@" --addr "$MASKD_ADDR" > "$out/$name.jsonl"
  emit "$name" "\$(scripts/setup_python.sh)/bin/python $(show "$@") --addr <maskd socket>" "$formatter" \
    "$out/$name.jsonl"
}
table_adapters() {
  if smoke; then
    pyclient adapters adapters.py bench/python/bench_adapters.py --hidden 16 --layers 1 --threads 1 \
      --batches 1 --max-new 4 --constraints regex --no-peers
  else
    pyclient adapters adapters.py peers bench/python/bench_adapters.py --hidden 128 --layers 2 --threads 1
  fi
}
table_adapters_idle() {
  local args=(--hidden 128 --layers 2 --threads 1)
  smoke && args=(--hidden 16 --layers 1 --threads 1 --batches 1 --max-new 4)
  pyclient adapters_idle adapters.py bench/python/bench_adapters.py "${args[@]}" \
    --idle-forward-ms 5 --no-peers --constraints schema
}
table_processor_step() {
  local venv steps
  venv=$(python_venv)
  steps=$(smoke && echo 10 || echo 300)
  bench_peers "$venv"
  PYTHONPATH=$PWD/$PEERS_DIR${PYTHONPATH:+:$PYTHONPATH} nice "$venv/bin/python" \
    bench/python/bench_processor_step.py --steps "$steps" > "$out/processor_step.jsonl"
  emit processor_step "\$(scripts/setup_python.sh)/bin/python bench/python/bench_processor_step.py --steps $steps" \
    processor_step.py "$out/processor_step.jsonl" \
    "One torch thread; medians of $steps calls per case; the peers from $PEERS_DIR (xgrammar 0.2.9, llguidance 1.9.1)."
}
table_budget() { pyclient budget budget.py bench/python/bench_budget.py -n "$(smoke && echo 20 || echo 1000)"; }
table_engines() {
  build maskd
  local engines batches tokens
  engines=${ENGINE_LIST:-$(smoke && echo transformers || echo "vllm sglang llama.cpp transformers mlx-lm")}
  batches=$(smoke && echo 1 || echo "1 16")
  tokens=$(smoke && echo 8 || echo 64)
  ENGINES=$engines BATCHES=$batches MAX_TOKENS=$tokens SEED=1 \
    bench/engines/bench_engines.sh "$out/engines.jsonl"
  emit engines "ENGINES=\"$engines\" BATCHES=\"$batches\" MAX_TOKENS=$tokens SEED=1 bench/engines/bench_engines.sh OUT.jsonl" \
    engines.py "$out/engines.jsonl" \
    "One engine process per cell (scripts/engine_e2e.sh), the tiny random Llama with Qwen3's 151,936-wide logits, seeded temperature-1 sampling, budget mode on; ms/step: the constrained run's wall time over its decode steps; adds: minus the same process's unconstrained ms/step."
}

# Tables a table's run also writes, from the same measurements.
byproducts() {
  case $1 in
    coldpath) echo coldpath_goals ;;
    maskbench) echo maskbench_reasons ;;
    maskbench_routes) echo maskbench_routes_reasons ;;
  esac
}

done=() failed=() left=()
for name in "${TABLES[@]}"; do
  if ! wanted "$name"; then
    [[ $name == kernels_gpu ]] && GPU_NOTE="The GPU table below was not regenerated in this run (not selected: ONLY/SKIP); it keeps the figures its own stamp names."
    continue
  fi
  echo "== $name" >&2
  rm -f "$out/$name.md"
  for extra in $(byproducts "$name"); do rm -f "$out/$extra.md"; done
  set +e
  ( set -e; "table_$name" )
  rc=$?
  set -e
  if [[ $rc -eq 0 && -s $out/$name.md ]]; then
    done+=("$name")
    for extra in $(byproducts "$name"); do
      [[ -s $out/$extra.md ]] && done+=("$extra")
    done
  elif [[ $rc -eq 3 || $rc -eq 2 ]]; then
    left+=("$name")   # nothing measured here (no GPU, no ../shared): the table stays as it is
  else
    failed+=("$name")
  fi
  if [[ $name == kernels_gpu && $rc -ne 0 ]]; then
    if [[ $rc -eq 3 ]]; then
      GPU_NOTE="The GPU table below was not regenerated (no GPU visible here: \`nvidia-smi -L\` lists none); it keeps the figures its own stamp names."
    else
      GPU_NOTE="The GPU table below was not regenerated (tests/gpu/run.sh failed in this run); it keeps the figures its own stamp names."
    fi
  fi
done

python3 - docs/benchmarks.md "$out" "${done[@]}" <<'PY'
import os, re, sys
path, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
text = open(path, encoding="utf-8").read()
for name in names:
    body = open(os.path.join(out, name + ".md"), encoding="utf-8").read().strip()
    pat = re.compile(r"(<!-- bench_docs:%s -->\n).*?(<!-- /bench_docs:%s -->)" % (name, name), re.S)
    if not pat.search(text):
        sys.exit("docs/benchmarks.md has no bench_docs:%s markers" % name)
    text = pat.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)
open(path, "w", encoding="utf-8").write(text)
PY
echo "docs/benchmarks.md: regenerated: ${done[*]:-none}" >&2
[[ ${#left[@]} -eq 0 ]] || echo "left as they were (nothing measured here: no GPU or no ../shared): ${left[*]}" >&2
[[ ${#failed[@]} -eq 0 ]] || { echo "FAILED: ${failed[*]} (left as they were; see the output above)" >&2; exit 1; }
