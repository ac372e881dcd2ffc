#!/usr/bin/env python3
"""MaskBench passes under two regex size limits (docs/benchmarks.md, "JSON
Schema / MaskBench"), from `maskctl maskbench` JSON lines, each run's lines
after a "# limit BYTES" line:

  for n in 1048576 8388608; do echo "# limit $n"
    build/bin/maskctl maskbench --tokenizer ../shared/tokenizers/llama3 --max-regex-bytes $n FILES...
  done > L.txt
  python3 bench/tables/maskbench_limit.py L.txt

One row per limit: schemas passing per file, and the TTFM p99 over the files.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from common import open_input, table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", help="the runs' output ('-': stdin)")
    args = ap.parse_args()
    runs: list[tuple[int, dict[str, dict]]] = []
    with open_input(args.log) as f:
        for line in f:
            if line.startswith("# limit "):
                runs.append((int(line.split()[2]), {}))
            elif line.startswith("{") and runs:
                j = json.loads(line)
                runs[-1][1][os.path.basename(j["file"]).replace(".jsonl", "")] = j
    if not runs or not runs[0][1]:
        print("maskbench_limit.py: no maskbench lines in the input", file=sys.stderr)
        return 2
    files = [name for name in runs[0][1] if name != "all"]
    rows = []
    for limit, by_file in runs:
        label = "%d MiB" % (limit >> 20) if limit % (1 << 20) == 0 else "%d B" % limit
        p99 = by_file.get("all", {}).get("ttfm_p99_us")
        rows.append([label] + ["%d of %d" % (by_file[n]["passing"], by_file[n]["schemas"]) for n in files]
                    + ["%.0f ms" % (p99 / 1e3) if p99 is not None else "—"])
    sys.stdout.write(table(["limit"] + ["%s passing" % n for n in files] + ["TTFM p99, these files"],
                           [False] + [True] * (len(files) + 1), rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
