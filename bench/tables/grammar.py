#!/usr/bin/env python3
"""The grammar engine per (grammar, tokenizer) (docs/benchmarks.md, "Grammar
engine"), from

  build/bin/grammar_bench --tokenizers bundled,llama3,qwen3 > G.jsonl
  python3 bench/tables/grammar.py G.jsonl

One row per walk line of grammar_bench's output; then one per "case" line
(one mask, warm, in a fixed state). "per token" is WriteMask +
Advance along random walks on a fresh index (memo filled on the way); "warm"
is the same walks again. The ratio column divides the warm p50 by the
baseline measured in the same run: a memcpy of one mask row.
"""
from __future__ import annotations

import argparse
import sys

from common import load_json_lines, num, table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsonl", help="grammar_bench output ('-': stdin)")
    args = ap.parse_args()
    lines = load_json_lines(args.jsonl)
    if not lines:
        return 2
    rows, cases = [], []
    for l in lines:
        if "case" in l:
            m = l["mask_us"]
            cases.append([
                l["case"], l["tokenizer"], str(l["tokens"]), str(l["allowed"]), num(m["p50"], 1),
                num(m["min"], 1), num(m["p50"] / l["memcpy_us"], 1) + "×",
            ])
            continue
        s, w = l["step_us"], l["warm_step_us"]
        rows.append([
            "`%s`" % l["grammar"], l["tokenizer"], num(l["compile_ms"]), num(l["first_mask_ms"]),
            str(l["steps"]), num(s["mean"], 1), num(s["p50"], 1), num(s["p99"], 1),
            num(w["p50"], 1), num(w["p99"], 1), num(w["p50"] / l["memcpy_us"], 1) + "×",
            "%.1f" % (l["memo_bytes"] / 1e6),
        ])
    sys.stdout.write(table(
        ["grammar", "tokenizer", "compile ms", "first mask ms", "tokens", "per token µs mean",
         "p50", "p99", "warm p50 µs", "warm p99 µs", "warm p50 / memcpy row", "memo MB"],
        [False, False, True, True, True, True, True, True, True, True, True, True], rows))
    if cases:
        sys.stdout.write("\n")
        sys.stdout.write(table(
            ["state", "tokenizer", "prefix tokens", "allowed", "mask µs p50", "min",
             "p50 / memcpy row"],
            [False, False, True, True, True, True, True], cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
