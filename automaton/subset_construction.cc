#include "automaton/internal/subset_construction.h"

#include <algorithm>
#include <utility>

#include "absl/types/span.h"
#include "automaton/internal/span_interner.h"
#include "automaton/internal/subset_rows.h"

namespace maskd::automaton_internal {
namespace {

// Subset construction over byte classes, every row in order. A DFA state is
// a sorted set of important NFA states (SpanInterner id); DFA state 0 is the
// empty set, which is dead. Row d of table_ holds k entries.
class SubsetBuilder {
 public:
  SubsetBuilder(const CompactNfa& nfa, const DfaOptions& options)
      : nfa_(nfa), options_(options), k_(nfa.num_classes), rows_(nfa, options, nullptr) {
    sets_.Add({}, SpanInterner::Hash({}));
    table_.assign(k_, 0);
    accepting_.push_back(0);
  }

  absl::StatusOr<DenseDfa> Build() {
    auto start_id = Intern(rows_.StartSet());
    if (!start_id.ok()) return start_id.status();
    auto intern = [this](absl::Span<const uint32_t> set) { return Intern(set); };
    for (uint32_t d = 1; d < sets_.size(); ++d) {
      row_.resize(k_);
      if (absl::Status s = rows_.FillRow(sets_.Get(d), intern, row_.data()); !s.ok()) return s;
      std::copy(row_.begin(), row_.end(), table_.begin() + static_cast<size_t>(d) * k_);
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
  // The id of DFA state `set`, added (with a dead row) when new.
  absl::StatusOr<uint32_t> Intern(absl::Span<const uint32_t> set) {
    bool added = false;
    auto id = InternStateSet(&sets_, set, options_.max_states, &added);
    if (added) {
      accepting_.push_back(std::binary_search(set.begin(), set.end(), nfa_.match) ? 1 : 0);
      table_.resize(table_.size() + k_, 0);
    }
    return id;
  }

  const CompactNfa& nfa_;
  const DfaOptions& options_;
  const uint32_t k_;  // columns of the table
  SubsetRows rows_;
  SpanInterner sets_;
  std::vector<uint32_t> table_;
  std::vector<uint8_t> accepting_;
  std::vector<uint32_t> row_;  // the row being filled
};

}  // namespace

absl::StatusOr<DenseDfa> SubsetConstruction(const CompactNfa& nfa, const DfaOptions& options) {
  return SubsetBuilder(nfa, options).Build();
}

}  // namespace maskd::automaton_internal
