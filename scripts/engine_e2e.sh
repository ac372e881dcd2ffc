#!/usr/bin/env bash
# Real generation through an inference engine with maskd (or the engine's own backend)
# constraining it, every output checked by an independent matcher; also the engines'
# benchmark (docs/engines.md, docs/benchmarks.md "Engines").
#
#   scripts/engine_e2e.sh ENGINE --constraints IN.jsonl --out OUT.jsonl [--maskd ADDR]
#       [--backend maskd|builtin] [--max-tokens N] [--batch B] [--seed S]
#
# ENGINE: vllm, sglang, llama.cpp, transformers, mlx-lm. Creates or reuses the engine's
# cached virtualenv (scripts/engine_venv.sh), builds and caches a tiny random model with
# the bundled Qwen3 tokenizer (bench/engines/tiny_model.py), and, without --maskd,
# starts build/bin/maskd (scripts/build.sh first). IN.jsonl: {"id", "kind":
# regex|json_schema|lark|gbnf, "constraint"} per line (bench/engines/constraints.jsonl
# is an example). OUT.jsonl: a line per sample, then a summary line.
# Exit status: 0 all outputs valid, 1 a violation, 2 bad arguments or input.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
engine=${1:?usage: scripts/engine_e2e.sh ENGINE --constraints IN.jsonl --out OUT.jsonl [...]}
venv=$("$root/scripts/engine_venv.sh" "$engine")
# Run from the caller's folder: IN.jsonl and OUT.jsonl may be relative to it.
exec "$venv/bin/python" "$root/bench/engines/e2e.py" "$@"
