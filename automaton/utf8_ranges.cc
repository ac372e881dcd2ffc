#include "automaton/internal/utf8_ranges.h"

namespace maskd::automaton_internal {

int EncodeUtf8(uint32_t cp, uint8_t out[4]) {
  if (cp < 0x80) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

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
