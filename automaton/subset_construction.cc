#include "automaton/internal/subset_construction.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "automaton/internal/build_abort.h"
#include "automaton/internal/span_interner.h"

namespace maskd::automaton_internal {
namespace {

// Epsilon closures restricted to "important" states (with byte edges, or the
// match state), computed once per NFA state on first use and kept sorted.
class Closures {
 public:
  explicit Closures(const CompactNfa& nfa)
      : nfa_(nfa), begin_(nfa.num_states, kUnknown), end_(nfa.num_states, 0),
        mark_(nfa.num_states, 0) {}

  // Invalidated by the next call.
  absl::Span<const uint32_t> Get(uint32_t s) {
    if (begin_[s] == kUnknown) Compute(s);
    return absl::MakeConstSpan(pool_.data() + begin_[s], end_[s] - begin_[s]);
  }

 private:
  static constexpr uint32_t kUnknown = 0xFFFFFFFFu;

  bool Important(uint32_t s) const {
    return s == nfa_.match || nfa_.edge_begin[s] != nfa_.edge_begin[s + 1];
  }

  void Compute(uint32_t s) {
    ++generation_;
    const size_t first = pool_.size();
    stack_.assign(1, s);
    mark_[s] = generation_;
    while (!stack_.empty()) {
      uint32_t x = stack_.back();
      stack_.pop_back();
      if (Important(x)) pool_.push_back(x);
      for (uint32_t i = nfa_.eps_begin[x]; i < nfa_.eps_begin[x + 1]; ++i) {
        uint32_t t = nfa_.eps_to[i];
        if (mark_[t] != generation_) {
          mark_[t] = generation_;
          stack_.push_back(t);
        }
      }
    }
    std::sort(pool_.begin() + first, pool_.end());
    begin_[s] = static_cast<uint32_t>(first);
    end_[s] = static_cast<uint32_t>(pool_.size());
  }

  const CompactNfa& nfa_;
  std::vector<uint32_t> pool_;
  std::vector<uint32_t> begin_, end_;  // per NFA state: its closure in pool_
  std::vector<uint32_t> mark_;
  uint32_t generation_ = 0;
  std::vector<uint32_t> stack_;
};

// Subset construction over byte classes. A DFA state is a sorted set of
// important NFA states (SpanInterner id); DFA state 0 is the empty set, which
// is dead. Row d of table_ holds k entries.
class SubsetBuilder {
 public:
  SubsetBuilder(const CompactNfa& nfa, const DfaOptions& options)
      : nfa_(nfa), options_(options), k_(nfa.num_classes), closures_(nfa), meter_(options),
        mark_(nfa.num_states, 0) {
    sets_.Add({}, SpanInterner::Hash({}));
    table_.assign(k_, 0);
    accepting_.push_back(0);
  }

  absl::StatusOr<DenseDfa> Build() {
    {
      auto init = closures_.Get(nfa_.start);
      scratch_.assign(init.begin(), init.end());
    }
    auto start_id = Intern(scratch_);
    if (!start_id.ok()) return start_id.status();
    for (uint32_t d = 1; d < sets_.size(); ++d) {
      if (absl::Status s = FillRow(d); !s.ok()) return s;
    }
    DenseDfa dfa;
    dfa.num_states = sets_.size();
    dfa.num_classes = k_;
    dfa.start = *start_id;
    dfa.table = std::move(table_);
    dfa.accepting = std::move(accepting_);
    return dfa;
  }

 private:
  // Abort checks by work: a DFA state costs kStateWork plus its NFA edges, a
  // merged target set its closures' members. So small states are checked
  // every 64, and a few huge ones (sets of millions of NFA states) cannot
  // run long between checks.
  static constexpr uint64_t kStateWork = AbortMeter::kCheckWork / 64;

  // The id of DFA state `set`, added (with a dead row) when new.
  absl::StatusOr<uint32_t> Intern(absl::Span<const uint32_t> set) {
    const uint64_t h = SpanInterner::Hash(set);
    uint32_t id = sets_.Find(set, h);
    if (id != SpanInterner::kNone) return id;
    if (sets_.size() >= options_.max_states) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "regex: the DFA needs more than %d states (limit max_states)", options_.max_states));
    }
    id = sets_.Add(set, h);
    accepting_.push_back(std::binary_search(set.begin(), set.end(), nfa_.match) ? 1 : 0);
    table_.resize(table_.size() + k_, 0);
    return id;
  }

  // The DFA state of the union of the closures of `targets` (sorted, unique).
  absl::StatusOr<uint32_t> InternClosureUnion(const std::vector<uint32_t>& targets) {
    if (targets.size() == 1) return Intern(closures_.Get(targets[0]));
    ++generation_;
    scratch_.clear();
    for (uint32_t t : targets) {
      auto closure = closures_.Get(t);
      for (uint32_t x : closure) {
        if (mark_[x] != generation_) {
          mark_[x] = generation_;
          scratch_.push_back(x);
        }
      }
      if (auto s = meter_.Spend(closure.size()); !s.ok()) return s;
    }
    std::sort(scratch_.begin(), scratch_.end());
    return Intern(scratch_);
  }

  // out_edges_ = the NFA edges of the members of DFA state d, unsorted.
  void CollectEdges(uint32_t d) {
    out_edges_.clear();
    for (uint32_t s : sets_.Get(d)) {
      out_edges_.insert(out_edges_.end(), nfa_.edges.begin() + nfa_.edge_begin[s],
                        nfa_.edges.begin() + nfa_.edge_begin[s + 1]);
    }
  }

  // Fills row d: its NFA edges sorted by first class, swept over the class
  // boundaries; between two boundaries the set of targets is constant.
  absl::Status FillRow(uint32_t d) {
    CollectEdges(d);
    if (auto s = meter_.Spend(kStateWork + out_edges_.size()); !s.ok()) return s;
    if (out_edges_.empty()) return absl::OkStatus();  // the match state alone: all to dead
    std::sort(out_edges_.begin(), out_edges_.end(),
              [](const CompactNfa::Edge& a, const CompactNfa::Edge& b) { return a.lo < b.lo; });
    bounds_.clear();
    for (const auto& e : out_edges_) {
      bounds_.push_back(e.lo);
      bounds_.push_back(static_cast<uint16_t>(e.hi + 1));
    }
    std::sort(bounds_.begin(), bounds_.end());
    bounds_.erase(std::unique(bounds_.begin(), bounds_.end()), bounds_.end());
    active_.clear();
    prev_targets_.clear();
    uint32_t prev_id = 0;
    size_t next_edge = 0;
    for (size_t bi = 0; bi + 1 < bounds_.size(); ++bi) {
      const uint32_t a = bounds_[bi], b = bounds_[bi + 1];  // classes [a, b)
      active_.erase(std::remove_if(active_.begin(), active_.end(),
                                   [a](const CompactNfa::Edge& e) { return e.hi < a; }),
                    active_.end());
      while (next_edge < out_edges_.size() && out_edges_[next_edge].lo == a) {
        active_.push_back(out_edges_[next_edge++]);
      }
      if (active_.empty()) continue;
      targets_.clear();
      for (const auto& e : active_) targets_.push_back(e.to);
      std::sort(targets_.begin(), targets_.end());
      targets_.erase(std::unique(targets_.begin(), targets_.end()), targets_.end());
      if (targets_ != prev_targets_) {
        absl::StatusOr<uint32_t> got = InternClosureUnion(targets_);
        if (!got.ok()) return got.status();
        prev_targets_.swap(targets_);
        prev_id = *got;
      }
      uint32_t* row = &table_[static_cast<size_t>(d) * k_];
      std::fill(row + a, row + b, prev_id);
    }
    return absl::OkStatus();
  }

  const CompactNfa& nfa_;
  const DfaOptions& options_;
  const uint32_t k_;  // columns of the table
  Closures closures_;
  AbortMeter meter_;
  SpanInterner sets_;
  std::vector<uint32_t> table_;
  std::vector<uint8_t> accepting_;
  std::vector<uint32_t> scratch_;  // a set being built, before Intern
  // FillRow's buffers, kept across rows.
  std::vector<CompactNfa::Edge> out_edges_, active_;
  std::vector<uint16_t> bounds_;
  std::vector<uint32_t> targets_, prev_targets_;
  std::vector<uint32_t> mark_;  // per NFA state: generation_ when in scratch_
  uint32_t generation_ = 0;
};

}  // namespace

absl::StatusOr<DenseDfa> SubsetConstruction(const CompactNfa& nfa, const DfaOptions& options) {
  return SubsetBuilder(nfa, options).Build();
}

}  // namespace maskd::automaton_internal
