#!/usr/bin/env python3
"""Vocabulary::Load per tokenizer (docs/benchmarks.md, "Vocabulary load"), from

  build/bin/vocab_load_bench --benchmark_min_time=1 --benchmark_repetitions=3 \\
      --benchmark_report_aggregates_only=true --benchmark_format=json > L.json
  python3 bench/tables/vocab_load.py L.json

Medians of the repetitions; the JSON size is tokenizer.json's (uncompressed for
the bundled .gz), read from the folders the benchmark loads.
"""
from __future__ import annotations

import argparse
import gzip
import os
import sys

from common import grouped, load_gbench, num, table

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "tokenizers")
NAMES = {"qwen3_bundled_gz": "qwen3 bundled (`data/tokenizers/qwen3`, .gz)"}


def json_mb(label: str) -> str:
    folder = os.path.join(ROOT, "data", "tokenizers", "qwen3") if label == "qwen3_bundled_gz" \
        else os.path.join(SHARED, label)
    plain, packed = os.path.join(folder, "tokenizer.json"), os.path.join(folder, "tokenizer.json.gz")
    if os.path.exists(plain):
        return "%.1f MB" % (os.path.getsize(plain) / 1e6)
    if os.path.exists(packed):
        with gzip.open(packed) as f:
            return "%.1f MB" % (len(f.read()) / 1e6)
    return "—"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="vocab_load_bench --benchmark_format=json output ('-': stdin)")
    args = ap.parse_args()
    runs, _ = load_gbench(args.json)
    rows = []
    for r in runs.values():
        if r.error is not None:
            continue  # a tokenizer that is absent here
        rows.append([NAMES.get(r.label, r.label), grouped(r.counters.get("tokens", 0)), json_mb(r.label),
                     num(r.real_ns / 1e6, 1) + " ms", num(r.cpu_ns / 1e6, 1) + " ms"])
    if not rows:
        print("vocab_load.py: nothing measured", file=sys.stderr)
        return 2
    sys.stdout.write(table(["tokenizer", "tokens", "JSON", "wall", "CPU"], [False, True, True, True, True], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
