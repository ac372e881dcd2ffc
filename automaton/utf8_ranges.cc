#include "automaton/internal/utf8_ranges.h"

#include "automaton/utf8.h"

namespace maskd::automaton_internal {

void Utf8Sequences(uint32_t lo, uint32_t hi, std::vector<ByteSeq>* out) {
  static constexpr uint32_t kMaxOfLen[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  // Split on encoding-length boundaries.
  for (int n = 0; n < 3; ++n) {
    if (lo <= kMaxOfLen[n] && hi > kMaxOfLen[n]) {
      Utf8Sequences(lo, kMaxOfLen[n], out);
      Utf8Sequences(kMaxOfLen[n] + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out->push_back(ByteSeq{1, {static_cast<uint8_t>(lo)}, {static_cast<uint8_t>(hi)}});
    return;
  }
  // Split until every continuation byte spans a whole or a product range.
  for (int i = 1; i < 4; ++i) {
    uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        Utf8Sequences(lo, lo | m, out);
        Utf8Sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        Utf8Sequences(lo, (hi & ~m) - 1, out);
        Utf8Sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  ByteSeq s;
  uint8_t a[4], b[4];
  s.len = EncodeUtf8(lo, a);
  EncodeUtf8(hi, b);
  for (int i = 0; i < s.len; ++i) {
    s.lo[i] = a[i];
    s.hi[i] = b[i];
  }
  out->push_back(s);
}

}  // namespace maskd::automaton_internal
