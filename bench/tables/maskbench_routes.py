#!/usr/bin/env python3
"""MaskBench on the regex route and on the automatic route (docs/benchmarks.md,
"JSON Schema routes"), from `maskctl maskbench` JSON lines, each run's lines
after a "# route NAME" line:

  for r in regex auto; do echo "# route $r"
    build/bin/maskctl maskbench --tokenizer ../shared/tokenizers/llama3 --require-text --cpu-time --route $r FILES...
  done > R.txt
  python3 bench/tables/maskbench_routes.py R.txt

One row per file: schemas compiled and passing on each route, how many the
automatic route sent to the grammar route, the valid and invalid instances'
verdicts, and TTFM p50 / TBM mean on each route; then issue #15's goals.

A third run, "# route auto-any-order" (--route auto --any-property-order), adds
a table of the three runs' totals and the goals on it. Given the verbose
stderr of both automatic runs (--verbose-auto, --verbose-any) and the corpus
(--corpus), a breakdown follows: the valid instances the default rejects and
members in any order accept, and the invalid instances members in any order
accept, by the keyword MaskBench's validator (python_error) names.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from common import open_input, table


def pct(a: int, b: int) -> str:
    return "%.1f%%" % (100.0 * a / b) if b else "—"


def pct2(a: int, b: int) -> str:
    return "%.2f%%" % (100.0 * a / b) if b else "—"


def goal_line(t: dict) -> str:
    """Issue #15's three MaskBench goals on one run's totals."""
    goals = [("schemas passing ≥ 92%", t["passing"], t["schemas"], 92.0),
             ("valid accepted ≥ 97%", t["valid_accepted"], t["valid"], 97.0),
             ("invalid rejected ≥ 97%", t["invalid_rejected"], t["invalid"], 97.0)]
    return "; ".join("%s: %s, %s" % (label, "met" if 100.0 * x / n >= goal else "**missed**", pct2(x, n))
                     for label, x, n, goal in goals if n)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", help="the runs' output ('-': stdin)")
    ap.add_argument("--verbose-auto", help="stderr of the auto run with --verbose")
    ap.add_argument("--verbose-any", help="stderr of the auto-any-order run with --verbose")
    ap.add_argument("--corpus", help="the MaskBench folder (python_error of each test)")
    args = ap.parse_args()
    runs: dict[str, dict[str, dict]] = {}
    current = None
    with open_input(args.log) as f:
        for line in f:
            if line.startswith("# route "):
                current = line.split()[2]
                runs[current] = {}
            elif line.startswith("{") and current:
                j = json.loads(line)
                runs[current][os.path.basename(j["file"]).replace(".jsonl", "")] = j
    if not {"regex", "auto"} <= set(runs) or not runs["regex"] or not runs["auto"]:
        print("maskbench_routes.py: need a '# route regex' and a '# route auto' run", file=sys.stderr)
        return 2
    rows = []
    for name in runs["regex"]:
        r, a = runs["regex"][name], runs["auto"].get(name)
        if a is None:
            continue
        label = "**all**" if name == "all" else name
        rows.append([label, str(r["schemas"]),
                     "%d → %d" % (r["compiled"], a["compiled"]),
                     "%d → %d (%s)" % (r["passing"], a["passing"], pct(a["passing"], a["schemas"])),
                     str(a.get("grammar_route", 0)),
                     "%s → %s" % (pct(r["valid_accepted"], r["valid"]), pct(a["valid_accepted"], a["valid"])),
                     "%s → %s" % (pct(r["invalid_rejected"], r["invalid"]),
                                  pct(a["invalid_rejected"], a["invalid"])),
                     "%.2f → %.2f" % (r["ttfm_p50_us"] / 1e3, a["ttfm_p50_us"] / 1e3),
                     "%.1f → %.1f" % (r["tbm_avg_us"], a["tbm_avg_us"])])
    sys.stdout.write(table(["file", "schemas", "compiled regex → auto", "passing regex → auto",
                            "on the grammar route", "valid accepted", "invalid rejected",
                            "TTFM p50 ms", "TBM avg µs"],
                           [False] + [True] * 8, rows))
    a = runs["auto"].get("all")
    if a:
        sys.stdout.write("\nGoals (automatic route, all files): " + goal_line(a) + ".\n")
    anyorder = runs.get("auto-any-order", {}).get("all")
    if a and anyorder:
        r = runs["regex"]["all"]
        totals = []
        for label, t in (("regex", r), ("auto", a), ("auto, members in any order", anyorder)):
            totals.append([label, str(t["compiled"]), "%d (%s)" % (t["passing"], pct(t["passing"], t["schemas"])),
                           pct(t["valid_accepted"], t["valid"]), pct(t["invalid_rejected"], t["invalid"]),
                           "%.2f" % (t["ttfm_p50_us"] / 1e3), "%.1f" % t["tbm_avg_us"]])
        sys.stdout.write("\nAll files, with the automatic route's members-in-any-order option "
                         "(`--any-property-order`; every schema then takes the grammar route):\n\n")
        sys.stdout.write(table(["run", "compiled", "passing", "valid accepted", "invalid rejected",
                                "TTFM p50 ms", "TBM avg µs"], [False] + [True] * 6, totals))
        sys.stdout.write("\nGoals with members in any order: " + goal_line(anyorder) + ".\n")
    if args.verbose_auto and args.verbose_any and args.corpus:
        sys.stdout.write(breakdown(args.verbose_auto, args.verbose_any, args.corpus))
    return 0


def verdict_failures(path: str) -> dict[str, set]:
    """{"valid": {(file, schema, text[:200])}, "invalid": {...}} from maskctl --verbose stderr."""
    import re
    out: dict[str, set] = {"valid": set(), "invalid": set()}
    pat = re.compile(r"^(\S+): (\S+): (valid rejected at byte \d+|invalid accepted): (.*)$")
    with open(path, errors="replace") as f:
        for line in f:
            m = pat.match(line.rstrip("\n"))
            if m:
                kind = "valid" if m.group(3).startswith("valid") else "invalid"
                out[kind].add((os.path.basename(m.group(1)), m.group(2), m.group(4)[:200]))
    return out


def breakdown(auto_path: str, any_path: str, corpus: str) -> str:
    import collections
    import glob
    import re
    a, b = verdict_failures(auto_path), verdict_failures(any_path)
    errors = {}
    for path in glob.glob(os.path.join(corpus, "*.jsonl")):
        with open(path) as f:
            for line in f:
                d = json.loads(line)
                name = d.get("description", "").replace("sample ", "").replace("/", "---")
                for t in d.get("tests", []):
                    errors[(os.path.basename(path), name, t.get("text", "")[:200])] = t.get("python_error") or ""
    fixed = a["valid"] - b["valid"]
    new_invalid = b["invalid"] - a["invalid"]
    by_kw = collections.Counter()
    for key in new_invalid:
        m = re.search(r"Failed validating '(\w+)'", errors.get(key, ""))
        by_kw[m.group(1) if m else "not named"] += 1
    kws = ", ".join("`%s` %d" % (k, n) for k, n in sorted(by_kw.items(), key=lambda kn: (-kn[1], kn[0])))
    return ("\nWhat members in any order change (from both runs' `--verbose` lines, texts matched "
            "to the corpus): valid instances rejected %d → %d (%d of them accepted in any order; "
            "newly rejected in any order: %d); invalid instances accepted %d → %d, the %d new ones by the "
            "keyword MaskBench's validator says they fail: %s.\n" % (
                len(a["valid"]), len(b["valid"]), len(fixed), len(b["valid"] - a["valid"]),
                len(a["invalid"]), len(b["invalid"]), len(new_invalid), kws))


if __name__ == "__main__":
    sys.exit(main())
