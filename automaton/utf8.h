// UTF-8 for codepoints: encoding one, decoding one with validation. maskd's
// one UTF-8 encoder is EncodeUtf8; the byte-range encoding that automata need
// lives in internal/utf8_ranges.h and stands on it.
#ifndef MASKD_AUTOMATON_UTF8_H_
#define MASKD_AUTOMATON_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace maskd {

// Writes the UTF-8 encoding of `cp` to `out`; returns its length in bytes
// (1 to 4). `cp` is at most kMaxCodepoint: callers reject larger values
// themselves (with their own messages); a surrogate is encoded as its three
// bytes.
int EncodeUtf8(uint32_t cp, uint8_t out[4]);

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
