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

}  // namespace

absl::StatusOr<DenseDfa> SubsetConstruction(const CompactNfa& nfa, const DfaOptions& options) {
  const uint32_t k = nfa.num_classes;  // columns of the table
  Closures closures(nfa);

  // Subset construction over byte classes. A DFA state is a sorted set of
  // important NFA states (SpanInterner id); DFA state 0 is the empty set,
  // which is dead. Row d of `table` holds k entries.
  SpanInterner sets;
  std::vector<uint32_t> table;
  std::vector<uint8_t> accepting;
  sets.Add({}, SpanInterner::Hash({}));
  table.assign(k, 0);
  accepting.push_back(0);
  auto intern = [&](absl::Span<const uint32_t> set) -> absl::StatusOr<uint32_t> {
    const uint64_t h = SpanInterner::Hash(set);
    uint32_t id = sets.Find(set, h);
    if (id != SpanInterner::kNone) return id;
    if (sets.size() >= options.max_states) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "regex: the DFA needs more than %d states (limit max_states)", options.max_states));
    }
    id = sets.Add(set, h);
    accepting.push_back(std::binary_search(set.begin(), set.end(), nfa.match) ? 1 : 0);
    table.resize(table.size() + k, 0);
    return id;
  };
  std::vector<uint32_t> scratch;
  {
    auto init = closures.Get(nfa.start);
    scratch.assign(init.begin(), init.end());
  }
  auto start_id = intern(scratch);
  if (!start_id.ok()) return start_id.status();

  // Per DFA state: its NFA edges sorted by first class, swept over the class
  // boundaries; between two boundaries the set of targets is constant.
  std::vector<CompactNfa::Edge> out_edges, active;
  std::vector<uint16_t> bounds;
  std::vector<uint32_t> targets, prev_targets;
  std::vector<uint32_t> mark(nfa.num_states, 0);
  uint32_t generation = 0;
  // Abort checks by work: a DFA state costs kStateWork plus its NFA edges, a
  // merged target set its closures' members. So small states are checked
  // every 64, and a few huge ones (sets of millions of NFA states) cannot
  // run long between checks.
  constexpr uint64_t kStateWork = AbortMeter::kCheckWork / 64;
  AbortMeter meter(options);
  for (uint32_t d = 1; d < sets.size(); ++d) {
    out_edges.clear();
    for (uint32_t s : sets.Get(d)) {
      out_edges.insert(out_edges.end(), nfa.edges.begin() + nfa.edge_begin[s],
                       nfa.edges.begin() + nfa.edge_begin[s + 1]);
    }
    if (auto s = meter.Spend(kStateWork + out_edges.size()); !s.ok()) return s;
    if (out_edges.empty()) continue;  // the match state alone: all to dead
    std::sort(out_edges.begin(), out_edges.end(),
              [](const CompactNfa::Edge& a, const CompactNfa::Edge& b) { return a.lo < b.lo; });
    bounds.clear();
    for (const auto& e : out_edges) {
      bounds.push_back(e.lo);
      bounds.push_back(static_cast<uint16_t>(e.hi + 1));
    }
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    active.clear();
    prev_targets.clear();
    uint32_t prev_id = 0;
    size_t next_edge = 0;
    for (size_t bi = 0; bi + 1 < bounds.size(); ++bi) {
      const uint32_t a = bounds[bi], b = bounds[bi + 1];  // classes [a, b)
      active.erase(std::remove_if(active.begin(), active.end(),
                                  [a](const CompactNfa::Edge& e) { return e.hi < a; }),
                   active.end());
      while (next_edge < out_edges.size() && out_edges[next_edge].lo == a) {
        active.push_back(out_edges[next_edge++]);
      }
      if (active.empty()) continue;
      targets.clear();
      for (const auto& e : active) targets.push_back(e.to);
      std::sort(targets.begin(), targets.end());
      targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
      uint32_t id;
      if (targets == prev_targets) {
        id = prev_id;
      } else {
        absl::StatusOr<uint32_t> got;
        if (targets.size() == 1) {
          got = intern(closures.Get(targets[0]));
        } else {
          ++generation;
          scratch.clear();
          for (uint32_t t : targets) {
            auto closure = closures.Get(t);
            for (uint32_t x : closure) {
              if (mark[x] != generation) {
                mark[x] = generation;
                scratch.push_back(x);
              }
            }
            if (auto s = meter.Spend(closure.size()); !s.ok()) return s;
          }
          std::sort(scratch.begin(), scratch.end());
          got = intern(scratch);
        }
        if (!got.ok()) return got.status();
        id = *got;
        prev_targets.swap(targets);
        prev_id = id;
      }
      uint32_t* row = &table[static_cast<size_t>(d) * k];
      std::fill(row + a, row + b, id);
    }
  }

  DenseDfa dfa;
  dfa.num_states = sets.size();
  dfa.num_classes = k;
  dfa.start = *start_id;
  dfa.table = std::move(table);
  dfa.accepting = std::move(accepting);
  return dfa;
}

}  // namespace maskd::automaton_internal
