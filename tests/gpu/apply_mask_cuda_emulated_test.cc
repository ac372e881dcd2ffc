// The CUDA kernel's per-thread code, run on the host (no GPU needed), against
// the scalar CPU reference: checks indexing, the vector/scalar choice, the
// vector straddling mask_vocab or vocab, padding ids and row maps.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/apply_mask_cuda_internal.h"
#include "tests/kernels/apply_mask_reference.h"

namespace maskd {
namespace {

using testing::GetBits;
using testing::MaskKind;

constexpr LogitsDtype kDtypes[] = {LogitsDtype::kFloat32, LogitsDtype::kFloat16,
                                   LogitsDtype::kBFloat16};

void RunCase(LogitsDtype dtype, int64_t rows, int64_t vocab, int64_t pad, int64_t base_offset,
             int64_t mask_vocab, bool use_map, MaskKind kind, uint64_t seed) {
  SCOPED_TRACE(std::string(LogitsDtypeName(dtype)) + " vocab=" + std::to_string(vocab) +
               " pad=" + std::to_string(pad) + " off=" + std::to_string(base_offset) +
               " mask_vocab=" + std::to_string(mask_vocab) + " map=" + std::to_string(use_map));
  std::mt19937_64 rng(seed);
  const size_t elem = LogitsDtypeSize(dtype);
  const int64_t stride = vocab + pad;
  const int64_t wpr = (vocab + 31) / 32;
  const int64_t mask_rows = use_map ? rows / 2 + 1 : rows;
  // 16-byte aligned storage so that base_offset alone decides alignment.
  const int64_t total = base_offset + rows * stride;
  std::vector<uint8_t> raw = testing::RandomLogits(rng, dtype, total + 16);
  std::vector<uint8_t> want(raw.begin(), raw.begin() + total * elem);
  std::vector<uint32_t> words = testing::MakeMask(rng, kind, mask_rows, wpr);
  std::vector<int32_t> map;
  if (use_map) {
    for (int64_t r = 0; r < rows; ++r) {
      map.push_back(r % 3 == 1 ? -1 : static_cast<int32_t>(rng() % mask_rows));
    }
  }
  {
    std::vector<uint8_t> body(want.begin() + base_offset * elem, want.end());
    testing::ReferenceApply(body, dtype, rows, vocab, stride, words, wpr, mask_vocab, map);
    std::copy(body.begin(), body.end(), want.begin() + base_offset * elem);
  }
  std::vector<uint8_t> got = std::vector<uint8_t>(raw.begin(), raw.begin() + total * elem);
  // std::vector<uint8_t> data is at least 16-byte aligned with glibc malloc.
  ASSERT_EQ(reinterpret_cast<uintptr_t>(got.data()) % 16, 0u);
  absl::Status s = internal::ApplyTokenBitmaskInplaceCudaEmulated(
      {got.data() + base_offset * elem, dtype, rows, vocab, stride},
      {words.data(), mask_rows, wpr, mask_vocab}, use_map ? map.data() : nullptr);
  ASSERT_TRUE(s.ok()) << s;
  if (got == want) return;
  for (int64_t e = 0; e < total; ++e) {
    ASSERT_EQ(GetBits(got, elem, e), GetBits(want, elem, e)) << "first difference at " << e;
  }
}

TEST(ApplyMaskCudaEmulated, WidthsDtypesPaths) {
  uint64_t seed = 1;
  for (LogitsDtype d : kDtypes) {
    for (int64_t vocab : {128000, 128001, 128256, 151936, 262145}) {
      for (MaskKind k : {MaskKind::kRandom, MaskKind::kRealistic, MaskKind::kAllAllowed,
                         MaskKind::kAllForbidden}) {
        RunCase(d, 2, vocab, 0, 0, vocab, false, k, seed++);          // vector when aligned
        RunCase(d, 3, vocab, 64, 0, vocab - 267, true, k, seed++);    // padding ids, map
        RunCase(d, 2, vocab, 3, 1, 0, true, k, seed++);               // misaligned: scalar
      }
    }
  }
}

TEST(ApplyMaskCudaEmulated, SmallShapes) {
  uint64_t seed = 1000;
  for (LogitsDtype d : kDtypes) {
    for (int64_t vocab : {1, 3, 4, 7, 8, 9, 31, 32, 33, 100, 4099}) {
      for (int64_t pad : {0, 1, 8}) {
        for (int64_t off : {0, 8}) {
          for (int64_t mv : {vocab, vocab > 5 ? vocab - 5 : vocab}) {
            RunCase(d, 3, vocab, pad, off, mv, pad == 1, MaskKind::kRandom, seed++);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace maskd
