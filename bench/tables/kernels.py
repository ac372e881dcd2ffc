#!/usr/bin/env python3
"""Kernels tables (docs/benchmarks.md, "Kernels"), from apply_mask_bench's JSON:

  build/bin/apply_mask_bench --benchmark_min_time=0.3 --benchmark_repetitions=5 \\
      --benchmark_report_aggregates_only=true --benchmark_format=json > K.json
  python3 bench/tables/kernels.py K.json

Batch 64 x 128,256: each apply against the memcpy of the same dtype (same run);
small batches: wall and CPU time per call. "G/s" is Google Benchmark's: 2^30 bytes.
"""
from __future__ import annotations

import argparse
import sys

from common import Run, load_gbench, num, table

DTYPES = {"0": "fp32", "1": "fp16", "2": "bf16"}
MB = {"fp32": 32.8, "bf16": 16.4}  # 64 x 128,256 logits, decimal MB


def gib_per_s(r: Run) -> float:
    return r.counters.get("bytes_per_second", 0.0) / 2**30


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="apply_mask_bench --benchmark_format=json output ('-': stdin)")
    args = ap.parse_args()
    runs, context = load_gbench(args.json)
    memcpy: dict[str, Run] = {}
    rows = []
    small = []
    for r in runs.values():
        p = r.parts()
        if p[0] == "BM_Memcpy":
            memcpy[DTYPES[p[1]]] = r
    for dtype, r in memcpy.items():
        rows.append([f"memcpy {dtype} ({MB.get(dtype, 0):.1f} MB)", "1", num(r.real_ns / 1e3, 0) + " µs",
                     num(gib_per_s(r)), "100%"])
    for r in runs.values():
        p = r.parts()
        if p[0] == "BM_Apply":
            dtype, masks, threads = DTYPES[p[1]], "realistic" if p[2] == "1" else "random50", p[3]
            base = memcpy.get(dtype)
            ratio = "%.0f%%" % (100 * gib_per_s(r) / gib_per_s(base)) if base else "—"
            rows.append([f"apply {dtype} {masks}", threads, num(r.real_ns / 1e3, 0) + " µs",
                         num(gib_per_s(r)), ratio])
        elif p[0] == "BM_ApplySmall":
            small.append((int(p[1]), r))
    if not rows:
        sys.exit("kernels.py: no BM_Memcpy/BM_Apply runs in the input")
    out = [f"SIMD target (Highway dispatch): **{context.get('simd_target', '?')}**.", ""]
    out.append(table(["benchmark", "threads", "time", "G/s", "vs memcpy"],
                     [False, True, True, True, True], rows))
    if small:
        small.sort()
        threads = small[0][1].label.rsplit("threads=", 1)[-1]
        out.append(f"Small batches (`BM_ApplySmall`, bf16, random masks, default `CpuApplier`: {threads} "
                   "threads here, batches under 4 MiB on the caller; cache-warm rows), medians:")
        out.append("")
        out.append(table(["rows"] + [str(n) for n, _ in small], [False] + [True] * len(small),
                         [["wall time"] + [num(r.real_ns / 1e3, 1) + " µs" for _, r in small],
                          ["CPU time"] + [num(r.cpu_ns / 1e3, 1) + " µs" for _, r in small]]))
    sys.stdout.write("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
