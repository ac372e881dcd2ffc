// Dfa: an anchored, byte-level deterministic automaton for a Regex.
//
// The automaton reads the UTF-8 bytes of the whole text. State 0 is the dead
// state (no continuation can match); every other state can still reach an
// accepting state. Bytes are grouped into equivalence classes: two bytes in one
// class have the same transition from every state.
//
// Two modes (Compile and CompileLazy), with the same language, the same dead state
// and so the same token masks:
//  - eager (default): every state built, minimized and numbered before
//    Compile returns; the DFA is then immutable.
//  - lazy: Compile builds the NFA and the start state only; a state is
//    numbered when a walk first reaches it and its transitions computed when
//    a walk first leaves it (internal/lazy_dfa.h), so the cost follows the
//    states walks touch, not the automaton's size. States are not minimized,
//    num_states() and MemoryBytes() grow, and max_states bounds them: a
//    transition that needs a state past it returns kDead and counts a
//    refusal on the calling thread (Refusals()), which callers that must
//    tell it from a real rejection check (index/token_index.h).
//    Its rows are one flat table (internal/flat_rows.h): a built transition
//    costs one load more than an eager one's, off the walk's dependent chain.
//  - hybrid (CompileLazy with DfaOptions::eager_up_to_states): eager when
//    the whole build fits that many states (small automata, whose minimized
//    tables give walks fewer states and masks), else lazy.
// Both modes are thread-safe for concurrent readers; a lazy one's reads of
// transitions already computed take no lock.
#ifndef MASKD_AUTOMATON_DFA_H_
#define MASKD_AUTOMATON_DFA_H_

#include <atomic>
#include <bitset>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "automaton/regex.h"

namespace maskd {

struct DfaOptions {
  // Cap on DFA states during construction (before minimization).
  uint32_t max_states = 100000;
  // Cap on NFA states built from the syntax tree.
  uint32_t max_nfa_states = 2000000;
  // Compilation fails with DeadlineExceeded past this time.
  absl::Time deadline = absl::InfiniteFuture();
  // When set and true, compilation fails with Cancelled.
  const std::atomic<bool>* cancel = nullptr;
  // Dfa::CompileLazy only: first try the whole (eager, minimized) build
  // capped at this many subset-construction states (before minimization),
  // and keep it when it fits; the lazy DFA only past it. 0: always lazy.
  // The trial costs at most what this many states cost when it is
  // abandoned, and where it fits walks read a minimized table.
  uint32_t eager_up_to_states = 0;
};

namespace automaton_internal {
class LazyDfa;
}

class Dfa {
 public:
  using State = uint32_t;
  static constexpr State kDead = 0;
  static constexpr uint32_t kNoDistance = 0xFFFFFFFFu;
  // Lazy mode: a transition not computed yet (never returned by Next).
  static constexpr uint32_t kUnbuilt = 0xFFFFFFFFu;

  static absl::StatusOr<std::shared_ptr<const Dfa>> Compile(const Regex& regex,
                                                            const DfaOptions& options = {});
  // Lazy mode: the NFA and the start state only; options.max_states bounds
  // the states later walks build (its deadline and cancel flag, the NFA's).
  // With options.eager_up_to_states, the eager DFA instead when its build
  // fits that many states (then lazy() is false).
  static absl::StatusOr<std::shared_ptr<const Dfa>> CompileLazy(const Regex& regex,
                                                                const DfaOptions& options = {});
  // Parse + Compile (or CompileLazy when `lazy`).
  static absl::StatusOr<std::shared_ptr<const Dfa>> FromPattern(
      std::string_view pattern, const RegexLimits& limits = {}, const DfaOptions& options = {},
      bool lazy = false);

  ~Dfa();
  Dfa(const Dfa&) = delete;
  Dfa& operator=(const Dfa&) = delete;

  bool lazy() const { return lazy_ != nullptr; }
  State start() const { return start_; }
  // States numbered so far, the dead one included (lazy: grows with walks).
  uint32_t num_states() const;
  uint32_t num_classes() const { return num_classes_; }
  uint8_t byte_class(uint8_t byte) const { return byte_class_[byte]; }

  State Next(State s, uint8_t byte) const {
    const uint32_t c = byte_class_[byte];
    if (lazy_table_ != nullptr) {
      const std::atomic<uint32_t>* rows = lazy_table_->load(std::memory_order_acquire);
      const State t = rows[static_cast<size_t>(s) * num_classes_ + c].load(std::memory_order_acquire);
      return t != kUnbuilt ? t : LazyNext(s, c);
    }
    return table_[static_cast<size_t>(s) * num_classes_ + c];
  }
  // Walks `bytes` from `s`; kDead as soon as a byte is rejected.
  State Walk(State s, std::string_view bytes) const {
    for (char c : bytes) {
      s = Next(s, static_cast<uint8_t>(c));
      if (s == kDead) return kDead;
    }
    return s;
  }
  bool IsAccepting(State s) const;
  // Fewest bytes from `s` to an accepting state; 0 when accepting,
  // kNoDistance for the dead state.
  uint32_t DistanceToAccept(State s) const;
  // The largest DistanceToAccept over live states (0 when none); lazy: an
  // upper bound of it (the largest over the NFA's states).
  uint32_t MaxDistanceToAccept() const { return max_distance_; }
  // When `s` is not accepting and exactly one byte leads to a live state, that
  // byte; otherwise -1 (lazy: also when the state limit refuses s's
  // transitions). Used to build forced continuations.
  int ForcedByte(State s) const;
  // Whether the full text `text` matches.
  bool Matches(std::string_view text) const;
  // The live state other than `s` that the most bytes lead to from `s` (the
  // lowest-numbered on a tie), and in `*bytes` how many; kDead (and 0) when
  // every byte dies or stays in `s`. Self-loop bytes in `*self_bytes`.
  State WidestSuccessor(State s, uint32_t* bytes, uint32_t* self_bytes = nullptr) const;

  // The bytes some live state takes to a live state: a byte outside it is
  // rejected from every state. Lazy: a superset (the bytes on the NFA's
  // edges into live NFA states), and no state is built.
  std::bitset<256> LiveBytes() const;

  // Bytes held (lazy: grows with the states built).
  size_t MemoryBytes() const;

  // Lazy DFAs: transitions refused by the state limit on the calling thread,
  // since it started (a running count). Work that read a lazy DFA compares
  // it before and after (RefusalWatch); a change means some kDead it saw
  // was a refusal.
  static uint64_t Refusals();
  // Counts a refusal on the calling thread for a DFA that a caller could not
  // build when a walk first needed it (grammar/deferred_dfa.h): work that
  // read it is then discarded as for the state limit.
  static void CountRefusal();
  // The error for a refusal: ResourceExhausted naming max_states.
  absl::Status StateLimitError() const;

  // Lazy DFAs: builds every state reachable from the start, so later walks
  // read filled rows only and the state limit can no longer refuse one.
  // ResourceExhausted naming max_states when the states do not fit it;
  // Cancelled or DeadlineExceeded by `options`' cancel flag and deadline.
  // The verdict depends on the regex and max_states only: the lazy states
  // are subsets of live NFA states, never more than the eager build's
  // before minimization, so a DFA the eager build fits fits here too.
  // Eager DFAs: OK at once.
  absl::Status BuildAll(const DfaOptions& options) const;

 private:
  friend class DfaBuilder;
  Dfa();
  // Lazy mode: the successor on class `c`, its row filled first when
  // needed (internal/lazy_dfa.h).
  State LazyNext(State s, uint32_t c) const;
  // The successor of `s` on class `c`, either mode.
  State ClassNext(State s, uint32_t c) const {
    return lazy_ != nullptr ? LazyNext(s, c) : table_[static_cast<size_t>(s) * num_classes_ + c];
  }

  State start_ = kDead;
  uint32_t num_states_ = 0;
  uint32_t num_classes_ = 0;
  uint8_t byte_class_[256] = {};
  std::vector<State> table_;          // num_states_ * num_classes_
  std::vector<uint8_t> accepting_;    // num_states_
  std::vector<uint32_t> distance_;    // num_states_
  uint32_t max_distance_ = 0;         // max of distance_ over live states
  std::vector<int16_t> forced_byte_;  // num_states_
  // Lazy mode: the automaton, and none of the eager fields above but start_,
  // num_classes_, byte_class_ and max_distance_.
  std::unique_ptr<const automaton_internal::LazyDfa> lazy_;
  // Lazy mode: where lazy_ publishes its flat table of rows (num_classes_
  // entries each, kUnbuilt until filled), read here without a call.
  const std::atomic<const std::atomic<uint32_t>*>* lazy_table_ = nullptr;
};

// Whether a lazy DFA refused a state on the calling thread (Dfa::Refusals
// moved) since this watch was made: then some kDead the work read was the
// state limit, not a rejection, and its result must not be kept.
class RefusalWatch {
 public:
  RefusalWatch() : start_(Dfa::Refusals()) {}
  bool refused() const { return Dfa::Refusals() != start_; }

 private:
  const uint64_t start_;
};

}  // namespace maskd

#endif  // MASKD_AUTOMATON_DFA_H_
