// Vectorised inner loops of the CPU apply, written once with Google Highway
// and compiled for every x86 target Highway knows (SSE4, AVX2, AVX-512, ...);
// the best one for the running CPU is picked on first call (dynamic dispatch).
//
// Logits are handled as raw 16- or 32-bit lanes (never converted to float),
// so allowed values keep their exact bits, NaN payloads included.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/apply_mask_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <cstddef>
#include <cstdint>

#include "kernels/apply_mask_internal.h"

#ifndef MASKD_KERNELS_APPLY_MASK_SIMD_ONCE_
#define MASKD_KERNELS_APPLY_MASK_SIMD_ONCE_
namespace maskd::internal {
// Lane i of chunk c tests bit kBit16[c + i] of one 16-bit half of the word.
alignas(64) inline constexpr uint16_t kBit16[32] = {
    1u << 0,  1u << 1,  1u << 2,  1u << 3,  1u << 4,  1u << 5,  1u << 6,
    1u << 7,  1u << 8,  1u << 9,  1u << 10, 1u << 11, 1u << 12, 1u << 13,
    1u << 14, 1u << 15, 1u << 0,  1u << 1,  1u << 2,  1u << 3,  1u << 4,
    1u << 5,  1u << 6,  1u << 7,  1u << 8,  1u << 9,  1u << 10, 1u << 11,
    1u << 12, 1u << 13, 1u << 14, 1u << 15};
alignas(64) inline constexpr uint32_t kBit32[32] = {
    1u << 0,  1u << 1,  1u << 2,  1u << 3,  1u << 4,  1u << 5,  1u << 6,
    1u << 7,  1u << 8,  1u << 9,  1u << 10, 1u << 11, 1u << 12, 1u << 13,
    1u << 14, 1u << 15, 1u << 16, 1u << 17, 1u << 18, 1u << 19, 1u << 20,
    1u << 21, 1u << 22, 1u << 23, 1u << 24, 1u << 25, 1u << 26, 1u << 27,
    1u << 28, 1u << 29, 1u << 30, 1u << 31};
}  // namespace maskd::internal
#endif

HWY_BEFORE_NAMESPACE();
namespace maskd::internal {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// 16-bit lanes: at most 16 lanes per vector so that one vector's lanes test
// bits of one 16-bit half of the mask word.
void ApplyWords16Impl(uint16_t* HWY_RESTRICT row,
                      const uint32_t* HWY_RESTRICT words, size_t num_words,
                      uint16_t neg_inf) {
  const hn::CappedTag<uint16_t, 16> d;
  constexpr size_t N = hn::MaxLanes(d);
  static_assert(32 % N == 0, "lanes must divide 32");
  const auto vneg = hn::Set(d, neg_inf);
  for (size_t w = 0; w < num_words; ++w, row += 32) {
    const uint32_t word = words[w];
    if (word == 0xFFFFFFFFu) continue;  // all allowed: leave 32 logits alone
    if (word == 0) {
      for (size_t c = 0; c < 32; c += N) hn::StoreU(vneg, d, row + c);
      continue;
    }
    const auto lo = hn::Set(d, static_cast<uint16_t>(word));
    const auto hi = hn::Set(d, static_cast<uint16_t>(word >> 16));
    for (size_t c = 0; c < 32; c += N) {
      const auto bits = c < 16 ? lo : hi;
      const auto keep = hn::TestBit(bits, hn::Load(d, kBit16 + (c & 15)));
      const auto v = hn::LoadU(d, row + c);
      hn::StoreU(hn::IfThenElse(keep, v, vneg), d, row + c);
    }
  }
}

void ApplyWords32Impl(uint32_t* HWY_RESTRICT row,
                      const uint32_t* HWY_RESTRICT words, size_t num_words,
                      uint32_t neg_inf) {
  const hn::CappedTag<uint32_t, 32> d;
  constexpr size_t N = hn::MaxLanes(d);
  static_assert(32 % N == 0, "lanes must divide 32");
  const auto vneg = hn::Set(d, neg_inf);
  for (size_t w = 0; w < num_words; ++w, row += 32) {
    const uint32_t word = words[w];
    if (word == 0xFFFFFFFFu) continue;
    if (word == 0) {
      for (size_t c = 0; c < 32; c += N) hn::StoreU(vneg, d, row + c);
      continue;
    }
    const auto bits = hn::Set(d, word);
    for (size_t c = 0; c < 32; c += N) {
      const auto keep = hn::TestBit(bits, hn::Load(d, kBit32 + c));
      const auto v = hn::LoadU(d, row + c);
      hn::StoreU(hn::IfThenElse(keep, v, vneg), d, row + c);
    }
  }
}

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace maskd::internal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace maskd::internal {

HWY_EXPORT(ApplyWords16Impl);
HWY_EXPORT(ApplyWords32Impl);
HWY_EXPORT(TargetNameImpl);

void ApplyWords16(uint16_t* row, const uint32_t* words, size_t num_words,
                  uint16_t neg_inf) {
  HWY_DYNAMIC_DISPATCH(ApplyWords16Impl)(row, words, num_words, neg_inf);
}
void ApplyWords32(uint32_t* row, const uint32_t* words, size_t num_words,
                  uint32_t neg_inf) {
  HWY_DYNAMIC_DISPATCH(ApplyWords32Impl)(row, words, num_words, neg_inf);
}
const char* ApplySimdTargetName() {
  return HWY_DYNAMIC_DISPATCH(TargetNameImpl)();
}

}  // namespace maskd::internal
#endif  // HWY_ONCE
