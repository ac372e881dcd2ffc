// Counting the tokens a mask row allows.
//
// A row is the wire layout of docs/api.md: little-endian uint32 words, bit
// t & 31 of word t >> 5 set when token t is allowed. CountMaskBits uses the
// POPCNT instruction where the CPU has it (checked once): the build targets
// plain x86-64, where __builtin_popcount is a library call per word.
#ifndef MASKD_TOKENIZER_MASK_BITS_H_
#define MASKD_TOKENIZER_MASK_BITS_H_

#include <cstddef>
#include <cstdint>

namespace maskd {

// Bits set in words[0, num_words).
size_t CountMaskBits(const uint32_t* words, size_t num_words);

}  // namespace maskd

#endif  // MASKD_TOKENIZER_MASK_BITS_H_
