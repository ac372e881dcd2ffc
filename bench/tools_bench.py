#!/usr/bin/env python3
"""Structural tags of many tools (issue #26 item 3): maskd side by side with
llguidance and XGrammar, one fresh process per engine and figure.

For each N of --counts, bench/tool_gen.py (seed --seed) writes N synthetic
tools as a structural tag, one tag per tool (`<function=NAME>` ARGS
`</function>`, trigger `<function=`; form "tags") and, with --forms
tags,anyof, as one `<tool_call>` tag whose schema is an anyOf of the tools
(form "anyof"), and a seeded call of one tool after a line of free text.
Each engine then runs in its own new process (--repeats times; medians):
  - maskd: build/bin/maskd_grammar_coldpath --structural-tag (compiled by a
    ConstraintCompiler with maskd's default limits), spelling the call with
    the longest allowed token at each step;
  - llguidance (its StructTag: lazy trigger lexemes, %json bodies) and
    xgrammar (compile_structural_tag), from .venv-bench, run by
    bench/peers.py on the same token bytes, walked with maskd's tokens, their
    masks compared with maskd's at every step.

Figures per engine (ms unless _us; --clock cpu by default: each process's
CPU time, which a loaded machine distorts less):
  ttfm_ms        document -> compiled constraint -> first mask (tokenizer
                 load excluded)
  step_us        per step of the first walk over the call (mask + advance):
                 mean, p99
  warm_step_us   maskd: per step of the walk replayed on new sessions of the
                 same index (mean, p99); peers: the median replay's mean
  resent_ttfm_ms maskd only: the same document compiled again by the same
                 compiler (the tools sent in a later request) + first mask
  dfas_built     maskd only: terminal DFAs the first compilation built
  agree          peers: steps whose mask equals maskd's, of those compared

Usage:
  scripts/bench_venv.sh      # once: .venv-bench with the peers
  .venv-bench/bin/python bench/tools_bench.py [--tokenizer llama3] [--counts 16,128,400]
      [--forms tags] [--engines maskd,llguidance,xgrammar] [--repeats 3] [--clock cpu]
      [--json OUT.json]
  python3 bench/tables/tools.py OUT.json     # the table of docs/benchmarks.md
Each case's result is also printed on stderr as one JSON line as it ends.
Without .venv-bench (or with --engines maskd) only maskd runs.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import fresh_runs  # noqa: E402

SHARED = os.path.join(os.path.dirname(ROOT), "shared")
GEN = os.path.join(ROOT, "bench", "tool_gen.py")
CALL = {"tags": "call-%d.txt", "anyof": "anyof-call-%d.txt"}


def run_maskd(args, tok_dir: str, doc: str, call: str, masks: str) -> dict:
    cmd = [args.coldpath, "--tokenizer", tok_dir, "--structural-tag", doc, "--text", call,
           "--warm-reps", str(args.warm_reps), "--clock", args.clock]
    m = fresh_runs.run_maskd(args, cmd, masks)
    if "error" not in m:
        m["walk_text_spelled"] = m["text_spelled"]
    return m


def run_peer(args, eng: str, tok_dir: str, doc: str, tokens: list[int], masks: str, tmp: str) -> dict:
    with open(doc, encoding="utf-8") as f:
        constraint = f.read()
    return fresh_runs.run_peer(args, eng, tok_dir, "structural_tag", constraint, tokens, masks, tmp,
                               diff_steps=2, diff_examples=3)


def peers_available() -> bool:
    p = subprocess.run([sys.executable, "-c", "import llguidance"], capture_output=True)
    return p.returncode == 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--tokenizer-root", default=os.path.join(SHARED, "tokenizers"))
    ap.add_argument("--counts", default="16,128,400")
    ap.add_argument("--forms", default="tags", help="tags, anyof or both (comma-separated)")
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--engines", default="maskd,llguidance,xgrammar")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warm-reps", type=int, default=5)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="cpu")
    ap.add_argument("--timeout-s", type=int, default=600)
    ap.add_argument("--coldpath", default=os.path.join(ROOT, "build", "bin", "maskd_grammar_coldpath"))
    ap.add_argument("--maskctl", default=os.path.join(ROOT, "build", "bin", "maskctl"))
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "coldpath-cache"))
    ap.add_argument("--json", help="write every case's result here (a JSON list)")
    args = ap.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    if any(e != "maskd" for e in engines) and not peers_available():
        print("tools_bench: no llguidance in %s (scripts/bench_venv.sh): maskd only" % sys.executable,
              file=sys.stderr)
        engines = ["maskd"]
    tok_dir = os.path.join(args.tokenizer_root, args.tokenizer)
    results = []
    with tempfile.TemporaryDirectory(prefix="tools_bench") as tmp:
        subprocess.run([sys.executable, GEN, "--out-dir", tmp, "--counts", args.counts,
                        "--seed", str(args.seed)], check=True)
        for n in (int(x) for x in args.counts.split(",") if x):
            for form in (f for f in args.forms.split(",") if f):
                doc = os.path.join(tmp, "%s-%d.json" % (form, n))
                call = os.path.join(tmp, CALL[form] % n)
                res = {"tokenizer": args.tokenizer, "tools": n, "form": form, "seed": args.seed,
                       "clock": args.clock, "repeats": args.repeats, "doc_bytes": os.path.getsize(doc),
                       "engines": {}}
                masks = os.path.join(tmp, "masks.bin")
                m = run_maskd(args, tok_dir, doc, call, masks)
                res["engines"]["maskd"] = m
                if "error" not in m:
                    for eng in engines:
                        if eng != "maskd":
                            res["engines"][eng] = run_peer(args, eng, tok_dir, doc, m["tokens"], masks, tmp)
                results.append(res)
                print(json.dumps(res), file=sys.stderr, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if all("error" not in r["engines"]["maskd"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
