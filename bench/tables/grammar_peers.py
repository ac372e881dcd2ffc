#!/usr/bin/env python3
"""maskd's grammar engine beside XGrammar and llguidance, against issue #15's
goals (docs/benchmarks.md, "Grammar engine beside its peers"), from the
results bench/grammar_peers.py writes with --json:

  .venv-bench/bin/python bench/grammar_peers.py --tokenizers llama3,qwen3 --json G.json
  python3 bench/tables/grammar_peers.py G.json

Tables: time to first mask (maskd's split into compile, GrammarIndex from
the text, and first mask, guide and mask); per token (mask + advance) over the first walk
and over its replay (warm), mean and p99; mask agreement; the goals (time to
first mask <= llguidance's, per-token mean <= XGrammar's, per-token p99 <=
100 us, masks equal to each peer's), each with the cases that miss and both
figures; then every differing step the run described. An engine that failed
on a case shows "err" and its message is listed; a peer that refused a token
of maskd's walk is compared up to that step, and the refusal is listed.
"""
from __future__ import annotations

import argparse
import json
import sys

from common import engine_cell, engine_figures, num, open_input, table

PEERS = ("llguidance", "xgrammar")
P99_GOAL_US = 100.0


def case(r: dict) -> list[str]:
    return ["`%s`" % r["grammar"], r["tokenizer"]]


def versus(results: list[dict], label: str, mine, theirs, peer: str, unit: str) -> list[str]:
    """A goal row "maskd's figure <= the peer's" over the cases both measured."""
    compared, misses = 0, []
    for r in results:
        m, p = engine_figures(r, "maskd"), engine_figures(r, peer)
        if not m or not p:
            continue
        compared += 1
        if mine(m) > theirs(p):
            misses.append("`%s`/%s (%s vs %s %s)" % (r["grammar"], r["tokenizer"], num(mine(m)),
                                                   num(theirs(p)), unit))
    if not compared:
        return [label, "not measured (no %s figures)" % peer, ""]
    return [label, "%d of %d" % (compared - len(misses), compared),
            "missed on " + ", ".join(misses) if misses else "met"]


def under(results: list[dict], label: str, get, limit: float) -> list[str]:
    """A goal row "maskd's figure <= limit µs" over the cases maskd measured."""
    rows = [r for r in results if engine_figures(r, "maskd")]
    misses = ["`%s`/%s (%s µs)" % (r["grammar"], r["tokenizer"], num(get(engine_figures(r, "maskd")), 1))
              for r in rows if get(engine_figures(r, "maskd")) > limit]
    return [label, "%d of %d" % (len(rows) - len(misses), len(rows)),
            "missed on " + ", ".join(misses) if misses else "met"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="bench/grammar_peers.py --json output ('-': stdin)")
    args = ap.parse_args()
    with open_input(args.json) as f:
        results = json.load(f)
    if not results:
        print("grammar_peers.py: no results", file=sys.stderr)
        return 2
    peers = [p for p in PEERS if any(p in r["engines"] for r in results)]
    engines = ["maskd"] + peers
    out = []

    out.append("**Grammar text → first mask, ms** (tokenizer load excluded)\n")
    rows = []
    for r in results:
        row = case(r) + [engine_cell(r, e, lambda x: x["ttfm_ms"]) for e in engines]
        row += [engine_cell(r, "maskd", lambda x: x["compile_ms"]), engine_cell(r, "maskd", lambda x: x["first_mask_ms"])]
        m, ll = engine_figures(r, "maskd"), engine_figures(r, "llguidance")
        if "llguidance" in peers:
            row.append("%.2f×" % (m["ttfm_ms"] / ll["ttfm_ms"]) if m and ll else "—")
        rows.append(row)
    ratio = ["maskd / llguidance"] if "llguidance" in peers else []
    out.append(table(["grammar", "tokenizer"] + engines + ["maskd: compile", "first mask"] + ratio,
                     [False, False] + [True] * (len(engines) + 2 + len(ratio)), rows))

    for title, key in (("Per token over the first walk (mask + advance), µs: mean / p99", "step_us"),
                       ("Per token, the same walk replayed (warm), µs: mean / p99", "warm_us")):
        out.append("**%s**\n" % title)
        rows = []
        for r in results:
            steps = engine_figures(r, "maskd").get("walk_steps")
            row = case(r) + ["—" if steps is None else str(int(steps))]
            for e in engines:
                x = r["engines"].get(e)
                # maskd_grammar_coldpath names its warm summary warm_step_us.
                k = "warm_step_us" if key == "warm_us" and e == "maskd" else key
                row.append("—" if x is None else "err" if "error" in x else
                           "%s / %s" % (num(x[k]["mean"], 1), num(x[k]["p99"], 1)))
            rows.append(row)
        out.append(table(["grammar", "tokenizer", "tokens"] + engines, [False, False] + [True] * (len(engines) + 1),
                         rows))

    if peers:
        out.append("**Masks equal to maskd's, steps** (every step of the walk and the mask after it)\n")
        rows = []
        for r in results:
            row = case(r)
            for p in peers:
                e = r["engines"].get(p)
                row.append("—" if e is None else "err" if "error" in e else "%d / %d%s" % (
                    e["agree"], e["compared"], " (refused step %d)" % e["refused"]["step"] if "refused" in e else ""))
            rows.append(row)
        out.append(table(["grammar", "tokenizer"] + peers, [False, False] + [True] * len(peers), rows))

    out.append("**Against the goals** (first walk unless said; medians of the fresh processes)\n")
    goals = [versus(results, "time to first mask ≤ llguidance's", lambda m: m["ttfm_ms"],
                    lambda p: p["ttfm_ms"], "llguidance", "ms"),
             versus(results, "per-token mean ≤ XGrammar's", lambda m: m["step_us"]["mean"],
                    lambda p: p["step_us"]["mean"], "xgrammar", "µs"),
             under(results, "per-token p99 ≤ 100 µs", lambda m: m["step_us"]["p99"], P99_GOAL_US),
             under(results, "per-token p99 ≤ 100 µs, warm", lambda m: m["warm_step_us"]["p99"], P99_GOAL_US)]
    for p in peers:
        both = [r for r in results if engine_figures(r, "maskd") and engine_figures(r, p)]
        differ = ["`%s`/%s (%d of %d steps%s)" % (r["grammar"], r["tokenizer"],
                                                   engine_figures(r, p)["compared"] - engine_figures(r, p)["agree"],
                                                   engine_figures(r, p)["compared"],
                                                   "; a token refused" if "refused" in engine_figures(r, p) else "")
                  for r in both
                  if engine_figures(r, p)["agree"] != engine_figures(r, p)["compared"] or "refused" in engine_figures(r, p)]
        goals.append(["masks equal to %s's" % p, "%d of %d cases" % (len(both) - len(differ), len(both)),
                      "differ on " + ", ".join(differ) + " (below)" if differ else "met"])
    out.append(table(["goal", "cases", ""], [False, False, False], goals))

    notes = []
    for r in results:
        for name, e in r["engines"].items():
            if "error" in e:
                notes.append("- `%s`/%s, %s: error: %s" % (r["grammar"], r["tokenizer"], name, e["error"]))
            if "refused" in e:
                x = e["refused"]
                notes.append("- `%s`/%s, %s refused maskd's token %d `%s` at step %d: its walk stopped there" % (
                    r["grammar"], r["tokenizer"], name, x["token"], x["bytes"], x["step"]))
            for d in e.get("diffs", []) or []:
                notes.append("- `%s`/%s, %s, step %d after `%s`: %d tokens differ (only maskd %d, only %s %d), "
                             "e.g. %s" % (r["grammar"], r["tokenizer"], name, d["step"], d["after"],
                                          d["tokens_differing"], d["only_maskd"], name, d["only_peer"],
                                          "; ".join("`%s`" % x for x in d["examples"])))
    if notes:
        out.append("Differing steps (the first few per case) and errors:\n")
        out.append("\n".join(notes) + "\n")
    sys.stdout.write("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
