#!/usr/bin/env bash
# The engines' side-by-side table (docs/benchmarks.md "Engines"): for each engine, constraint
# kind (a regex, a JSON Schema, a GBNF grammar from bench/engines/constraints.jsonl) and batch
# size, scripts/engine_e2e.sh with the engine's built-in backend and with maskd, B copies of
# the constraint per run (one engine process per run). Writes one JSON line per run (the
# run's summary plus "kind"; a failed run: {"engine", "backend", "kind", "batch", "error"}).
#
#   bench/engines/bench_engines.sh OUT.jsonl
#   ENGINES="vllm llama.cpp" BATCHES="1 16" MAX_TOKENS=64 SEED=1 bench/engines/bench_engines.sh OUT.jsonl
#
# Then: python3 bench/tables/engines.py OUT.jsonl (Markdown).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: bench/engines/bench_engines.sh OUT.jsonl}
ENGINES=${ENGINES:-vllm sglang llama.cpp transformers mlx-lm}
BATCHES=${BATCHES:-1 16}
MAX_TOKENS=${MAX_TOKENS:-64}
SEED=${SEED:-1}
KINDS=${KINDS:-phone:regex person:json_schema sum:gbnf}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: > "$out"
for engine in $ENGINES; do
  for kv in $KINDS; do
    id=${kv%%:*} kind=${kv#*:}
    for batch in $BATCHES; do
      python3 - "$root/bench/engines/constraints.jsonl" "$id" "$batch" > "$tmp/in.jsonl" <<'PY'
import json, sys
src, want, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rec = next(json.loads(l) for l in open(src) if json.loads(l)["id"] == want)
for i in range(n):
    print(json.dumps(dict(rec, id=f"{want}-{i}")))
PY
      for backend in builtin maskd; do
        echo "bench_engines: $engine $kind batch $batch $backend" >&2
        rc=0
        "$root/scripts/engine_e2e.sh" "$engine" --constraints "$tmp/in.jsonl" --out "$tmp/out.jsonl" \
          --backend "$backend" --batch "$batch" --max-tokens "$MAX_TOKENS" --seed "$SEED" \
          > "$tmp/log" 2>&1 || rc=$?
        if [ -s "$tmp/out.jsonl" ] && [ "$rc" -le 1 ]; then
          tail -n 1 "$tmp/out.jsonl" | python3 -c 'import json,sys; d=json.load(sys.stdin); d["kind"]=sys.argv[1]; print(json.dumps(d))' "$kind" >> "$out"
        else
          python3 -c 'import json,sys; print(json.dumps({"engine": sys.argv[1], "backend": sys.argv[2], "kind": sys.argv[3], "batch": int(sys.argv[4]), "error": open(sys.argv[5]).read()[-600:]}))' \
            "$engine" "$backend" "$kind" "$batch" "$tmp/log" >> "$out"
        fi
        rm -f "$tmp/out.jsonl"
      done
    done
  done
done
