// LazyDfa: the subset construction run on demand, as RE2's DFA does. A
// state (a set of live NFA states) gets its id when a filled row first leads
// to it; its row (the successor on each byte class) is filled the first time
// a walk reads it, under a mutex. Rows are published with release stores
// and read with acquire loads, so a walk over rows already filled takes no
// lock; the rows are one flat table (internal/flat_rows.h), so a filled
// transition costs a reader what an eager Dfa's does. States are never
// evicted: their ids stay valid for the sessions and masks that hold them,
// and their count is bounded by max_states.
//
// Unlike the eager Dfa the states are not minimized (two states may accept
// the same language) but, as there, the dead state 0 is exactly "no
// continuation matches": NFA states that cannot reach the match state are
// left out of every set, so a set that could not reach it is empty. So a
// token's walk dies at the same byte in both, and masks are the same.
// Internal to maskd_automaton (Dfa's lazy mode, dfa.h).
#ifndef MASKD_AUTOMATON_INTERNAL_LAZY_DFA_H_
#define MASKD_AUTOMATON_INTERNAL_LAZY_DFA_H_

#include <atomic>
#include <bitset>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "automaton/dfa.h"
#include "automaton/grow_only_array.h"
#include "automaton/internal/flat_rows.h"
#include "automaton/internal/forced_byte.h"
#include "automaton/internal/nfa.h"
#include "automaton/internal/span_interner.h"
#include "automaton/internal/subset_rows.h"

namespace maskd::automaton_internal {

class LazyDfa {
 public:
  // A row entry not filled yet.
  static constexpr uint32_t kUnknown = Dfa::kUnbuilt;

  // Numbers the start state (1, or the start is dead: 0). `options`'
  // max_states bounds the states; its deadline and cancel flag are not
  // kept (they belong to the compilation, not to later walks).
  static absl::StatusOr<std::unique_ptr<LazyDfa>> Create(CompactNfa nfa, const DfaOptions& options);

  uint32_t start() const { return start_; }
  uint32_t num_classes() const { return nfa_.num_classes; }
  const uint8_t* byte_class() const { return nfa_.byte_class; }
  // States numbered so far (the dead one included); grows.
  uint32_t num_states() const { return num_states_.load(std::memory_order_acquire); }
  uint32_t max_states() const { return max_states_; }

  // The successor of live-or-dead state `s` on class `c`; fills s's row on
  // first use. Dfa::kDead when the row needs a state past max_states: the
  // calling thread's refusal count (Dfa::Refusals) then goes up.
  uint32_t Next(uint32_t s, uint32_t c) const {
    const uint32_t t =
        table_.Base()[static_cast<size_t>(s) * nfa_.num_classes + c].load(std::memory_order_acquire);
    return t != kUnknown ? t : FillAndRead(s, c);
  }
  // Where the rows' table is published (FlatRows: num_classes() entries per
  // row, kUnknown until filled): Dfa::Next reads it directly and calls Next
  // only on kUnknown.
  const std::atomic<const FlatRows::Entry*>* table_base() const { return table_.base_address(); }
  bool IsAccepting(uint32_t s) const { return facts_.At(s)->accepting != 0; }
  uint32_t DistanceToAccept(uint32_t s) const { return facts_.At(s)->distance; }
  // At least the largest DistanceToAccept of any state (exact for eager
  // DFAs; here the largest distance of a live NFA state).
  uint32_t MaxDistanceBound() const { return max_distance_bound_; }
  // The classes on an NFA edge into a live NFA state: every class a live
  // DFA state may take to a live one, and perhaps more.
  std::bitset<256> LiveClasses() const;
  // Dfa::ForcedByte: fills s's row first; -1 when that is refused.
  int ForcedByte(uint32_t s) const;
  // Dfa::BuildAll: fills every row reachable from the start; `options`'
  // deadline and cancel flag polled every 256 states.
  absl::Status BuildAll(const DfaOptions& options) const;
  // Bytes held as of the last state or row added: a relaxed load, no lock
  // (an index sums it over its terminals when the cache asks).
  size_t MemoryBytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  struct Facts {
    uint32_t distance = Dfa::kNoDistance;
    uint8_t accepting = 0;
    std::atomic<int16_t> forced{kForcedUnknown};  // set when the row is filled
  };
  static constexpr int16_t kForcedUnknown = -2;

  LazyDfa(CompactNfa nfa, const DfaOptions& options);
  // Fills row s (when no other thread did) and returns its entry c.
  uint32_t FillAndRead(uint32_t s, uint32_t c) const;
  absl::Status FillRow(uint32_t s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores MemoryBytes' answer; after every change to what it counts.
  void CountBytes() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The id of `set`, numbered (row unknown, facts set) when new;
  // ResourceExhausted past max_states.
  absl::StatusOr<uint32_t> Intern(absl::Span<const uint32_t> set) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CompactNfa nfa_;
  const DfaOptions options_;  // max_states only: no deadline, no cancel flag
  const uint32_t max_states_;
  std::vector<uint8_t> live_;         // per NFA state: can reach the match
  std::vector<uint32_t> nfa_distance_;  // per NFA state: bytes to the match
  uint32_t max_distance_bound_ = 0;
  uint32_t start_ = Dfa::kDead;
  const ClassBytes classes_;

  mutable absl::Mutex mu_;  // held while filling a row
  mutable std::unique_ptr<SubsetRows> rows_ ABSL_GUARDED_BY(mu_);
  mutable SpanInterner sets_ ABSL_GUARDED_BY(mu_);
  mutable std::vector<uint32_t> row_ ABSL_GUARDED_BY(mu_);
  // Written (rows added and filled) under mu_; Base() read by any thread.
  mutable FlatRows table_;
  GrowOnlyArray<Facts> facts_;
  mutable std::atomic<uint32_t> num_states_{0};
  mutable std::atomic<size_t> bytes_{0};  // CountBytes
};

}  // namespace maskd::automaton_internal

#endif  // MASKD_AUTOMATON_INTERNAL_LAZY_DFA_H_
