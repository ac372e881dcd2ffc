// CodepointSet: a set of Unicode codepoints as sorted, disjoint ranges, the
// alphabet of the regex syntax tree (automaton/regex.h) and of the UTF-8
// range encoder (automaton/internal/utf8_ranges.h).
#ifndef MASKD_AUTOMATON_CODEPOINT_SET_H_
#define MASKD_AUTOMATON_CODEPOINT_SET_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"

namespace maskd {

// Largest Unicode codepoint.
inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// A set of codepoints as sorted, disjoint, non-adjacent closed ranges. A set
// of more than kSharedAbove ranges shares them between copies (a change
// replaces them): a big class such as \p{L}, about 660 ranges, costs one copy
// however often a pattern repeats it. Smaller sets (a literal, \d, [a-z_])
// hold their ranges themselves, one allocation a copy.
class CodepointSet {
 public:
  using Ranges = absl::InlinedVector<std::pair<uint32_t, uint32_t>, 1>;

  CodepointSet() = default;
  static CodepointSet Range(uint32_t lo, uint32_t hi);  // lo <= hi <= kMaxCodepoint
  void AddRange(uint32_t lo, uint32_t hi);  // lo <= hi <= kMaxCodepoint
  void Add(const CodepointSet& other);
  // Closed ranges in any order, overlapping or not, each within
  // [0, kMaxCodepoint].
  void AddRanges(absl::Span<const std::pair<uint32_t, uint32_t>> ranges);
  // Removes every codepoint of `other`: linear in the two sizes.
  void Subtract(const CodepointSet& other);
  CodepointSet Complement() const;          // over [0, kMaxCodepoint] minus surrogates
  // The codepoints of the set within [lo, hi] (lo <= hi).
  CodepointSet IntersectRange(uint32_t lo, uint32_t hi) const;
  bool empty() const { return ranges().empty(); }
  bool Contains(uint32_t cp) const;
  const Ranges& ranges() const { return shared_ != nullptr ? *shared_ : own_; }
  // Sets of more ranges than this share them between copies.
  static constexpr size_t kSharedAbove = 8;
  // Identifies the shared ranges of a set of more than kSharedAbove ranges:
  // equal for copies of one set. Null for smaller sets.
  const void* storage() const { return shared_.get(); }

 private:
  void Assign(Ranges ranges);        // sorts and merges
  void AssignSorted(Ranges ranges);  // merges; `ranges` sorted by lo
  // Exactly one holds the ranges: shared_ when there are more than
  // kSharedAbove of them, else own_ (shared_ null).
  Ranges own_;
  std::shared_ptr<const Ranges> shared_;
};

}  // namespace maskd

#endif  // MASKD_AUTOMATON_CODEPOINT_SET_H_
