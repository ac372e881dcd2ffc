#include "automaton/utf8.h"

#include "automaton/codepoint_set.h"

namespace maskd {

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

void AppendUtf8(std::string* out, uint32_t cp) {
  uint8_t bytes[4];
  const int len = EncodeUtf8(cp, bytes);
  out->append(reinterpret_cast<const char*>(bytes), len);
}

std::optional<uint32_t> DecodeUtf8(std::string_view s, size_t* pos) {
  const auto lead = static_cast<unsigned char>(s[*pos]);
  const int len = lead < 0x80 ? 1
                  : (lead >> 5) == 0x6 ? 2
                  : (lead >> 4) == 0xE ? 3
                  : (lead >> 3) == 0x1E ? 4
                                        : 0;
  if (len == 0 || s.size() - *pos < static_cast<size_t>(len)) return std::nullopt;
  uint32_t cp = len == 1 ? lead : lead & (0x7F >> len);
  for (int k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(s[*pos + k]);
    if ((c >> 6) != 0x2) return std::nullopt;
    cp = cp << 6 | (c & 0x3F);
  }
  // The smallest codepoint each length may encode: shorter is overlong.
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > kMaxCodepoint || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return std::nullopt;
  }
  *pos += len;
  return cp;
}

}  // namespace maskd
