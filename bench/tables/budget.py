#!/usr/bin/env python3
"""Budget mode cost table (docs/benchmarks.md, "Budget mode cost"), from the
JSON lines of

  $VENV/bin/python bench/python/bench_budget.py --addr ADDR -n 1000 > B.jsonl
  python3 bench/tables/budget.py B.jsonl

One session inside a JSON string, stepped with no token, per mode.
"""
from __future__ import annotations

import argparse
import sys

from common import grouped, load_json_lines, num, table

MODES = {
    "no budget": "no budget",
    "budget, loose (no filtering)": "`max_tokens_left` 10,000 (over the constraint's longest distance: "
                                    "O(1) check, no filtering)",
    "budget, tight": "`max_tokens_left` 20 (filtering: each allowed token walked, twice where none fits)",
}


def us_or_ms(us: float) -> str:
    return num(us, 0) + " µs" if us < 1000 else num(us / 1e3, 1) + " ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsonl", help="bench_budget.py stdout ('-': stdin)")
    args = ap.parse_args()
    runs = [r for r in load_json_lines(args.jsonl) if "p50_us" in r]
    if not runs:
        print("budget.py: no line in the input", file=sys.stderr)
        return 2
    rows = [[MODES.get(r["mode"], r["mode"]), grouped(r["allowed_tokens"]), us_or_ms(r["p50_us"]),
             us_or_ms(r["p99_us"])] for r in runs]
    sys.stdout.write(table(["mode", "tokens allowed", "p50", "p99"], [False, True, True, True], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
