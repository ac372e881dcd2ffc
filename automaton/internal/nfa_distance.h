// Per NFA state, the fewest bytes to the match state. A lazy DFA's state is
// a set of NFA states, so it can reach an accepting state exactly when one
// of its members can, and its distance to accept is the least of theirs.
// Internal to maskd_automaton.
#ifndef MASKD_AUTOMATON_INTERNAL_NFA_DISTANCE_H_
#define MASKD_AUTOMATON_INTERNAL_NFA_DISTANCE_H_

#include <cstdint>
#include <vector>

#include "automaton/internal/nfa.h"

namespace maskd::automaton_internal {

// distance[s]: the fewest byte edges on a path from s to nfa.match (epsilon
// edges cost nothing); Dfa::kNoDistance when there is none. A breadth-first
// search over reversed edges with a deque (0-1 weights), O(states + edges).
std::vector<uint32_t> NfaDistances(const CompactNfa& nfa);

}  // namespace maskd::automaton_internal

#endif  // MASKD_AUTOMATON_INTERNAL_NFA_DISTANCE_H_
