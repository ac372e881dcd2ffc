#!/usr/bin/env python3
"""JSON-Schema-Test-Suite agreement (docs/benchmarks.md, "JSON-Schema-Test-Suite"),
from the output of

  build/bin/json_schema_suite_test > S.txt
  python3 bench/tables/json_schema_suite.py S.txt

One row per draft, then the groups not converted by reason over both drafts
(every `$ref` the converter cannot resolve counted as one reason). Exits 2 when
the test printed no draft line (../shared absent: the test skips).
"""
from __future__ import annotations

import argparse
import collections
import re
import sys

from common import open_input, table

DRAFT = re.compile(r"^(draft[\w-]+): (\d+) groups, (\d+) converted; (\d+) instances, (\d+) agree "
                   r"\(([\d.]+)%\): valid (\d+)/(\d+), invalid (\d+)/(\d+)")
SKIPPED = re.compile(r"^\s+skipped\s+(\d+) groups: (.*)$")


def reason(text: str) -> str:
    if text.startswith("unsupported $ref"):
        return "`$ref` not resolvable in the document (remote, absolute, relative file)"
    return text.replace('"', "`") if "keyword" in text else text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", help="the test's stdout ('-': stdin)")
    args = ap.parse_args()
    rows = []
    reasons: collections.Counter[str] = collections.Counter()
    with open_input(args.log) as f:
        for line in f:
            if m := DRAFT.match(line):
                g = m.groups()
                rows.append([g[0].replace("draft", ""), g[1], g[2], g[3], "%s (%s%%)" % (g[4], g[5]),
                             "%s/%s" % (g[6], g[7]), "%s/%s" % (g[8], g[9])])
            elif m := SKIPPED.match(line):
                reasons[reason(m.group(2))] += int(m.group(1))
    if not rows:
        print("json_schema_suite.py: no draft line in the input (is ../shared there?)", file=sys.stderr)
        return 2
    out = [table(["draft", "groups", "converted", "instances", "agree", "valid accepted", "invalid rejected"],
                 [False] + [True] * 6, rows)]
    out.append(table(["groups not converted (both drafts)", "groups"], [False, True],
                     [[r, str(n)] for r, n in reasons.most_common()]))
    sys.stdout.write("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
