#!/usr/bin/env python3
"""Python engine adapters table (docs/benchmarks.md, "Python engine adapters"),
from the JSON lines of

  $VENV/bin/python bench/python/bench_adapters.py --addr ADDR ... > A.jsonl
  python3 bench/tables/adapters.py A.jsonl

One row per (constraint, batch, mode), in run order; step time against the
unconstrained run of the same constraint and batch.
"""
from __future__ import annotations

import argparse
import sys

from common import load_json_lines, num, table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsonl", help="bench_adapters.py stdout ('-': stdin)")
    args = ap.parse_args()
    runs = [r for r in load_json_lines(args.jsonl) if "ms_per_step" in r]
    if not runs:
        print("adapters.py: no run line in the input", file=sys.stderr)
        return 2
    base = {(r["constraint"], r["batch"]): r["ms_per_step"] for r in runs if r["mode"] == "unconstrained"}
    rows = []
    for r in runs:
        b = base.get((r["constraint"], r["batch"]))
        rows.append([r["constraint"], str(r["batch"]), r["mode"], str(r["tokens"]), num(r["ms_per_token"], 1),
                     num(r["ms_per_step"], 1), num(r["forward_ms_p50"], 1), num(r["added_ms_p50"], 1),
                     num(r["added_ms_p99"], 1), "%.2f×" % (r["ms_per_step"] / b) if b else "—"])
    sys.stdout.write(table(["constraint", "batch", "mode", "tokens", "ms / token", "ms / step",
                            "forward ms / step (p50)", "added ms / step p50", "p99", "step time vs unconstrained"],
                           [False, True, False] + [True] * 7, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
