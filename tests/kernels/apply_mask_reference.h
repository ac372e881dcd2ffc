// Scalar reference of the apply semantics (kernels/apply_mask.h) and test
// data helpers, shared by the CPU and GPU kernel tests.
#ifndef MASKD_TESTS_KERNELS_APPLY_MASK_REFERENCE_H_
#define MASKD_TESTS_KERNELS_APPLY_MASK_REFERENCE_H_

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/apply_mask.h"

namespace maskd::testing {

inline uint32_t NegInfBits(LogitsDtype d) {
  switch (d) {
    case LogitsDtype::kFloat32:
      return 0xFF800000u;
    case LogitsDtype::kFloat16:
      return 0xFC00u;
    case LogitsDtype::kBFloat16:
      return 0xFF80u;
  }
  return 0;
}

// Element e of a raw buffer as its bit pattern.
inline uint32_t GetBits(const std::vector<uint8_t>& buf, size_t elem, int64_t e) {
  uint32_t v = 0;
  std::memcpy(&v, buf.data() + e * elem, elem);
  return v;
}
inline void SetBits(std::vector<uint8_t>& buf, size_t elem, int64_t e, uint32_t v) {
  std::memcpy(buf.data() + e * elem, &v, elem);
}

// Reference: one element at a time, straight from the spec.
inline void ReferenceApply(std::vector<uint8_t>& buf, LogitsDtype dtype,
                           int64_t rows, int64_t vocab, int64_t stride,
                           const std::vector<uint32_t>& words,
                           int64_t words_per_row, int64_t mask_vocab,
                           const std::vector<int32_t>& row_map) {
  const size_t elem = LogitsDtypeSize(dtype);
  if (stride == 0) stride = vocab;
  if (mask_vocab == 0) mask_vocab = words_per_row * 32;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t m = row_map.empty() ? r : row_map[r];
    if (m < 0) continue;
    for (int64_t t = 0; t < vocab; ++t) {
      bool allowed = false;
      if (t < mask_vocab) {
        allowed = (words[m * words_per_row + t / 32] >> (t % 32)) & 1u;
      }
      if (!allowed) SetBits(buf, elem, r * stride + t, NegInfBits(dtype));
    }
  }
}

// Random logits bits, with a sprinkling of NaN and +/-inf.
inline std::vector<uint8_t> RandomLogits(std::mt19937_64& rng, LogitsDtype dtype,
                                         int64_t elements) {
  const size_t elem = LogitsDtypeSize(dtype);
  std::vector<uint8_t> buf(elements * elem);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  const uint32_t nan = dtype == LogitsDtype::kFloat32   ? 0x7FC00001u
                       : dtype == LogitsDtype::kFloat16 ? 0x7E01u
                                                        : 0x7FC1u;
  const uint32_t pinf = dtype == LogitsDtype::kFloat32   ? 0x7F800000u
                        : dtype == LogitsDtype::kFloat16 ? 0x7C00u
                                                         : 0x7F80u;
  for (int64_t e = 0; e < elements; e += 97) SetBits(buf, elem, e, nan);
  for (int64_t e = 13; e < elements; e += 101) SetBits(buf, elem, e, pinf);
  return buf;
}

enum class MaskKind { kRandom, kAllAllowed, kAllForbidden, kRealistic };

// kRealistic: mostly zero words, a few all-ones runs and a few mixed words.
inline std::vector<uint32_t> MakeMask(std::mt19937_64& rng, MaskKind kind,
                                      int64_t rows, int64_t words_per_row) {
  std::vector<uint32_t> w(rows * words_per_row);
  for (auto& x : w) {
    switch (kind) {
      case MaskKind::kRandom:
        x = static_cast<uint32_t>(rng());
        break;
      case MaskKind::kAllAllowed:
        x = 0xFFFFFFFFu;
        break;
      case MaskKind::kAllForbidden:
        x = 0;
        break;
      case MaskKind::kRealistic: {
        const uint64_t r = rng() % 100;
        x = r < 90 ? 0u : r < 95 ? 0xFFFFFFFFu : static_cast<uint32_t>(rng());
        break;
      }
    }
  }
  return w;
}

}  // namespace maskd::testing

#endif  // MASKD_TESTS_KERNELS_APPLY_MASK_REFERENCE_H_
