// UTF-8 for codepoints: encoding one, decoding one with validation. The
// byte-range encoding that automata need lives in internal/utf8_ranges.h.
#ifndef MASKD_AUTOMATON_UTF8_H_
#define MASKD_AUTOMATON_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace maskd {

// Appends the UTF-8 encoding of `cp` (at most kMaxCodepoint; a surrogate is
// encoded as its three bytes) to `*out`: one to four bytes.
void AppendUtf8(std::string* out, uint32_t cp);

// Decodes the well-formed UTF-8 sequence at s[*pos] (*pos < s.size()):
// returns its codepoint and moves *pos past it. Returns nullopt, *pos
// unchanged, when the bytes there are not one: a stray continuation or
// invalid lead byte, a truncated or overlong sequence, a surrogate or a
// value above kMaxCodepoint.
std::optional<uint32_t> DecodeUtf8(std::string_view s, size_t* pos);

}  // namespace maskd

#endif  // MASKD_AUTOMATON_UTF8_H_
