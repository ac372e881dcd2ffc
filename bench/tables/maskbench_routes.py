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
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from common import open_input, table


def pct(a: int, b: int) -> str:
    return "%.1f%%" % (100.0 * a / b) if b else "—"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", help="the runs' output ('-': stdin)")
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
    if set(runs) != {"regex", "auto"} or not runs["regex"] or not runs["auto"]:
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
        goals = [("schemas passing ≥ 92%", a["passing"], a["schemas"], 92.0),
                 ("valid accepted ≥ 97%", a["valid_accepted"], a["valid"], 97.0),
                 ("invalid rejected ≥ 97%", a["invalid_rejected"], a["invalid"], 97.0)]
        parts = ["%s: %s, %s" % (label, "met" if 100.0 * x / n >= goal else "**missed**", pct(x, n))
                 for label, x, n, goal in goals if n]
        sys.stdout.write("\nGoals (automatic route, all files): " + "; ".join(parts) + ".\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
