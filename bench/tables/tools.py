#!/usr/bin/env python3
"""Structural tags of N tools (issue #26 item 3) beside llguidance and
XGrammar, from the results bench/tools_bench.py writes with --json:

  .venv-bench/bin/python bench/tools_bench.py --json T.json
  python3 bench/tables/tools.py T.json

Tables: compile + first mask per engine and N (maskd's also split into
compile and first mask, with the same tools sent again to the same compiler
and the terminal DFAs built); per token over the seeded call's first walk
(mask + advance), mean / p99; the goals (compile + first mask <= the faster
peer's, per-token p99 <= 100 us), each with its misses; mask agreement with
each peer. An engine that failed shows "err", its message listed below.
"""
from __future__ import annotations

import argparse
import json
import sys

from common import engine_cell, engine_figures, grouped, num, open_input, table

PEERS = ("llguidance", "xgrammar")
P99_GOAL_US = 100.0


def case(r: dict) -> list[str]:
    return [str(r["tools"]), r["form"], grouped(r["doc_bytes"])]


def p99(e: dict) -> float:
    s = e["step_us"]
    return s["p99"] if isinstance(s, dict) else float("nan")


def goals(results: list[dict], peers: list[str]) -> list[str]:
    rows = []
    misses, compared = [], 0
    for r in results:
        m = engine_figures(r, "maskd")
        best = [engine_figures(r, p)["ttfm_ms"] for p in peers if engine_figures(r, p)]
        if not m or not best:
            continue
        compared += 1
        if m["ttfm_ms"] > min(best):
            misses.append("%d %s (%s vs %s ms)" % (r["tools"], r["form"], num(m["ttfm_ms"]), num(min(best))))
    if compared:
        rows.append(["compile + first mask ≤ the faster peer's", "%d / %d" % (compared - len(misses), compared),
                     "; ".join(misses) or "—"])
    slow = [r for r in results if engine_figures(r, "maskd") and p99(engine_figures(r, "maskd")) > P99_GOAL_US]
    measured = [r for r in results if engine_figures(r, "maskd")]
    rows.append(["per-token p99 ≤ %d µs (first walk)" % P99_GOAL_US,
                 "%d / %d" % (len(measured) - len(slow), len(measured)),
                 "; ".join("%d %s (%s µs)" % (r["tools"], r["form"], num(p99(engine_figures(r, "maskd")))) for r in slow) or "—"])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="bench/tools_bench.py --json output ('-': stdin)")
    args = ap.parse_args()
    with open_input(args.json) as f:
        results = json.load(f)
    if not results:
        print("tools.py: no results", file=sys.stderr)
        return 2
    peers = [p for p in PEERS if any(p in r["engines"] for r in results)]
    engines = ["maskd"] + peers
    out = ["**Tool list → first mask, ms** (tokenizer load excluded; `tags`: one tag per tool, "
           "`anyof`: one tag, an anyOf of the tools)\n"]
    rows = []
    for r in results:
        row = case(r) + [engine_cell(r, e, lambda x: x["ttfm_ms"]) for e in engines]
        row += [engine_cell(r, "maskd", lambda x: x["compile_ms"]), engine_cell(r, "maskd", lambda x: x["first_mask_ms"]),
                engine_cell(r, "maskd", lambda x: x["resent_ttfm_ms"]),
                engine_cell(r, "maskd", lambda x: x["dfas_built"], 0)]
        rows.append(row)
    out.append(table(["tools", "form", "bytes"] + engines +
                     ["maskd: compile", "first mask", "sent again", "DFAs built"],
                     [True, False, True] + [True] * (len(engines) + 4), rows))
    out.append("**Per token over the seeded call (mask + advance), first walk, µs: mean / p99**\n")
    rows = []
    for r in results:
        row = case(r)
        for e in engines:
            x = r["engines"].get(e)
            if x is None:
                row.append("—")
            elif "error" in x:
                row.append("err")
            else:
                row.append("%s / %s" % (num(x["step_us"]["mean"]), num(x["step_us"]["p99"])))
        row.append(engine_cell(r, "maskd", lambda x: x["walk_steps"], 0))
        rows.append(row)
    out.append(table(["tools", "form", "bytes"] + engines + ["steps"],
                     [True, False, True] + [True] * (len(engines) + 1), rows))
    out.append("**Goals** (issue #26)\n")
    out.append(table(["goal", "met", "misses"], [False, True, False], goals(results, peers)))
    if peers:
        out.append("**Masks equal to maskd's** (steps agreeing / compared; the first difference)\n")
        rows = []
        for r in results:
            row = case(r)
            for p in peers:
                e = engine_figures(r, p)
                if not e:
                    row.append("—")
                    continue
                d = e.get("diffs") or []
                first = (" (step %d: %s)" % (d[0]["step"], ", ".join(d[0]["examples"][:2]))) if d else ""
                row.append("%d / %d%s" % (e["agree"], e["compared"], first.replace("|", "\\|")))
            rows.append(row)
        out.append(table(["tools", "form", "bytes"] + peers, [True, False, True] + [False] * len(peers), rows))
    errors = [(r, e, x["error"]) for r in results for e, x in r["engines"].items() if "error" in x]
    if errors:
        out.append("Errors: " + "; ".join("%d %s %s: %s" % (r["tools"], r["form"], e, m) for r, e, m in errors) + "\n")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
