#include "kernels/apply_mask.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "hwy/targets.h"
#include "kernels/apply_mask_internal.h"
#include "tests/kernels/apply_mask_reference.h"

namespace maskd {
namespace {

using testing::GetBits;
using testing::MakeMask;
using testing::MaskKind;
using testing::NegInfBits;
using testing::RandomLogits;
using testing::ReferenceApply;

constexpr LogitsDtype kDtypes[] = {LogitsDtype::kFloat32, LogitsDtype::kFloat16,
                                   LogitsDtype::kBFloat16};

struct Case {
  LogitsDtype dtype;
  int64_t rows;
  int64_t vocab;
  int64_t stride_pad;   // row_stride = vocab + pad (0 pad and stride 0 alike)
  int64_t mask_vocab;   // 0 = words_per_row * 32
  int64_t words_per_row;
  bool use_map;
  MaskKind kind;
};

std::string Describe(const Case& c) {
  return std::string(LogitsDtypeName(c.dtype)) + " rows=" + std::to_string(c.rows) +
         " vocab=" + std::to_string(c.vocab) + " pad=" + std::to_string(c.stride_pad) +
         " mask_vocab=" + std::to_string(c.mask_vocab) +
         " wpr=" + std::to_string(c.words_per_row) + " map=" + std::to_string(c.use_map) +
         " kind=" + std::to_string(static_cast<int>(c.kind));
}

enum class Path { kFree, kApplier1, kApplierPool };

void RunCase(const Case& c, Path path, uint64_t seed) {
  SCOPED_TRACE(Describe(c));
  std::mt19937_64 rng(seed);
  const size_t elem = LogitsDtypeSize(c.dtype);
  const int64_t stride = c.vocab + c.stride_pad;
  const int64_t mask_rows = c.use_map ? c.rows / 2 + 1 : c.rows;
  std::vector<uint8_t> got = RandomLogits(rng, c.dtype, c.rows * stride);
  std::vector<uint8_t> want = got;
  std::vector<uint32_t> words = MakeMask(rng, c.kind, mask_rows, c.words_per_row);
  std::vector<int32_t> map;
  if (c.use_map) {
    for (int64_t r = 0; r < c.rows; ++r) {
      map.push_back(r % 3 == 1 ? -1 : static_cast<int32_t>(rng() % mask_rows));
    }
  }
  ReferenceApply(want, c.dtype, c.rows, c.vocab, stride, words, c.words_per_row,
                 c.mask_vocab, map);
  LogitsBatch lb{got.data(), c.dtype, c.rows, c.vocab, c.stride_pad == 0 ? 0 : stride};
  MaskBatch mb{words.data(), mask_rows, c.words_per_row, c.mask_vocab};
  switch (path) {
    case Path::kFree:
      ASSERT_TRUE(ApplyTokenBitmaskInplace(lb, mb, map).ok());
      break;
    case Path::kApplier1: {
      CpuApplier a(CpuApplier::Options{.num_threads = 1});
      ASSERT_TRUE(a.Apply(lb, mb, map).ok());
      break;
    }
    case Path::kApplierPool: {
      // Tiny tiles and no size threshold: exercise the tiling hard.
      CpuApplier a(CpuApplier::Options{
          .num_threads = 4, .min_parallel_bytes = 0, .task_bytes = 4096});
      ASSERT_TRUE(a.Apply(lb, mb, map).ok());
      break;
    }
  }
  if (got == want) return;
  for (int64_t e = 0; e < c.rows * stride; ++e) {
    ASSERT_EQ(GetBits(got, elem, e), GetBits(want, elem, e))
        << "first difference at row " << e / stride << " token " << e % stride;
  }
}

class WidthTest : public ::testing::TestWithParam<std::tuple<LogitsDtype, int64_t>> {};

TEST_P(WidthTest, MatchesReferenceAllPaths) {
  const auto [dtype, vocab] = GetParam();
  const int64_t wpr = (vocab + 31) / 32;
  uint64_t seed = 1;
  for (MaskKind kind : {MaskKind::kRandom, MaskKind::kRealistic,
                        MaskKind::kAllAllowed, MaskKind::kAllForbidden}) {
    for (Path path : {Path::kFree, Path::kApplier1, Path::kApplierPool}) {
      // Mask exactly as wide as the vocabulary (explicit mask_vocab).
      RunCase({dtype, 5, vocab, 0, vocab, wpr, false, kind}, path, seed++);
      // Padded stride and a row map with untouched rows.
      RunCase({dtype, 6, vocab, 40, vocab, wpr, true, kind}, path, seed++);
      // Mask narrower than the logits (Qwen-like): padding ids become -inf.
      RunCase({dtype, 3, vocab, 3, vocab - 267, wpr, false, kind}, path, seed++);
      // mask_vocab = 0: words_per_row * 32 tokens (may exceed vocab).
      RunCase({dtype, 2, vocab, 0, 0, wpr, true, kind}, path, seed++);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Widths, WidthTest,
    ::testing::Combine(::testing::ValuesIn(kDtypes),
                       ::testing::Values(128000, 128001, 128256, 151936, 262145)),
    [](const auto& info) {
      return std::string(LogitsDtypeName(std::get<0>(info.param))) + "_" +
             std::to_string(std::get<1>(info.param));
    });

TEST(ApplyMask, SmallShapesAndOddStrides) {
  uint64_t seed = 100;
  for (LogitsDtype d : kDtypes) {
    for (int64_t vocab : {1, 7, 31, 32, 33, 63, 64, 65, 100, 1000, 4099}) {
      const int64_t wpr = (vocab + 31) / 32;
      for (int64_t pad : {0, 1, 3, 17}) {
        for (int64_t mv : {vocab, vocab > 5 ? vocab - 5 : vocab}) {
          for (Path path : {Path::kFree, Path::kApplierPool}) {
            RunCase({d, 4, vocab, pad, mv, wpr + 1, pad % 2 == 1, MaskKind::kRandom},
                    path, seed++);
          }
        }
      }
    }
  }
}

// Every instruction set compiled into the library and supported by this CPU
// (e.g. AVX2, SSE4, SSSE3, EMU128), not just the one dispatch picks.
TEST(ApplyMask, EveryCompiledSimdTarget) {
  uint64_t seed = 500;
  int tested = 0;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    EXPECT_STREQ(internal::ApplySimdTargetName(), hwy::TargetName(target));
    for (LogitsDtype d : kDtypes) {
      for (MaskKind k : {MaskKind::kRandom, MaskKind::kRealistic}) {
        RunCase({d, 3, 128001, 5, 128001 - 100, 4001, true, k}, Path::kFree, seed++);
        RunCase({d, 3, 1000, 0, 0, 32, false, k}, Path::kApplierPool, seed++);
      }
    }
    ++tested;
  }
  hwy::SetSupportedTargetsForTest(0);  // back to the CPU's own targets
  EXPECT_GE(tested, 1);
  std::printf("SIMD targets tested: %d, dispatch now picks %s\n", tested,
              internal::ApplySimdTargetName());
}

TEST(ApplyMask, NanAndInfPreservedWhenAllowed) {
  for (LogitsDtype d : kDtypes) {
    const size_t elem = LogitsDtypeSize(d);
    std::mt19937_64 rng(7);
    std::vector<uint8_t> buf = RandomLogits(rng, d, 96);
    const std::vector<uint8_t> orig = buf;
    std::vector<uint32_t> words = {0xFFFFFFFFu, 0xAAAAAAAAu, 0u};
    ASSERT_TRUE(ApplyTokenBitmaskInplace({buf.data(), d, 1, 96, 0}, {words.data(), 1, 3, 0}).ok());
    for (int t = 0; t < 96; ++t) {
      const bool allowed = t < 32 || (t < 64 && (t % 2 == 1));
      EXPECT_EQ(GetBits(buf, elem, t), allowed ? GetBits(orig, elem, t) : NegInfBits(d))
          << LogitsDtypeName(d) << " token " << t;
    }
  }
}

TEST(ApplyMask, Float32ValuesAreMinusInfinity) {
  std::vector<float> logits(64, 1.5f);
  std::vector<uint32_t> words = {0x1u, 0x0u};
  ASSERT_TRUE(ApplyTokenBitmaskInplace({logits.data(), LogitsDtype::kFloat32, 1, 64, 0},
                                       {words.data(), 1, 2, 0})
                  .ok());
  EXPECT_EQ(logits[0], 1.5f);
  for (int t = 1; t < 64; ++t) EXPECT_EQ(logits[t], -std::numeric_limits<float>::infinity());
}

TEST(ApplyMask, InvalidArguments) {
  std::vector<float> logits(100);
  std::vector<uint32_t> words(8);
  const LogitsBatch ok_l{logits.data(), LogitsDtype::kFloat32, 1, 100, 0};
  const MaskBatch ok_m{words.data(), 2, 4, 100};
  auto expect_invalid = [&](const LogitsBatch& l, const MaskBatch& m,
                            std::vector<int32_t> map, const std::string& needle) {
    absl::Status s = ApplyTokenBitmaskInplace(l, m, map);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << needle;
    EXPECT_NE(std::string(s.message()).find(needle), std::string::npos) << s;
    CpuApplier a;
    EXPECT_EQ(a.Apply(l, m, map).code(), absl::StatusCode::kInvalidArgument);
  };
  LogitsBatch l = ok_l;
  l.dtype = static_cast<LogitsDtype>(9);
  expect_invalid(l, ok_m, {}, "dtype");
  l = ok_l;
  l.vocab = 0;
  expect_invalid(l, ok_m, {}, "vocab");
  l = ok_l;
  l.row_stride = 50;
  expect_invalid(l, ok_m, {}, "row_stride");
  l = ok_l;
  l.data = nullptr;
  expect_invalid(l, ok_m, {}, "logits data");
  l = ok_l;
  l.num_rows = -1;
  expect_invalid(l, ok_m, {}, "num_rows");
  MaskBatch m = ok_m;
  m.words_per_row = 0;
  expect_invalid(ok_l, m, {}, "words_per_row");
  m = ok_m;
  m.mask_vocab = 129;
  expect_invalid(ok_l, m, {}, "mask_vocab");
  m = ok_m;
  m.words = nullptr;
  expect_invalid(ok_l, m, {}, "mask words");
  m = ok_m;
  m.num_rows = 0;
  expect_invalid(ok_l, m, {}, "fewer than");
  expect_invalid(ok_l, ok_m, {0, 1}, "row map has 2 entries");
  expect_invalid(ok_l, ok_m, {2}, "row map entry 0 is 2");
  expect_invalid(ok_l, ok_m, {-2}, "row map entry 0 is -2");
  // Nothing was touched by the failed calls.
  for (float f : logits) EXPECT_EQ(f, 0.0f);
  EXPECT_TRUE(ApplyTokenBitmaskInplace(ok_l, ok_m).ok());
  EXPECT_EQ(logits[0], -std::numeric_limits<float>::infinity());
}

TEST(ApplyMask, EmptyBatchIsOk) {
  std::vector<uint32_t> words(4);
  EXPECT_TRUE(ApplyTokenBitmaskInplace({nullptr, LogitsDtype::kBFloat16, 0, 10, 0},
                                       {nullptr, 0, 1, 0})
                  .ok());
}

TEST(CpuApplier, ReusedAcrossManyCallsAndSizes) {
  CpuApplier a(CpuApplier::Options{.num_threads = 3, .min_parallel_bytes = 0,
                                   .task_bytes = 8192});
  EXPECT_EQ(a.num_threads(), 3);
  std::mt19937_64 rng(3);
  for (int iter = 0; iter < 200; ++iter) {
    const LogitsDtype d = kDtypes[iter % 3];
    const int64_t vocab = 1 + static_cast<int64_t>(rng() % 20000);
    const int64_t rows = 1 + static_cast<int64_t>(rng() % 5);
    const int64_t wpr = (vocab + 31) / 32;
    std::vector<uint8_t> got = RandomLogits(rng, d, rows * vocab);
    std::vector<uint8_t> want = got;
    std::vector<uint32_t> words = MakeMask(rng, MaskKind::kRealistic, rows, wpr);
    ReferenceApply(want, d, rows, vocab, 0, words, wpr, vocab, {});
    ASSERT_TRUE(a.Apply({got.data(), d, rows, vocab, 0}, {words.data(), rows, wpr, vocab}).ok());
    ASSERT_EQ(got, want) << "iteration " << iter;
  }
}

}  // namespace
}  // namespace maskd
