// CodepointSet: a set of Unicode codepoints as sorted, disjoint ranges, the
// alphabet of the regex syntax tree (automaton/regex.h) and of the UTF-8
// range encoder (automaton/internal/utf8_ranges.h).
#ifndef MASKD_AUTOMATON_CODEPOINT_SET_H_
#define MASKD_AUTOMATON_CODEPOINT_SET_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace maskd {

// Largest Unicode codepoint.
inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// A set of codepoints as sorted, disjoint, non-adjacent closed ranges. Copies
// share the ranges (a change replaces them): a big class such as \p{L}, about
// 660 ranges, costs one copy however often a pattern repeats it.
class CodepointSet {
 public:
  using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

  CodepointSet() = default;
  static CodepointSet Range(uint32_t lo, uint32_t hi);  // lo <= hi <= kMaxCodepoint
  void AddRange(uint32_t lo, uint32_t hi);  // lo <= hi <= kMaxCodepoint
  void Add(const CodepointSet& other);
  // Closed ranges in any order, overlapping or not, each within
  // [0, kMaxCodepoint].
  void AddRanges(const Ranges& ranges);
  // Removes every codepoint of `other`: linear in the two sizes.
  void Subtract(const CodepointSet& other);
  CodepointSet Complement() const;          // over [0, kMaxCodepoint] minus surrogates
  // The codepoints of the set within [lo, hi] (lo <= hi).
  CodepointSet IntersectRange(uint32_t lo, uint32_t hi) const;
  bool empty() const { return ranges().empty(); }
  bool Contains(uint32_t cp) const;
  const Ranges& ranges() const;
  // Identifies the shared ranges: equal for copies of one set.
  const void* storage() const { return ranges_.get(); }

 private:
  void Assign(Ranges ranges);        // sorts and merges
  void AssignSorted(Ranges ranges);  // merges; `ranges` sorted by lo
  std::shared_ptr<const Ranges> ranges_;  // null when empty
};

}  // namespace maskd

#endif  // MASKD_AUTOMATON_CODEPOINT_SET_H_
