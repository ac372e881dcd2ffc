#include "tokenizer/mask_bits.h"

namespace maskd {
namespace {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("popcnt"))) size_t CountPopcnt(const uint32_t* words, size_t n) {
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) count += static_cast<size_t>(__builtin_popcount(words[i]));
  return count;
}
#endif

size_t CountPortable(const uint32_t* words, size_t n) {
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t v = words[i];  // SWAR: bits per 2, 4, 8 bits, then summed bytes
    v = v - ((v >> 1) & 0x55555555u);
    v = (v & 0x33333333u) + ((v >> 2) & 0x33333333u);
    v = (v + (v >> 4)) & 0x0F0F0F0Fu;
    count += (v * 0x01010101u) >> 24;
  }
  return count;
}

}  // namespace

size_t CountMaskBits(const uint32_t* words, size_t num_words) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool has_popcnt = __builtin_cpu_supports("popcnt");
  if (has_popcnt) return CountPopcnt(words, num_words);
#endif
  return CountPortable(words, num_words);
}

}  // namespace maskd
