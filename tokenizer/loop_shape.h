// LoopShape: the canonical shape of the loop around one live DFA state, what
// LoopMasks::Find keys its memo on (loop_masks.h says what a loop is and why
// its canonical table is equal for isomorphic loops). Internal to tokenizer/.
#ifndef MASKD_TOKENIZER_LOOP_SHAPE_H_
#define MASKD_TOKENIZER_LOOP_SHAPE_H_

#include <cstdint>
#include <vector>

#include "automaton/dfa.h"
#include "tokenizer/loop_masks.h"

namespace maskd {

struct LoopShape {
  LoopMasks::ByteSet x = {};       // exit bytes
  std::vector<uint8_t> byte_map;   // byte -> loop class (256 entries)
  std::vector<uint32_t> table;     // (rows + 1) x loop classes; row 0 dead
  std::vector<Dfa::State> canon;   // canonical state -> DFA state (s first)
};

// Finds the loop of live state `s` among the first LoopMasks::kMaxLoopStates
// live states breadth-first from it. With `cut_bytes` set, those bytes are
// exits by fiat and the search does not follow them: it then finds the tight
// loop (a string's content, not the array of strings around it). Returns
// false when s leads into no cycle among the states searched, or fewer than
// LoopMasks::kMinStayBytes bytes keep s in the loop.
bool FindShape(const Dfa& dfa, Dfa::State s, const LoopMasks::ByteSet* cut_bytes, LoopShape* out);

}  // namespace maskd

#endif  // MASKD_TOKENIZER_LOOP_SHAPE_H_
