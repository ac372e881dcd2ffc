#include "automaton/internal/subset_rows.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace maskd::automaton_internal {

absl::Status TooManyStatesError(uint32_t max_states) {
  return absl::ResourceExhaustedError(
      absl::StrFormat("regex: the DFA needs more than %d states (limit max_states)", max_states));
}

Closures::Closures(const CompactNfa& nfa, const std::vector<uint8_t>* live)
    : nfa_(nfa), live_(live), begin_(nfa.num_states, kUnknown), end_(nfa.num_states, 0),
      mark_(nfa.num_states, 0) {}

void Closures::Compute(uint32_t s) {
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

size_t Closures::MemoryBytes() const {
  return (pool_.capacity() + begin_.capacity() + end_.capacity() + mark_.capacity() +
          stack_.capacity()) * sizeof(uint32_t);
}

SubsetRows::SubsetRows(const CompactNfa& nfa, const DfaOptions& options,
                       const std::vector<uint8_t>* live)
    : nfa_(nfa), k_(nfa.num_classes), closures_(nfa, live), meter_(options),
      mark_(nfa.num_states, 0) {}

absl::StatusOr<uint32_t> SubsetRows::InternClosureUnion(const std::vector<uint32_t>& targets,
                                                        Intern intern) {
  if (targets.size() == 1) {
    auto closure = closures_.Get(targets[0]);
    if (closure.empty()) return Dfa::kDead;
    return intern(closure);
  }
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
  if (scratch_.empty()) return Dfa::kDead;
  std::sort(scratch_.begin(), scratch_.end());
  return intern(scratch_);
}

// out_edges_ = the NFA edges of the members of `set`, unsorted.
void SubsetRows::CollectEdges(absl::Span<const uint32_t> set) {
  out_edges_.clear();
  for (uint32_t s : set) {
    out_edges_.insert(out_edges_.end(), nfa_.edges.begin() + nfa_.edge_begin[s],
                      nfa_.edges.begin() + nfa_.edge_begin[s + 1]);
  }
}

// The set's NFA edges sorted by first class, swept over the class
// boundaries; between two boundaries the set of targets is constant.
absl::Status SubsetRows::FillRow(absl::Span<const uint32_t> set, Intern intern, uint32_t* row) {
  std::fill(row, row + k_, Dfa::kDead);
  CollectEdges(set);
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
      absl::StatusOr<uint32_t> got = InternClosureUnion(targets_, intern);
      if (!got.ok()) return got.status();
      prev_targets_.swap(targets_);
      prev_id = *got;
    }
    std::fill(row + a, row + b, prev_id);
  }
  return absl::OkStatus();
}

size_t SubsetRows::MemoryBytes() const {
  return closures_.MemoryBytes() +
         (scratch_.capacity() + targets_.capacity() + prev_targets_.capacity() + mark_.capacity()) *
             sizeof(uint32_t) +
         (out_edges_.capacity() + active_.capacity()) * sizeof(CompactNfa::Edge) +
         bounds_.capacity() * sizeof(uint16_t);
}

}  // namespace maskd::automaton_internal
