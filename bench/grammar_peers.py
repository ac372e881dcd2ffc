#!/usr/bin/env python3
"""maskd's grammar engine side by side with XGrammar and llguidance, one fresh
process per engine and case (issue #15's grammar goals).

For each (tokenizer, grammar) of bench/data/grammars/grammars.json, every
engine runs in its own new process (--repeats times; medians are reported,
never minima), each on the same language written in the format it takes
(the manifest names one file per engine):
  - maskd: build/bin/maskd_grammar_coldpath (bench/coldpath/grammar_coldpath_main.cc);
  - llguidance and xgrammar (from .venv-bench, never in the default tests;
    see scripts/bench_venv.sh), each run by bench/peers.py: fed the exact
    token bytes maskd loads, walked with the very tokens maskd's walk chose,
    and their mask compared with maskd's at every step.
The walk (--walk): "text" (default) spells the grammar's sample text (the
manifest's "text"), each step taking the longest allowed token that starts
the rest of it; "random" takes --steps tokens drawn (seeded) among the
allowed ones. EOS is never taken; the mask after the last token is compared
too (where EOS is allowed iff the text is complete).

Figures per engine (ms unless _us; the clock of --clock, cpu by default:
each process's CPU time, which a loaded machine distorts less):
  ttfm_ms       grammar text -> first mask (tokenizer load excluded)
  step_us       per step of the first walk (mask + advance): mean, p99
  warm_us       per step of the same walk replayed (memos filled): mean, p99
  agree         steps whose masks equal maskd's, of the steps compared

Usage:
  scripts/bench_venv.sh                   # once: .venv-bench with the peers
  .venv-bench/bin/python bench/grammar_peers.py [--tokenizers llama3,qwen3]
      [--grammars json,arithmetic,c,sql,calls] [--engines maskd,llguidance,xgrammar]
      [--walk text|random] [--steps 64] [--seed 1] [--repeats 3] [--warm-reps 10]
      [--clock cpu|wall] [--json OUT.json]
  python3 bench/tables/grammar_peers.py OUT.json      # the tables of docs/benchmarks.md
Each case's result is also printed on stderr as one JSON line as it ends.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import fresh_runs  # noqa: E402

SHARED = os.path.join(os.path.dirname(ROOT), "shared")
MANIFEST = os.path.join(ROOT, "bench", "data", "grammars", "grammars.json")
KINDS = {".lark": "lark", ".gbnf": "gbnf", ".ebnf": "ebnf"}


def kind_of(path: str) -> str:
    return KINDS[os.path.splitext(path)[1]]


def run_maskd(args, tok_dir: str, spec: dict, masks: str) -> dict:
    cmd = [args.coldpath, "--tokenizer", tok_dir, "--grammar", os.path.join(ROOT, spec["maskd"]),
           "--warm-reps", str(args.warm_reps), "--clock", args.clock]
    if args.walk == "text":
        cmd += ["--text", os.path.join(ROOT, spec["text"])]
    else:
        cmd += ["--steps", str(args.steps), "--seed", str(args.seed)]
    m = fresh_runs.run_maskd(args, cmd, masks)
    m["file"] = spec["maskd"]
    return m


def run_peer(args, eng: str, tok_dir: str, spec: dict, tokens: list[int], masks: str, tmp: str) -> dict:
    path = os.path.join(ROOT, spec[eng])
    with open(path, encoding="utf-8") as f:
        constraint = f.read()
    e = fresh_runs.run_peer(args, eng, tok_dir, kind_of(path), constraint, tokens, masks, tmp,
                            diff_steps=3, diff_examples=6)
    e["file"] = spec[eng]
    return e


def run_case(args, tok: str, name: str, spec: dict, tmp: str) -> dict:
    tok_dir = os.path.join(args.tokenizer_root, tok)
    res = {"tokenizer": tok, "grammar": name, "walk": args.walk, "clock": args.clock,
           "repeats": args.repeats, "engines": {}}
    masks = os.path.join(tmp, "masks.bin")
    m = run_maskd(args, tok_dir, spec, masks)
    res["engines"]["maskd"] = m
    if "error" in m:
        return res
    for eng in args.engines:
        if eng != "maskd":
            res["engines"][eng] = run_peer(args, eng, tok_dir, spec, m["tokens"], masks, tmp)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizers", default="llama3,qwen3")
    ap.add_argument("--tokenizer-root", default=os.path.join(SHARED, "tokenizers"))
    ap.add_argument("--manifest", default=MANIFEST)
    ap.add_argument("--grammars", default="", help="comma-separated names (default: all)")
    ap.add_argument("--engines", default="maskd,llguidance,xgrammar")
    ap.add_argument("--walk", choices=["text", "random"], default="text")
    ap.add_argument("--steps", type=int, default=64, help="--walk random: tokens per walk")
    ap.add_argument("--seed", type=int, default=1, help="--walk random: the sampler's seed")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warm-reps", type=int, default=10)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="cpu")
    ap.add_argument("--timeout-s", type=int, default=300)
    ap.add_argument("--coldpath", default=os.path.join(ROOT, "build", "bin", "maskd_grammar_coldpath"))
    ap.add_argument("--maskctl", default=os.path.join(ROOT, "build", "bin", "maskctl"))
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "coldpath-cache"))
    ap.add_argument("--json", help="write every case's result here (a JSON list)")
    args = ap.parse_args()
    with open(args.manifest, encoding="utf-8") as f:
        grammars = json.load(f)["grammars"]
    names = [n for n in args.grammars.split(",") if n] or list(grammars)
    args.engines = [e for e in args.engines.split(",") if e]
    results = []
    with tempfile.TemporaryDirectory(prefix="grammar_peers") as tmp:
        for tok in [t for t in args.tokenizers.split(",") if t]:
            for name in names:
                r = run_case(args, tok, name, grammars[name], tmp)
                results.append(r)
                print(json.dumps(r), file=sys.stderr, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if all("error" not in r["engines"].get("maskd", {}) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
