#!/usr/bin/env python3
"""Vocabulary load time: maskd versus Python's bare json.load, on one tokenizer.

Times, medians of --runs (default 5) each:
  - Python: json.load() of tokenizer.json (parse only: no vocabulary built);
  - maskd: `maskctl vocab --tokenizer DIR` load_ms, the full Vocabulary::Load
    (read, parse, token bytes, EOS, content hash) and TokenizerContext::Create
    (token trie, loop-mask byte index), and the wall
    time of the whole maskctl process;
and prints them with the ratio python / maskd. CPU times are printed too
(Python: process_time around json.load; maskctl: the child's user+sys, whole
process): on a shared, oversubscribed machine they move less than wall times.

Usage (from the repository root):
    python3 scripts/bench_vocab_load.py [--maskctl build/bin/maskctl]
        [--tokenizer ../shared/tokenizers/gemma3] [--runs 5] [--json]

--json prints one JSON object instead (bench/tables/vocab_vs_json.py reads it).
"""

import argparse
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_maskctl(arg):
    """--maskctl, else build/bin/maskctl, else the newest build*/bin/maskctl."""
    if arg:
        return arg
    default = os.path.join(ROOT, "build", "bin", "maskctl")
    if os.path.exists(default):
        return default
    hits = glob.glob(os.path.join(ROOT, "build*", "bin", "maskctl"))
    if hits:
        return max(hits, key=os.path.getmtime)
    sys.exit("maskctl not found: build it, or pass --maskctl")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--maskctl")
    ap.add_argument("--tokenizer",
                    default=os.path.join(os.path.dirname(ROOT), "shared", "tokenizers", "gemma3"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args()
    maskctl = find_maskctl(args.maskctl)
    path = args.tokenizer
    json_path = os.path.join(path, "tokenizer.json") if os.path.isdir(path) else path
    if not os.path.exists(json_path):
        sys.exit("%s is absent" % json_path)

    py, py_cpu = [], []
    for _ in range(args.runs):
        t0, c0 = time.perf_counter(), time.process_time()
        with open(json_path, encoding="utf-8") as f:
            json.load(f)
        py.append((time.perf_counter() - t0) * 1000)
        py_cpu.append((time.process_time() - c0) * 1000)

    load, wall, cpu = [], [], []
    summary = None
    for _ in range(args.runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run([maskctl, "vocab", "--tokenizer", path], capture_output=True, text=True)
        wall.append((time.perf_counter() - t0) * 1000)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000)
        if p.returncode != 0:
            sys.exit("maskctl failed: %s" % p.stderr.strip())
        summary = json.loads(p.stdout)
        load.append(summary["load_ms"])

    size_mb = os.path.getsize(json_path) / 1e6
    if args.json:
        print(json.dumps({"tokenizer": json_path, "json_mb": round(size_mb, 1), "tokens": summary["tokens"],
                          "runs": args.runs, "json_load_wall_ms": statistics.median(py), "json_load_cpu_ms": statistics.median(py_cpu),
                          "load_ms": statistics.median(load), "process_wall_ms": statistics.median(wall), "process_cpu_ms": statistics.median(cpu)}))
        return 0
    print("tokenizer: %s (%.1f MB, %d tokens, %s)" % (json_path, size_mb, summary["tokens"],
                                                      summary["kind"]))
    print("python json.load (median of %d):        %8.1f ms wall  %8.1f ms cpu" %
          (args.runs, statistics.median(py), statistics.median(py_cpu)))
    print("maskd Vocabulary::Load (median of %d):  %8.1f ms wall                (load_ms)" %
          (args.runs, statistics.median(load)))
    print("maskctl vocab process (median of %d):   %8.1f ms wall  %8.1f ms cpu  (whole process)" %
          (args.runs, statistics.median(wall), statistics.median(cpu)))
    print("ratio json.load / Vocabulary::Load:  %8.2fx wall (load_ms)  %6.2fx cpu (process)" %
          (statistics.median(py) / statistics.median(load), statistics.median(py_cpu) / statistics.median(cpu)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
