#!/usr/bin/env python3
"""First mask, first walk and warm path per (tokenizer, regex) (docs/benchmarks.md,
"Writing a ready state's mask, and advancing one token"), from index_bench's JSON:

  build/bin/index_bench --benchmark_format=json \\
      --benchmark_filter='^(Memcpy|CompileFirstMask|FirstVisitWriteMask|WriteMaskReady|NextState|GuideAdvance)' \\
      > I.json
  python3 bench/tables/index_bench.py I.json

CPU time per operation (medians when repeated). WriteMaskReady is compared with
Memcpy of the same tokenizer's mask bytes in the same run. The memo column is
the loop memo's (tokenizer/loop_masks.h) misses per first mask with the memo cold
and hits with it warm: 0 / 0 means the first mask does not consult it.
"""
from __future__ import annotations

import argparse
import sys

from common import Run, load_gbench, num, table

FAMILIES = ("CompileFirstMaskFreshVocab", "CompileFirstMaskWarmMemo", "CompileFirstMaskColdMemo", "FirstVisitWriteMask",
            "WriteMaskReady", "NextState", "GuideAdvance")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="index_bench --benchmark_format=json output ('-': stdin)")
    args = ap.parse_args()
    runs, _ = load_gbench(args.json)
    memcpy: dict[str, Run] = {}
    cases: dict[tuple[str, str], dict[str, Run]] = {}
    for r in runs.values():
        p = r.parts()
        if p[0] == "Memcpy":
            memcpy[p[1]] = r
        elif p[0] in FAMILIES and len(p) == 3:
            cases.setdefault((p[1], p[2]), {})[p[0]] = r
    if not cases:
        sys.exit("index_bench.py: no matching benchmarks in the input")

    def cell(case: dict[str, Run], family: str, scale: float, digits: int = 2) -> str:
        r = case.get(family)
        if r is None:
            return "—"
        if r.error is not None:
            return "err"
        return num(r.cpu_ns / scale, digits)

    rows = []
    for (tok, regex), case in cases.items():
        walk = case.get("FirstVisitWriteMask")
        steps = "%d (%d)" % (walk.counters.get("steps", 0), walk.counters.get("distinct_states", 0)) \
            if walk is not None and walk.error is None else "—"
        ready, base = case.get("WriteMaskReady"), memcpy.get(tok)
        ratio = "%.2f" % (ready.cpu_ns / base.cpu_ns) if ready and base and ready.error is None else "—"
        cold, warm = case.get("CompileFirstMaskColdMemo"), case.get("CompileFirstMaskWarmMemo")
        memo = "%.1f / %.1f" % (cold.counters.get("memo_misses", 0), warm.counters.get("memo_hits", 0)) \
            if cold and warm and cold.error is None and warm.error is None else "—"
        rows.append([tok, regex, cell(case, "CompileFirstMaskFreshVocab", 1e6, 3),
                     cell(case, "CompileFirstMaskColdMemo", 1e6, 3),
                     cell(case, "CompileFirstMaskWarmMemo", 1e6, 3), memo, cell(case, "FirstVisitWriteMask", 1e6, 3),
                     steps, cell(case, "WriteMaskReady", 1, 0), num(base.cpu_ns, 0) if base else "—", ratio,
                     cell(case, "NextState", 1, 1), cell(case, "GuideAdvance", 1, 1)])
    sys.stdout.write(table(
        ["tokenizer", "regex", "first mask, fresh vocabulary ms", "first mask, cold memo ms",
         "first mask, warm memo ms",
         "memo misses (cold) / hits (warm) per mask", "first walk ms",
         "walk steps (states)", "WriteMaskReady ns", "memcpy ns", "ratio", "NextState ns",
         "GuideAdvance ns"],
        [False, False] + [True] * 11, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
