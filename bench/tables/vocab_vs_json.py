#!/usr/bin/env python3
"""Vocabulary load against Python's json.load (docs/benchmarks.md, "Vocabulary
load"), from the JSON object of

  python3 scripts/bench_vocab_load.py --maskctl build/bin/maskctl --json > V.json
  python3 bench/tables/vocab_vs_json.py V.json

Best of the script's runs on each side. Goal: Vocabulary::Load faster than the
bare json.load of the same file.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from common import grouped, num, open_input, table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="bench_vocab_load.py --json stdout ('-': stdin)")
    args = ap.parse_args()
    with open_input(args.json) as f:
        v = json.load(f)
    name = os.path.basename(os.path.dirname(v["tokenizer"])) or v["tokenizer"]
    rows = [["Python `json.load` of tokenizer.json", num(v["json_load_wall_ms"], 1) + " ms",
             num(v["json_load_cpu_ms"], 1) + " ms"],
            ["maskd `Vocabulary::Load` (`maskctl vocab` `load_ms`)", num(v["load_ms"], 1) + " ms", "—"],
            ["whole `maskctl vocab` process", num(v["process_wall_ms"], 1) + " ms",
             num(v["process_cpu_ms"], 1) + " ms"],
            ["**ratio json.load / maskd**", "**%.2f×**" % (v["json_load_wall_ms"] / v["load_ms"]),
             "**%.2f×**" % (v["json_load_cpu_ms"] / v["process_cpu_ms"])]]
    sys.stdout.write("%s: %.1f MB of JSON, %s tokens, medians of %d runs.\n\n" % (
        name, v["json_mb"], grouped(v["tokens"]), v["runs"]))
    sys.stdout.write(table(["measure", "wall", "CPU"], [False, True, True], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
