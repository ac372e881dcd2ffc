// CPU apply benchmark: batch 64 x 128256 logits, fp32 and bf16, random ~50%
// masks and realistic masks (90% zero words, 5% all-ones, 5% mixed), on 1
// and 2 threads, against memcpy of the same logits bytes in the same run.
// BM_ApplySmall: 1, 4, 8 and 16 rows (per-call latency, pool threshold).
// bytes_per_second counts logits bytes (rows * vocab * element size) for
// every benchmark, memcpy included, so the figures compare directly.
//
//   build-kernels/bin/apply_mask_bench --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/apply_mask.h"
#include "kernels/apply_mask_internal.h"

namespace maskd {
namespace {

constexpr int64_t kRows = 64;
constexpr int64_t kVocab = 128256;
constexpr int64_t kWords = (kVocab + 31) / 32;

std::vector<uint32_t> Masks(bool realistic) {
  std::mt19937_64 rng(42);
  std::vector<uint32_t> w(kRows * kWords);
  for (auto& x : w) {
    if (!realistic) {
      x = static_cast<uint32_t>(rng());
    } else {
      const uint64_t r = rng() % 100;
      x = r < 90 ? 0u : r < 95 ? 0xFFFFFFFFu : static_cast<uint32_t>(rng());
    }
  }
  return w;
}

std::vector<uint8_t> Logits(size_t elem) {
  std::vector<uint8_t> b(kRows * kVocab * elem);
  std::mt19937 rng(1);
  for (size_t i = 0; i < b.size(); i += 4) {
    const uint32_t v = 0x3F000000u | (rng() & 0x7FFFFF);  // finite floats
    std::memcpy(&b[i], &v, std::min<size_t>(4, b.size() - i));
  }
  return b;
}

// args: dtype (0 fp32, 2 bf16)
void BM_Memcpy(benchmark::State& state) {
  const auto dtype = static_cast<LogitsDtype>(state.range(0));
  const size_t bytes = kRows * kVocab * LogitsDtypeSize(dtype);
  std::vector<uint8_t> src = Logits(LogitsDtypeSize(dtype)), dst(bytes, 1);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
  state.SetLabel(LogitsDtypeName(dtype));
}

// args: dtype, realistic (0/1), threads
void BM_Apply(benchmark::State& state) {
  const auto dtype = static_cast<LogitsDtype>(state.range(0));
  const bool realistic = state.range(1) != 0;
  const int threads = static_cast<int>(state.range(2));
  const size_t bytes = kRows * kVocab * LogitsDtypeSize(dtype);
  std::vector<uint8_t> logits = Logits(LogitsDtypeSize(dtype));
  const std::vector<uint32_t> masks = Masks(realistic);
  CpuApplier applier(CpuApplier::Options{.num_threads = threads});
  const LogitsBatch lb{logits.data(), dtype, kRows, kVocab, 0};
  const MaskBatch mb{masks.data(), kRows, kWords, kVocab};
  for (auto _ : state) {
    applier.ApplyUnchecked(lb, mb);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
  state.SetLabel(std::string(LogitsDtypeName(dtype)) +
                 (realistic ? " realistic" : " random50") + " threads=" +
                 std::to_string(threads));
}

// Small batches (args: rows), bf16 random masks, default CpuApplier (2
// threads here; batches under 4 MiB run on the caller): per-call latency.
void BM_ApplySmall(benchmark::State& state) {
  const int64_t rows = state.range(0);
  std::vector<uint8_t> logits = Logits(2);
  const std::vector<uint32_t> masks = Masks(false);
  CpuApplier applier;
  const LogitsBatch lb{logits.data(), LogitsDtype::kBFloat16, rows, kVocab, 0};
  const MaskBatch mb{masks.data(), rows, kWords, kVocab};
  for (auto _ : state) {
    applier.ApplyUnchecked(lb, mb);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * rows * kVocab * 2);
  state.SetLabel("bf16 random50 threads=" + std::to_string(applier.num_threads()));
}

BENCHMARK(BM_ApplySmall)->Arg(1)->Arg(4)->Arg(8)->Arg(16)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Memcpy)->Arg(0)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Apply)
    ->ArgsProduct({{0, 2}, {0, 1}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace maskd

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("simd_target", maskd::internal::ApplySimdTargetName());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
