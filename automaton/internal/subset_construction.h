// The second stage of a DFA build: the subset construction turns a
// CompactNfa into a complete DFA over the NFA's byte classes, as a dense
// table. Internal to maskd_automaton.
#ifndef MASKD_AUTOMATON_INTERNAL_SUBSET_CONSTRUCTION_H_
#define MASKD_AUTOMATON_INTERNAL_SUBSET_CONSTRUCTION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "automaton/dfa.h"
#include "automaton/internal/nfa.h"

namespace maskd::automaton_internal {

// A complete DFA as a dense table: row s (num_classes entries, state-major)
// holds the successor of state s on each class. State 0 is dead: every
// entry of its row is 0 and it does not accept.
struct DenseDfa {
  uint32_t num_states = 0;
  uint32_t num_classes = 0;
  uint32_t start = 0;
  std::vector<uint32_t> table;      // num_states * num_classes
  std::vector<uint8_t> accepting;   // num_states
};

// The DFA whose states are the sets of NFA states reachable on some byte
// string, restricted to states with byte edges or the match state (dead: the
// empty set). Not pruned, not minimal: live and dead states as found.
// ResourceExhausted past options.max_states; Cancelled or DeadlineExceeded
// as CheckBuildAbort.
absl::StatusOr<DenseDfa> SubsetConstruction(const CompactNfa& nfa, const DfaOptions& options);

}  // namespace maskd::automaton_internal

#endif  // MASKD_AUTOMATON_INTERNAL_SUBSET_CONSTRUCTION_H_
