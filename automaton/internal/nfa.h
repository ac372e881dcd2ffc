// The first stage of a DFA build: a regex syntax tree becomes a Thompson NFA
// over bytes, and the bytes are grouped into classes at the NFA's range
// boundaries (two bytes in one class label the same edges). Internal to
// maskd_automaton.
#ifndef MASKD_AUTOMATON_INTERNAL_NFA_H_
#define MASKD_AUTOMATON_INTERNAL_NFA_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "automaton/dfa.h"
#include "automaton/regex.h"

namespace maskd::automaton_internal {

// An NFA in compressed rows, byte edges labelled with class ranges. State
// `s`'s byte edges are edges[edge_begin[s], edge_begin[s + 1]), its epsilon
// edges eps_to[eps_begin[s], eps_begin[s + 1]). `match` has no edges.
struct CompactNfa {
  struct Edge {
    uint32_t to;
    uint16_t lo, hi;  // byte classes, inclusive
  };
  uint32_t num_states = 0;
  uint32_t start = 0;
  uint32_t match = 0;
  std::vector<uint32_t> edge_begin;  // num_states + 1
  std::vector<Edge> edges;
  std::vector<uint32_t> eps_begin;   // num_states + 1
  std::vector<uint32_t> eps_to;
  // byte_class[b]: the class of byte b, in [0, num_classes); classes are
  // numbered in byte order.
  uint8_t byte_class[256] = {};
  uint32_t num_classes = 0;
};

// The NFA of `regex`, whose language is the regex's as UTF-8. Equal
// subexpressions in front of the same continuation share their states.
// ResourceExhausted past options.max_nfa_states; Cancelled or
// DeadlineExceeded as CheckBuildAbort.
absl::StatusOr<CompactNfa> BuildNfa(const Regex& regex, const DfaOptions& options);

}  // namespace maskd::automaton_internal

#endif  // MASKD_AUTOMATON_INTERNAL_NFA_H_
