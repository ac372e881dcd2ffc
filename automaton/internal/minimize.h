// The third stage of a DFA build: the dense DFA from the subset construction
// loses the states that cannot reach an accepting state, and then its
// equivalent states are found. Internal to maskd_automaton.
#ifndef MASKD_AUTOMATON_INTERNAL_MINIMIZE_H_
#define MASKD_AUTOMATON_INTERNAL_MINIMIZE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "automaton/dfa.h"
#include "automaton/internal/subset_construction.h"

namespace maskd::automaton_internal {

// Merges every state that cannot reach an accepting state into the dead
// state 0 and renumbers the others 1.. in their old order; `start` follows
// (0 when the start state is not live). Afterwards every state but 0 is live.
void PruneDeadStates(DenseDfa* dfa);

// The block (equivalence class) of each state of `dfa`, whose dead state is
// 0; the dead state's block is 0, and *num_blocks is set to the number of
// blocks. Hopcroft's algorithm over inverse transitions, with two savings
// that keep its result: transitions into the dead state are never scanned
// (the dead block is the one initial block left out of the worklist, and it
// never splits, having one state), and a splitter (B, c) is queued only when
// some c-transition enters B, since one with an empty preimage splits
// nothing. Cancelled or DeadlineExceeded as CheckBuildAbort.
absl::StatusOr<std::vector<uint32_t>> Minimize(const DenseDfa& dfa, const DfaOptions& options,
                                               uint32_t* num_blocks);

}  // namespace maskd::automaton_internal

#endif  // MASKD_AUTOMATON_INTERNAL_MINIMIZE_H_
