#!/usr/bin/env python3
"""transformers processor per-step table (docs/benchmarks.md, "transformers processor:
per-step cost without the RPC"), from the JSON lines of

  $VENV/bin/python bench/python/bench_processor_step.py --steps 300 > P.jsonl
  python3 bench/tables/processor_step.py P.jsonl

Per (rows, live rows): the median CPU time of one processor call; of its apply alone (the
packed words on the logits, what the peers' columns time); of the in-process peers'
torch CPU applies on the same packed rows in the same run (llguidance, xgrammar; "—" where
the peer was not installed); the apply's time over the fastest peer's; and
masked_fill_ alone with a ready bool mask (the fill the processor did before it applied
the packed words directly).
"""
from __future__ import annotations

import argparse
import sys

from common import load_json_lines, num, table


def us_or_ms(us: float) -> str:
    return num(us, 0) + " µs" if us < 1000 else num(us / 1e3, 2) + " ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsonl", help="bench_processor_step.py stdout ('-': stdin)")
    args = ap.parse_args()
    runs = [r for r in load_json_lines(args.jsonl) if "cpu_p50_us" in r]
    if not runs:
        print("processor_step.py: no line in the input", file=sys.stderr)
        return 2
    peers = ["llguidance", "xgrammar"]

    def peer(r: dict, name: str) -> str:
        v = r.get(f"{name}_cpu_p50_us")
        return us_or_ms(v) if v is not None else "—"

    def vs_fastest(r: dict) -> str:
        times = [r[f"{p}_cpu_p50_us"] for p in peers if f"{p}_cpu_p50_us" in r]
        mine = r.get("apply_cpu_p50_us")
        if not times or mine is None:
            return "—"
        return num(mine / max(min(times), 1e-9), 2) + "×"

    rows = [[f"{r['rows']} × {r['live']}", us_or_ms(r["cpu_p50_us"]),
             us_or_ms(r["apply_cpu_p50_us"]) if "apply_cpu_p50_us" in r else "—"]
            + [peer(r, p) for p in peers]
            + [vs_fastest(r), us_or_ms(r["fill_cpu_p50_us"]), us_or_ms(r["wall_p50_us"])]
            for r in runs]
    sys.stdout.write(table(["rows × live", "processor call, CPU p50", "its apply alone, CPU p50"]
                           + [f"{p} apply, CPU p50" for p in peers]
                           + ["apply / fastest peer", "masked_fill_ alone, CPU p50",
                              "processor call, wall p50"],
                           [False] + [True] * (len(peers) + 5), rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
