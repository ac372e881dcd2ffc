#!/usr/bin/env python3
"""Shared-memory apply table (docs/benchmarks.md, "Shared-memory apply"), from
the JSON lines of

  bench/shm_demo_bench.sh build 64 200 > D.jsonl   # maskctl shm-demo, fp32 then bf16
  python3 bench/tables/shm_demo.py D.jsonl

apply: one StepInRegion masking the registered logits in the server; reply:
Step with the masks in the reply plus the client's CpuApplier. Goal: apply p50
<= reply p50 with 0 mismatches.
"""
from __future__ import annotations

import argparse
import sys

from common import load_json_lines, num, table

VOCAB = 128256  # llama3 logits per row
ELEM = {"fp32": 4, "fp16": 2, "bf16": 2}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsonl", help="shm_demo_bench.sh stdout ('-': stdin)")
    args = ap.parse_args()
    runs = [r for r in load_json_lines(args.jsonl) if "apply_p50_us" in r]
    if not runs:
        print("shm_demo.py: no shm-demo line in the input (is ../shared there?)", file=sys.stderr)
        return 2
    rows = []
    for r in runs:
        mb = r["rows"] * VOCAB * ELEM.get(r["dtype"], 4) / 1e6
        rows.append([r["dtype"], "%d × %d" % (r["rows"], r["steps"]), "%.1f MB" % mb,
                     num(r["apply_p50_us"] / 1e3) + " ms", num(r["reply_p50_us"] / 1e3) + " ms",
                     "%.2f" % (r["apply_p50_us"] / r["reply_p50_us"]), str(r["mismatches"])])
    sys.stdout.write(table(["dtype", "rows × steps", "logits bytes", "apply p50", "reply p50", "apply / reply",
                            "mismatches"], [False] + [True] * 6, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
