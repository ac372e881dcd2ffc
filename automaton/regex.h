// Regex: parse a regular expression into a syntax tree over Unicode codepoints.
//
// The syntax is what Outlines, Python's `re`, RE2 and JSON-Schema-to-regex
// converters emit (see docs/regex.md), with Unicode property classes (\p{Lu},
// \p{Greek}; automaton/unicode_property.h) and the inline flags i, s, x (m, u and
// U accepted, meaning nothing to a whole-text match). A constraint always
// matches the whole generated text as UTF-8: there is no search, so `^` and `$`
// are accepted only at the very ends and ignored. What a DFA cannot express
// (backreferences, lookaround, word boundaries) is an InvalidArgument error
// naming the construct and its byte offset in the pattern; exceeding a
// RegexLimits limit is ResourceExhausted.
#ifndef MASKD_AUTOMATON_REGEX_H_
#define MASKD_AUTOMATON_REGEX_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "automaton/codepoint_set.h"

namespace maskd {

// A regex syntax tree node. Immutable after parsing.
struct RegexNode {
  enum class Kind {
    kEmpty,      // matches the empty string
    kSet,        // one codepoint from `set` (an empty set matches nothing)
    kConcat,     // children in sequence
    kAlternate,  // any one child
    kRepeat,     // child repeated [min, max] times; max == kUnbounded: no upper bound
  };
  static constexpr uint32_t kUnbounded = 0xFFFFFFFFu;

  Kind kind = Kind::kEmpty;
  CodepointSet set;
  std::vector<std::unique_ptr<RegexNode>> children;
  uint32_t min = 0, max = 0;
};

// Groups open at once that the parser accepts at most: its recursion is a few
// hundred bytes of stack per level, so this bounds stack use (RegexLimits::
// max_nesting may lower it, never raise it).
inline constexpr int kMaxRegexNesting = 1000;

struct RegexLimits {
  size_t max_pattern_bytes = 1 << 20;  // pattern length in bytes
  uint32_t max_repeat = 1000;          // largest n in {n}, {n,}, {n,m}
  size_t max_nodes = 1 << 20;          // syntax tree nodes after expanding counted repeats
  // Codepoint ranges held by the character sets of the tree, a set shared by
  // several nodes (a repeated \p{..}) counted once: \p{L} is about 660 ranges
  // from 5 bytes of pattern. Exceeding it is ResourceExhausted.
  size_t max_set_ranges = 1 << 22;
  // Groups open at once, in [1, kMaxRegexNesting]; deeper is InvalidArgument
  // (a value outside the range: InvalidArgument for every pattern).
  int max_nesting = kMaxRegexNesting;
};

class Regex {
 public:
  static absl::StatusOr<Regex> Parse(std::string_view pattern, const RegexLimits& limits = {});

  const RegexNode& root() const { return *root_; }
  // Syntax tree nodes counting counted repeats as expanded: a size estimate.
  size_t expanded_size() const { return expanded_size_; }

 private:
  std::unique_ptr<RegexNode> root_;
  size_t expanded_size_ = 0;
};

}  // namespace maskd

#endif  // MASKD_AUTOMATON_REGEX_H_
