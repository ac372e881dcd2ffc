// EarleyParser: an incremental Earley parser over bytes for a CompiledGrammar.
//
// The parser is a stack of Earley sets: the start set, then one per byte
// taken. Push(byte) scans a byte into a new set and Pop() drops the last one,
// so a trie walk can try each token's bytes and undo them. It recognizes the
// language grammar.h defines, with the items of the reference recognizer
// (earley.h): terminals are scanned inside items by their DFAs, nullable
// rules and terminals are stepped over at prediction (Aycock-Horspool).
//
// Ignored text has one place: between two terminals (and before the first,
// after the last), which is where grammar.h's "between any two symbols"
// lands in the text. Only a set where a terminal ended (or the start set)
// holds rule items, and it predicts the ignored terminals with itself as
// origin; an ignored string that ends re-opens the terminals predicted in
// its origin set (its non-rule items that begin there, the ignored
// terminals included), origins unchanged, so the rule items waiting there
// advance when one of them ends. A run of ignored text thus carries a fixed
// number of items per byte (the origin set's predictions and the ignored
// terminals' DFA states), however long the run and the text before it: for
// an unambiguous grammar, the chart grows by a bounded number of items per
// byte. The reference recognizer instead re-opens every rule item, which
// re-predicts their rules at each byte of the run; the two recognize the
// same language (tests/grammar/earley_ignore_chart_test.cc).
//
// Invariant: every item of every set lies on some derivation of an accepted
// text (every rule derives a string and every live DFA state reaches
// acceptance, Validate's invariants), so a byte is viable iff its set is
// non-empty, and a scan item's terminal may always be finished.
//
// Memory: items live in flat arrays (chart_allocator.h) that keep their
// capacity across Pop, so a walk that pushes and pops allocates nothing once
// they have grown; ReleaseSpare gives back what a rollback left spare, and
// allocated_bytes() is everything they hold. Limits:
// per set, EarleyOptions::max_items_per_position and max_steps_per_position;
// in all sets together, max_chart_items; per call, the parser steps and the
// caller's Interrupt given to SetWorkLimit. Past one, the call that would
// build the set fails (ResourceExhausted, or the Interrupt's status) and the
// stack is unchanged.
//
// Not thread-safe; copies are independent.
#ifndef MASKD_GRAMMAR_EARLEY_PARSER_H_
#define MASKD_GRAMMAR_EARLEY_PARSER_H_

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "automaton/interrupt.h"
#include "grammar/chart_allocator.h"
#include "grammar/compiled_grammar.h"
#include "grammar/earley.h"
#include "grammar/earley_item.h"

namespace maskd::grammar {

class EarleyParser {
 public:
  // A parser holding the start set. Fails only past a limit.
  static absl::StatusOr<EarleyParser> Create(std::shared_ptr<const CompiledGrammar> grammar,
                                             const EarleyOptions& options = {});

  // Scans `byte`: true and a new last set when the text so far plus `byte` is
  // a viable prefix; false and no change when not.
  absl::StatusOr<bool> Push(uint8_t byte);
  // A new last set as if the terminal of `scan` (a kScan or kIgnore item of
  // the last set) ended after the last set's text: the items its completion
  // advances, closed. False and no change when that set is empty. The new
  // set stands for a text position the bytes have not reached; it is only
  // for looking ahead (grammar_index.cc), and is popped like any other.
  absl::StatusOr<bool> PushCompletion(const EarleyItem& scan);
  // The steps between two polls of an Interrupt (SetWorkLimit).
  static constexpr size_t kInterruptPollSteps = 4096;
  // Bounds the calls that follow, until the next SetWorkLimit. Counting from
  // zero the parser steps they take (earley.h: an item added or found there
  // already, by a scan, prediction or completion), the step past `max_steps`
  // fails its call with ResourceExhausted naming `limit` (a string literal:
  // the option to raise); every kInterruptPollSteps steps, `interrupt` (null:
  // none; not owned, outlives the calls) is polled and its first non-OK
  // status fails the call. Either way the stack is as before the call. The
  // default: no bound, no interrupt.
  void SetWorkLimit(size_t max_steps, const char* limit, const Interrupt* interrupt);
  // Steps taken since the last SetWorkLimit (or since Create).
  size_t work() const { return work_; }

  // Drops the last set; the start set always stays.
  void Pop() { PopTo(num_sets() - 1); }
  // Drops sets until `n` remain (1 <= n <= num_sets()). Keeps capacity.
  void PopTo(size_t n);
  // After sets were dropped for good (a rollback): shrinks every array that
  // holds more than twice its contents (and over chart_memory::kSlackBytes)
  // to 1.5 times them, the hash table to what the last set needs, and frees
  // the memo's scratch arrays. Amortized O(1) per item pushed or popped.
  void ReleaseSpare();
  // Bytes of every array the parser holds (capacity, not size; the memo and
  // scratch included), as chart_allocator.h's HeldBytes counts them; the
  // object itself not included.
  size_t allocated_bytes() const;

  size_t num_sets() const { return set_begin_.size(); }
  size_t num_items() const { return items_.size(); }
  absl::Span<const EarleyItem> last_set() const {
    return absl::MakeConstSpan(items_).subspan(set_begin_.back());
  }
  // The text so far is in the language: the last set completes the start
  // rule, or an ignored string ends there that began where it was
  // completed.
  bool IsAccepting() const;
  // The bytes that Push would accept now.
  std::bitset<256> NextBytes() const;
  // The fewest bytes whose appending makes the text so far an accepted text
  // (0 when accepting; saturates at CompiledGrammar::kNoLength). Exact: the
  // cheapest way to finish any item of the last set, then every item it
  // completes into, up to the start rule, with the shortest string of each
  // symbol left. Each set's part is computed once, on the first call that
  // needs it, and kept until the set is popped: a call costs the sets added
  // since the previous one plus the last set's items.
  uint64_t MinBytesToFinish() const;
  const CompiledGrammar& grammar() const { return *g_; }

 private:
  struct Waiting {
    uint32_t key;   // the symbol a rule item's dot is before (EarleyWaitKey)
    uint32_t item;  // index into items_
  };
  static_assert(sizeof(Waiting) == 8, "one per rule item of the chart");

  EarleyParser() = default;

  void BeginSet();
  void AbortSet();
  // Sorts the new set's waiting entries; false (and the set dropped) when the
  // set is empty.
  bool FinishSet();
  absl::Status Add(const EarleyItem& item);
  // Counts one step against the work limit (SetWorkLimit).
  absl::Status Tick() { return ++work_ < work_check_ ? absl::OkStatus() : CheckWork(); }
  // Tick's slow path: fails past the limit or on an interrupt, else sets the
  // step of the next check.
  absl::Status CheckWork();
  // Adds every rule item of set `origin` that waits on `key`, advanced.
  absl::Status AdvanceWaiting(uint32_t origin, uint32_t key);
  // Adds to the set being built what ends `scan`'s terminal there yields:
  // its waiting parents advanced (kScan), or the terminals predicted in its
  // origin set, ignored ones included (kIgnore: what could begin before the
  // ignored string).
  absl::Status Complete(const EarleyItem& scan);
  // Predicts and completes in the last set until nothing changes.
  absl::Status Closure();
  // Closes the set being built when `s` is OK and keeps it if non-empty
  // (true); drops it on error or when empty (false).
  absl::StatusOr<bool> CloseAndFinish(absl::Status s);
  void GrowTable();
  // The Waiting entries of finished set `s`.
  absl::Span<const Waiting> WaitingOf(uint32_t s) const;
  // The fewest bytes that finish the parse once rule `r` completes with
  // origin `s` (finish_[s] computed); kNoLength when no item of s waits on r.
  uint64_t RuleFinish(uint32_t s, uint32_t r) const;
  // The same once terminal `t` ends with origin `s`.
  uint64_t TerminalFinish(uint32_t s, uint32_t t) const;
  // The fewest bytes that finish the parse from the rule items of set `s`
  // as they stand (what an ignored string begun at s continues with).
  uint64_t SetFinish(uint32_t s) const;
  // Fills finish_[s] (finish_ holds every set before s).
  void ComputeFinish(uint32_t s) const;
  // Set `s` holds the start rule completed from the start.
  bool SetAccepts(uint32_t s) const;

  std::shared_ptr<const CompiledGrammar> g_;
  size_t max_items_per_set_ = 0;
  size_t max_steps_per_set_ = 0;
  size_t max_chart_items_ = 0;

  ChartVector<EarleyItem> items_;    // every set's items, set after set
  ChartVector<uint32_t> set_begin_;  // per set: its first index in items_
  // Per finished set, its rule items by the symbol after their dot, sorted
  // by key; wait_begin_[s] is set s's first entry.
  ChartVector<Waiting> waiting_;
  ChartVector<uint32_t> wait_begin_;

  // The set being built: an open-addressing table of its item indices
  // (valid where stamp_ == generation_), steps taken, and whether its
  // ignored terminals have been predicted.
  ChartVector<uint32_t> table_;
  ChartVector<uint32_t> stamp_;
  uint32_t generation_ = 0;
  size_t steps_ = 0;
  bool ignore_started_ = false;

  // The work limit (SetWorkLimit): steps taken, the step count at which
  // Tick next leaves its fast path (past the limit or at the next poll),
  // the limit and its name, and the interrupt polled.
  size_t work_ = 0;
  size_t work_check_ = SIZE_MAX;
  size_t max_work_ = SIZE_MAX;
  const char* work_limit_ = "";
  const Interrupt* interrupt_ = nullptr;

  // MinBytesToFinish's memo, for a prefix of the sets: per set s,
  // RuleFinish(s, r) for each rule r waited on in s, as (r, bytes) sorted by
  // r, from finish_[finish_begin_[s]] on. PopTo trims it; like items_, it
  // keeps its capacity (until ReleaseSpare), and so do ComputeFinish's
  // scratch arrays.
  struct FinishEdge {
    uint32_t from, to;  // indices into finish_
    uint64_t bytes;
  };
  mutable ChartVector<std::pair<uint32_t, uint64_t>> finish_;
  mutable ChartVector<uint32_t> finish_begin_;
  mutable ChartVector<FinishEdge> finish_edges_;
  mutable ChartVector<std::pair<uint64_t, uint32_t>> finish_heap_;
};

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_EARLEY_PARSER_H_
