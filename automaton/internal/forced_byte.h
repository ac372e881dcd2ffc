// Forced bytes (Dfa::ForcedByte) from a state's row, for the eager build
// and the lazy DFA alike. Internal to maskd_automaton.
#ifndef MASKD_AUTOMATON_INTERNAL_FORCED_BYTE_H_
#define MASKD_AUTOMATON_INTERNAL_FORCED_BYTE_H_

#include <cstdint>

#include "automaton/dfa.h"

namespace maskd::automaton_internal {

// Per byte class of a 256-entry class map: how many bytes it holds, and one
// of them (the highest).
struct ClassBytes {
  explicit ClassBytes(const uint8_t* byte_class) {
    for (int b = 0; b < 256; ++b) {
      ++count[byte_class[b]];
      some[byte_class[b]] = static_cast<uint8_t>(b);
    }
  }
  uint16_t count[256] = {};
  uint8_t some[256] = {};
};

// The byte a non-accepting state must read next: the only byte that leads
// to a live state from its `row` (one successor per class), or -1 when none
// or more than one does.
inline int16_t ForcedByteOfRow(const uint32_t* row, uint32_t num_classes,
                               const ClassBytes& classes) {
  uint32_t live_bytes = 0;
  int16_t forced = -1;
  for (uint32_t c = 0; c < num_classes && live_bytes < 2; ++c) {
    if (row[c] == Dfa::kDead) continue;
    live_bytes += classes.count[c];
    forced = classes.some[c];
  }
  return live_bytes == 1 ? forced : -1;
}

}  // namespace maskd::automaton_internal

#endif  // MASKD_AUTOMATON_INTERNAL_FORCED_BYTE_H_
