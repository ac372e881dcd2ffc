#!/usr/bin/env bash
# GPU checks for maskd's kernels and CUDA shared-memory regions, in one go:
#   1. configure + build with CUDA for sm_90 in build-gpu (Release),
#   2. run every ctest labelled "gpu",
#   3. run the GPU apply benchmark (256 x 128256, bf16 and fp32, against a
#      device-to-device cudaMemcpy of the same bytes in the same run),
#   4. print a summary.
# Usage: tests/gpu/run.sh [build dir]   (env: JOBS, CUDA_ARCH, OUT)
# Exit status: non-zero when the build or a gpu test fails. On a machine
# without a GPU the tests skip (with a message) and the benchmark reports
# "no CUDA GPU visible".
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build-gpu}"
JOBS="${JOBS:-$(nproc)}"
ARCH="${CUDA_ARCH:-90}"
OUT="${OUT:-$BUILD}"
mkdir -p "$OUT"
TARGETS=(apply_mask_cuda_test cuda_ipc_test cuda_ipc_child apply_mask_cuda_bench maskd shm_service_gpu_test)

echo "== GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo 'nvidia-smi not available')"
echo "== configure $BUILD (sm_$ARCH)"
if ! cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
     -DMASKD_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" >"$OUT/configure.log" 2>&1; then
  tail -40 "$OUT/configure.log"; echo "SUMMARY: configure FAILED"; exit 1
fi
grep -q "CUDA targets enabled" "$OUT/configure.log" || { echo "SUMMARY: CUDA not enabled (no nvcc?)"; exit 1; }
echo "== build ${TARGETS[*]}"
if ! cmake --build "$BUILD" -j"$JOBS" --target "${TARGETS[@]}" >"$OUT/build.log" 2>&1; then
  grep -E "error|FAILED" "$OUT/build.log" | head -40; echo "SUMMARY: build FAILED"; exit 1
fi

echo "== ctest -L gpu"
(cd "$BUILD" && ctest -L gpu --output-on-failure --timeout 600) 2>&1 | tee "$OUT/ctest.log"
TEST_RC=${PIPESTATUS[0]}
SKIPS=$(grep -c "SKIPPED \]" "$OUT/ctest.log" || true)

echo "== benchmark"
"$BUILD/bin/apply_mask_cuda_bench" --benchmark_min_time=0.2 \
  --benchmark_out="$OUT/apply_mask_cuda_bench.json" --benchmark_out_format=json 2>&1 | tee "$OUT/bench.log"
BENCH_RC=${PIPESTATUS[0]}

echo
echo "================ SUMMARY ================"
grep -E "tests passed|tests failed" "$OUT/ctest.log" | tail -1
grep -q "Skipped" "$OUT/ctest.log" && echo "NOTE: GPU tests SKIPPED (no GPU visible): nothing was checked on a device"
if command -v python3 >/dev/null && [ -s "$OUT/apply_mask_cuda_bench.json" ]; then
  python3 - "$OUT/apply_mask_cuda_bench.json" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
copy = {}
for r in runs:
    if r.get("error_occurred"):
        print(f"{r['name']}: {r.get('error_message')}"); continue
    gbs = r["bytes_per_second"] / 1e9
    label = r.get("label", "")
    dtype = label.split()[0] if label else "?"
    if r["name"].startswith("BM_CudaMemcpyD2D"):
        copy[dtype] = gbs
    us = r["real_time"] if r.get("time_unit") == "us" else r["real_time"]
    print(f"{r['name']:34s} {label:16s} {us:9.1f} {r.get('time_unit','')}  {gbs:8.1f} GB/s"
          + (f"  = {100*gbs/copy[dtype]:5.1f}% of D2D memcpy" if dtype in copy and not r['name'].startswith('BM_CudaMemcpy') else ""))
PY
else
  grep -E "^BM_" "$OUT/bench.log"
fi
echo "ctest rc=$TEST_RC bench rc=$BENCH_RC"
[ "$TEST_RC" -eq 0 ] && [ "$BENCH_RC" -eq 0 ]
