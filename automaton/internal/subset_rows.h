// The step of a subset construction that both DFA builds share: the row of
// one DFA state (a sorted set of NFA states), i.e. the set reached on each
// byte class, each handed to the caller to be numbered. The eager build
// (subset_construction.cc) fills every row in order; the lazy one
// (lazy_dfa.cc) fills a row when a walk first reads it. Internal to
// maskd_automaton.
#ifndef MASKD_AUTOMATON_INTERNAL_SUBSET_ROWS_H_
#define MASKD_AUTOMATON_INTERNAL_SUBSET_ROWS_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "automaton/dfa.h"
#include "automaton/internal/build_abort.h"
#include "automaton/internal/nfa.h"
#include "automaton/internal/span_interner.h"

namespace maskd::automaton_internal {

// Epsilon closures restricted to "important" states (with byte edges, or the
// match state) and, when `live` is given, to states with live[s] != 0,
// computed once per NFA state on first use and kept sorted.
class Closures {
 public:
  Closures(const CompactNfa& nfa, const std::vector<uint8_t>* live);

  // Invalidated by the next call.
  absl::Span<const uint32_t> Get(uint32_t s) {
    if (begin_[s] == kUnknown) Compute(s);
    return absl::MakeConstSpan(pool_.data() + begin_[s], end_[s] - begin_[s]);
  }
  // Bytes held.
  size_t MemoryBytes() const;

 private:
  static constexpr uint32_t kUnknown = 0xFFFFFFFFu;

  bool Important(uint32_t s) const {
    return (live_ == nullptr || (*live_)[s] != 0) &&
           (s == nfa_.match || nfa_.edge_begin[s] != nfa_.edge_begin[s + 1]);
  }
  void Compute(uint32_t s);

  const CompactNfa& nfa_;
  const std::vector<uint8_t>* const live_;  // null: every state
  std::vector<uint32_t> pool_;
  std::vector<uint32_t> begin_, end_;  // per NFA state: its closure in pool_
  std::vector<uint32_t> mark_;
  uint32_t generation_ = 0;
  std::vector<uint32_t> stack_;
};

// ResourceExhausted: a DFA build needs more than `max_states` states.
absl::Status TooManyStatesError(uint32_t max_states);

// The id of DFA state `set` in `sets` (both builds number states this way),
// with `*added` set when it is new (then its id is the next one);
// ResourceExhausted naming max_states when it is new and `sets` already
// holds `max_states` sets.
inline absl::StatusOr<uint32_t> InternStateSet(SpanInterner* sets, absl::Span<const uint32_t> set,
                                               uint32_t max_states, bool* added) {
  const uint64_t h = SpanInterner::Hash(set);
  *added = false;
  if (uint32_t id = sets->Find(set, h); id != SpanInterner::kNone) return id;
  if (sets->size() >= max_states) return TooManyStatesError(max_states);
  *added = true;
  return sets->Add(set, h);
}

// Computes rows. Not thread-safe: one SubsetRows per build, or a lock.
class SubsetRows {
 public:
  // Numbers a target set (sorted, unique; the empty set is never passed):
  // its DFA state, or an error (a state limit) that stops the row.
  using Intern = absl::FunctionRef<absl::StatusOr<uint32_t>(absl::Span<const uint32_t>)>;

  // `options` bounds the work (AbortMeter); `live` as Closures'.
  SubsetRows(const CompactNfa& nfa, const DfaOptions& options, const std::vector<uint8_t>* live);

  // The start state's set. Invalidated by the next call.
  absl::Span<const uint32_t> StartSet() { return closures_.Get(nfa_.start); }
  // Writes row[0, num_classes): the state `intern` gives the set reached
  // from `set` on each class, 0 where it is empty. `set` may be invalidated
  // by `intern` (it is read first). On error `row` is partly written.
  absl::Status FillRow(absl::Span<const uint32_t> set, Intern intern, uint32_t* row);
  size_t MemoryBytes() const;

 private:
  // Abort checks by work: a DFA state costs kStateWork plus its NFA edges, a
  // merged target set its closures' members. So small states are checked
  // every 64, and a few huge ones (sets of millions of NFA states) cannot
  // run long between checks.
  static constexpr uint64_t kStateWork = AbortMeter::kCheckWork / 64;

  // The state of the union of the closures of `targets` (sorted, unique),
  // or kDead when that union is empty.
  absl::StatusOr<uint32_t> InternClosureUnion(const std::vector<uint32_t>& targets, Intern intern);
  void CollectEdges(absl::Span<const uint32_t> set);

  const CompactNfa& nfa_;
  const uint32_t k_;  // byte classes
  Closures closures_;
  AbortMeter meter_;
  std::vector<uint32_t> scratch_;  // a set being built, before intern
  std::vector<CompactNfa::Edge> out_edges_, active_;
  std::vector<uint16_t> bounds_;
  std::vector<uint32_t> targets_, prev_targets_;
  std::vector<uint32_t> mark_;  // per NFA state: generation_ when in scratch_
  uint32_t generation_ = 0;
};

}  // namespace maskd::automaton_internal

#endif  // MASKD_AUTOMATON_INTERNAL_SUBSET_ROWS_H_
