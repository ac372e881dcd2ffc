#!/usr/bin/env python3
"""DFA construction against its baselines (docs/benchmarks.md, "DFA construction
speed"), from index_bench's JSON:

  build/bin/index_bench --benchmark_filter='^Dfa' --benchmark_repetitions=5 \\
      --benchmark_report_aggregates_only=true --benchmark_format=json > D.json
  python3 bench/tables/dfa_construction.py D.json

Per regex of bench/data/dfa_*.re: Dfa::FromPattern (parse + construction),
Regex::Parse alone and a memcpy of the pattern, medians, in the same process.
"""
from __future__ import annotations

import argparse
import os
import sys

from common import Run, grouped, load_gbench, num, table

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def us(r: Run | None, digits: int = 2) -> str:
    if r is None:
        return "—"
    if r.error is not None:
        return "err"
    return num(r.real_ns / 1e3, digits) + " µs" if r.real_ns < 1e6 else num(r.real_ns / 1e6, 2) + " ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="index_bench --benchmark_format=json output ('-': stdin)")
    args = ap.parse_args()
    runs, _ = load_gbench(args.json)
    cases: dict[str, dict[str, Run]] = {}
    for r in runs.values():
        p = r.parts()
        if p[0] in ("DfaFromPattern", "DfaBaselineParse", "DfaBaselineMemcpy") and len(p) == 2:
            cases.setdefault(p[1], {})[p[0]] = r
    if not cases:
        print("dfa_construction.py: no Dfa* benchmark in the input", file=sys.stderr)
        return 2
    rows = []
    for name, c in cases.items():
        path = os.path.join(ROOT, "bench", "data", "dfa_%s.re" % name)
        size = grouped(os.path.getsize(path)) + " B" if os.path.exists(path) else "?"
        build, parse = c.get("DfaFromPattern"), c.get("DfaBaselineParse")
        states = grouped(build.counters.get("dfa_states", 0)) if build and build.error is None else "?"
        ratio = "%.1f×" % (build.real_ns / parse.real_ns) \
            if build and parse and build.error is None and parse.error is None else "—"
        rows.append(["%s (%s, %s states)" % (name, size, states), us(build), us(parse),
                     us(c.get("DfaBaselineMemcpy")), ratio])
    sys.stdout.write(table(["regex (pattern bytes, minimal DFA states)", "FromPattern", "Parse", "memcpy", "FromPattern / Parse"],
                           [False, True, True, True, True], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
