// UTF-8 encoding of codepoint ranges as byte-range sequences, for automata
// over bytes (one codepoint's encoding is EncodeUtf8 in automaton/utf8.h).
// Internal to maskd_automaton.
#ifndef MASKD_AUTOMATON_INTERNAL_UTF8_RANGES_H_
#define MASKD_AUTOMATON_INTERNAL_UTF8_RANGES_H_

#include <cstdint>
#include <vector>

namespace maskd::automaton_internal {

// The byte strings lo[0..len) to hi[0..len) taken bytewise: every string s of
// `len` bytes with lo[i] <= s[i] <= hi[i] for each i.
struct ByteSeq {
  int len;
  uint8_t lo[4], hi[4];
};

// Appends to `*out` byte sequences whose union is exactly the UTF-8
// encodings of the codepoints in [lo, hi] (lo <= hi <= kMaxCodepoint, no
// surrogate inside): the range is split on encoding-length boundaries and
// then until every continuation byte spans a whole or a product range.
void Utf8Sequences(uint32_t lo, uint32_t hi, std::vector<ByteSeq>* out);

}  // namespace maskd::automaton_internal

#endif  // MASKD_AUTOMATON_INTERNAL_UTF8_RANGES_H_
