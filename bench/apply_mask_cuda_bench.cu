// GPU apply benchmark: batch 256 x 128256 logits, bf16 and fp32, random ~50%
// and realistic masks, against a device-to-device cudaMemcpy of the same
// logits bytes in the same run. Times are GPU times (cudaEvent, manual time);
// bytes_per_second counts logits bytes (rows * vocab * element size) for all.
//
//   build-gpu/bin/apply_mask_cuda_bench
// Reports an error per benchmark (and exits 0) when no GPU is visible.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <random>
#include <vector>

#include "kernels/apply_mask_cuda.h"

namespace maskd {
namespace {

constexpr int64_t kRows = 256;
constexpr int64_t kVocab = 128256;
constexpr int64_t kWords = (kVocab + 31) / 32;

bool HaveGpu(benchmark::State& state) {
  if (CudaDeviceCount() > 0) return true;
  state.SkipWithError("no CUDA GPU visible");
  return false;
}

// Times `launch` with CUDA events, `reps` launches per iteration.
template <typename F>
void TimeLoop(benchmark::State& state, cudaStream_t s, F launch) {
  constexpr int kReps = 10;
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  launch();  // warm up
  cudaStreamSynchronize(s);
  for (auto _ : state) {
    cudaEventRecord(a, s);
    for (int i = 0; i < kReps; ++i) launch();
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    state.SetIterationTime(ms / 1e3 / kReps);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}

void BM_CudaMemcpyD2D(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  const auto dtype = static_cast<LogitsDtype>(state.range(0));
  const size_t bytes = kRows * kVocab * LogitsDtypeSize(dtype);
  void *src = nullptr, *dst = nullptr;
  cudaMalloc(&src, bytes);
  cudaMalloc(&dst, bytes);
  cudaMemset(src, 0x3c, bytes);
  cudaStream_t s;
  cudaStreamCreate(&s);
  TimeLoop(state, s, [&] { cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s); });
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
  state.SetLabel(LogitsDtypeName(dtype));
  cudaStreamDestroy(s);
  cudaFree(src);
  cudaFree(dst);
}

void BM_CudaApply(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  const auto dtype = static_cast<LogitsDtype>(state.range(0));
  const bool realistic = state.range(1) != 0;
  const size_t bytes = kRows * kVocab * LogitsDtypeSize(dtype);
  std::mt19937_64 rng(42);
  std::vector<uint32_t> words(kRows * kWords);
  for (auto& x : words) {
    if (!realistic) {
      x = static_cast<uint32_t>(rng());
    } else {
      const uint64_t r = rng() % 100;
      x = r < 90 ? 0u : r < 95 ? 0xFFFFFFFFu : static_cast<uint32_t>(rng());
    }
  }
  void* logits = nullptr;
  uint32_t* d_words = nullptr;
  cudaMalloc(&logits, bytes);
  cudaMalloc(&d_words, words.size() * 4);
  cudaMemset(logits, 0x3c, bytes);
  cudaMemcpy(d_words, words.data(), words.size() * 4, cudaMemcpyHostToDevice);
  cudaStream_t s;
  cudaStreamCreate(&s);
  const LogitsBatch lb{logits, dtype, kRows, kVocab, 0};
  const MaskBatch mb{d_words, kRows, kWords, kVocab};
  absl::Status st = ApplyTokenBitmaskInplaceCuda(lb, mb, nullptr, s);
  if (!st.ok()) {
    state.SkipWithError(std::string(st.message()).c_str());
  } else {
    TimeLoop(state, s, [&] { (void)ApplyTokenBitmaskInplaceCuda(lb, mb, nullptr, s); });
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
  }
  state.SetLabel(std::string(LogitsDtypeName(dtype)) + (realistic ? " realistic" : " random50"));
  cudaStreamDestroy(s);
  cudaFree(logits);
  cudaFree(d_words);
}

BENCHMARK(BM_CudaMemcpyD2D)->Arg(0)->Arg(2)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaApply)
    ->ArgsProduct({{0, 2}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace maskd

BENCHMARK_MAIN();
