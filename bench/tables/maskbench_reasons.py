#!/usr/bin/env python3
"""MaskBench's top failure reasons (docs/benchmarks.md, "JSON Schema /
MaskBench"), from the --verbose stderr of `maskctl maskbench`:

  python3 bench/maskbench_table.py --reasons R.txt ...   # or maskctl maskbench --verbose ... 2> R.txt
  python3 bench/tables/maskbench_reasons.py R.txt

Counts are failures, not schemas (a schema can fail several instances).
"""
from __future__ import annotations

import argparse
import re
import sys

from common import grouped, open_input, table

HEADER = "top failure reasons"
LINE = re.compile(r"^\s+(\d+)\s+(.*)$")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", help="maskctl maskbench --verbose stderr ('-': stdin)")
    args = ap.parse_args()
    rows: list[list[str]] = []
    seen = found = False
    with open_input(args.log) as f:
        for line in f:
            if line.startswith(HEADER):
                seen, found, rows = True, True, []  # the last block wins
            elif seen and (m := LINE.match(line)):
                rows.append(["`%s`" % m.group(2).replace("`", "'"), grouped(int(m.group(1)))])
            elif seen and line.strip():
                seen = False
    if not found:
        print("maskbench_reasons.py: no failure reasons block in the input (not --verbose?)", file=sys.stderr)
        return 2
    if not rows:
        sys.stdout.write("No failures.\n")
        return 0
    sys.stdout.write(table(["failure reason (as maskctl prints it, truncated)", "failures"], [False, True], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
