#!/usr/bin/env python3
"""The cold path against issue #14's goals (docs/benchmarks.md, "The cold path"),
from the results bench/coldpath.py writes with --json:

  .venv-bench/bin/python bench/coldpath.py --tokenizers llama3 --eager ... --json C.json
  python3 bench/tables/coldpath_goals.py C.json

Per goal: on how many cases it holds, and the cases that miss with both figures.
"""
from __future__ import annotations

import argparse
import json
import sys

from common import open_input, table


def engine(r: dict, name: str) -> dict:
    e = r["engines"].get(name, {})
    return {} if "error" in e else e


def versus(results: list[dict], key: str, peer: str, peer_key: str, unit: str) -> list[str]:
    """[result, misses] for "maskd's key <= the peer's peer_key" over the cases both measured."""
    ratios, misses = [], []
    failed = ["`%s` (%s)" % (r["regex"], r["engines"][peer]["error"]) for r in results
              if "error" in r["engines"].get(peer, {})]
    for r in results:
        m, p = engine(r, "maskd").get(key), engine(r, peer).get(peer_key)
        if m is None or not p:
            continue
        ratios.append(m / p)
        if m > p:
            misses.append("`%s` (%.3g vs %.3g %s)" % (r["regex"], m, p, unit))
    if not ratios:
        return ["not measured (no %s figures)" % peer, ""]
    met = len(ratios) - len(misses)
    result = "%d of %d compared (%.2f–%.2f× %s's time)" % (met, len(ratios), min(ratios), max(ratios), peer)
    if failed:
        result += "; no %s figure on %s" % (peer, ", ".join(failed))
    return [result, "missed on " + ", ".join(misses) if misses else "met"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="bench/coldpath.py --json output ('-': stdin)")
    args = ap.parse_args()
    with open_input(args.json) as f:
        results = json.load(f)
    if not results:
        print("coldpath_goals.py: no results", file=sys.stderr)
        return 2
    rows = [["regex → first mask ≤ llguidance, every regex"] + versus(results, "ttfm_ms", "llguidance", "ttfm_ms", "ms"),
            ["whole first walk ≤ llguidance, every regex"] + versus(results, "walk_ms", "llguidance", "walk_ms", "ms"),
            ["eager build ≤ XGrammar's full compile, every regex"]
            + versus(results, "eager_ms", "xgrammar", "compile_ms", "ms")]
    write = [(engine(r, "maskd")["write_ns"] / engine(r, "maskd")["memcpy_ns"], r["regex"]) for r in results
             if engine(r, "maskd").get("write_ns") and engine(r, "maskd").get("memcpy_ns")]
    if write:
        worst = max(write)
        over = [name for ratio, name in write if ratio > 2]
        rows.append(["WriteMask ≤ 2× memcpy", "%d of %d (at most %.2f×, `%s`)" % (
            len(write) - len(over), len(write), worst[0], worst[1]),
            "missed on " + ", ".join("`%s`" % n for n in over) if over else "met"])
    advance = [(engine(r, "maskd")["advance_ns"], r["regex"]) for r in results
               if engine(r, "maskd").get("advance_ns") is not None]
    if advance:
        over = [name for ns, name in advance if ns > 30]
        rows.append(["advance ≤ 30 ns", "%.0f–%.0f ns" % (min(advance)[0], max(advance)[0]),
                     "missed on " + ", ".join("`%s`" % n for n in over) if over else "met"])
    sys.stdout.write(table(["goal", "result", ""], [False, False, False], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
