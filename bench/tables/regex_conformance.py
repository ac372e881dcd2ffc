#!/usr/bin/env python3
"""Regex conformance (docs/benchmarks.md, "Regex conformance"), from the output of

  build/bin/regex_conformance_test --gtest_filter=RegexConformance.SharedCorpora > R.txt
  python3 bench/tables/regex_conformance.py R.txt

Whole-string cases of ../shared/corpora/regex: the pass count, the skipped
cases by reason (syntax a full-match DFA does not support) and the cases that
ask no whole-string question (dropped before counting), each largest first.
Exits 2 when the test printed no count (../shared absent: the test skips).
"""
from __future__ import annotations

import argparse
import re
import sys

from common import open_input, table

PASS = re.compile(r"^shared corpora: (\d+)/(\d+) applicable cases pass")
SKIPPED = re.compile(r"^\s+skipped\s+(\d+): (?:regex: )?(.*)$")
DROPPED = re.compile(r"^\s+not a whole-string case\s+(\d+): (.*)$")
FAILED = re.compile(r"^\s+FAILED (.*)$")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", help="the test's stdout ('-': stdin)")
    args = ap.parse_args()
    passed = applicable = -1
    skipped: list[tuple[int, str]] = []
    dropped: list[tuple[int, str]] = []
    failed: list[str] = []
    with open_input(args.log) as f:
        for line in f:
            if m := PASS.match(line):
                passed, applicable = int(m.group(1)), int(m.group(2))
            elif m := SKIPPED.match(line):
                skipped.append((int(m.group(1)), m.group(2)))
            elif m := DROPPED.match(line):
                dropped.append((int(m.group(1)), m.group(2)))
            elif m := FAILED.match(line):
                failed.append(m.group(1))
    if applicable < 0:
        print("regex_conformance.py: no pass count in the input (is ../shared/corpora/regex there?)",
              file=sys.stderr)
        return 2
    out = ["**%d of %d applicable cases pass (%.1f%%)**; %d skipped, %d not whole-string questions."
           % (passed, applicable, 100.0 * passed / max(1, applicable), sum(n for n, _ in skipped),
              sum(n for n, _ in dropped)), ""]
    out.append(table(["skipped: regex maskd rejects", "cases"], [False, True],
                     [[r, str(n)] for n, r in sorted(skipped, reverse=True)]))
    out.append(table(["dropped: not a whole-string question", "cases"], [False, True],
                     [[r, str(n)] for n, r in sorted(dropped, reverse=True)]))
    if failed:
        out.append("Failures:\n\n" + "\n".join("- `%s`" % f for f in failed) + "\n")
    sys.stdout.write("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
