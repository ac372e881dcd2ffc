#!/usr/bin/env python3
"""GPU kernels table (docs/benchmarks.md, "Kernels", GPU), from the JSON that
tests/gpu/run.sh writes on a GPU machine (OUT/apply_mask_cuda_bench.json):

  OUT=DIR tests/gpu/run.sh build-gpu
  python3 bench/tables/kernels_gpu.py DIR/apply_mask_cuda_bench.json

Batch 256 x 128,256; GPU times (CUDA events); each apply against the
device-to-device cudaMemcpyAsync of the same dtype in the same run. Exits 2
(printing nothing) when every benchmark reported an error (no GPU visible), so
that the caller keeps the table it has.
"""
from __future__ import annotations

import argparse
import sys

from common import Run, load_gbench, num, table

DTYPES = {"0": "fp32", "1": "fp16", "2": "bf16"}


def gb_per_s(r: Run) -> float:
    return r.counters.get("bytes_per_second", 0.0) / 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="apply_mask_cuda_bench JSON ('-': stdin)")
    args = ap.parse_args()
    runs, _ = load_gbench(args.json)
    measured = [r for r in runs.values() if r.error is None]
    if not measured:
        errors = sorted({r.error or "" for r in runs.values()})
        print("kernels_gpu.py: nothing measured (%s)" % "; ".join(errors), file=sys.stderr)
        return 2
    copy = {DTYPES[r.parts()[1]]: r for r in measured if r.parts()[0] == "BM_CudaMemcpyD2D"}
    rows = []
    for dtype, r in copy.items():
        rows.append([f"D2D memcpy {dtype}", num(r.real_ns / 1e3, 1) + " µs", num(gb_per_s(r), 0), "100%"])
    for r in measured:
        p = r.parts()
        if p[0] != "BM_CudaApply":
            continue
        dtype = DTYPES[p[1]]
        masks = "realistic" if p[2] == "1" else "random50"
        base = copy.get(dtype)
        ratio = "%.0f%%" % (100 * gb_per_s(r) / gb_per_s(base)) if base else "—"
        rows.append([f"apply {dtype} {masks}", num(r.real_ns / 1e3, 1) + " µs", num(gb_per_s(r), 0), ratio])
    sys.stdout.write(table(["benchmark (256 × 128,256)", "GPU time", "GB/s", "vs D2D memcpy"],
                           [False, True, True, True], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
