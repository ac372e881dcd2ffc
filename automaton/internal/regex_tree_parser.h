// RegexTreeParser: the recursive-descent parser behind ParseRegexTree
// (internal/regex_parser.h). The structure (alternation, concatenation,
// repeats, groups, inline flags) is in regex_parser.cc; the leaves (literals,
// escapes, \p properties, bracket classes and the sets they make) in
// regex_class_parser.cc. Internal to automaton/.
//
// Recursion: only ParseAlternation -> ParseConcat -> ParseRepeat -> ParseAtom
// -> ParseGroup -> ParseAlternation recurses, one level per group, bounded by
// RegexLimits::max_nesting; the NOINLINE members keep those frames small.
#ifndef MASKD_AUTOMATON_INTERNAL_REGEX_TREE_PARSER_H_
#define MASKD_AUTOMATON_INTERNAL_REGEX_TREE_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/attributes.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "automaton/codepoint_set.h"
#include "automaton/regex.h"

namespace maskd::automaton_internal {

using RegexNodePtr = std::unique_ptr<RegexNode>;

inline RegexNodePtr MakeRegexNode(RegexNode::Kind kind) {
  auto n = std::make_unique<RegexNode>();
  n->kind = kind;
  return n;
}

// The inline flags in force (see docs/regex.md).
struct RegexFlags {
  bool fold_case = false;    // i: simple case folding
  bool dot_newline = false;  // s: '.' matches '\n' too
  bool extended = false;     // x: whitespace and #-comments outside classes ignored
};

// One parse of one pattern; `pattern` and `limits` outlive it.
class RegexTreeParser {
 public:
  RegexTreeParser(std::string_view pattern, const RegexLimits& limits) : p_(pattern), limits_(limits) {}

  absl::StatusOr<RegexNodePtr> Parse();

 private:
  // Whether the byte at `i` is preceded by an odd number of backslashes.
  bool EscapedAt(size_t i) const;

  // Out of line, taking a view: a literal message makes no std::string
  // temporary in the recursive parser's frames.
  ABSL_ATTRIBUTE_NOINLINE absl::Status Error(size_t offset, absl::string_view what) const;

  bool AtEnd() const { return pos_ >= end_; }
  char Peek() const { return p_[pos_]; }

  // Decodes one UTF-8 codepoint at pos_ (before end_).
  absl::StatusOr<uint32_t> NextCodepoint();

  absl::StatusOr<RegexNodePtr> ParseAlternation(int depth);

  absl::StatusOr<RegexNodePtr> ParseConcat(int depth);

  // Parses "{n}", "{n,}", "{n,m}" at pos_. Returns false (pos_ unchanged) when
  // the text is not a quantifier, in which case '{' is a literal (as in Python).
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<bool> ParseBraces(uint32_t* min, uint32_t* max);

  absl::StatusOr<RegexNodePtr> ParseRepeat(int depth);

  // Returns null for constructs that match the empty string and add nothing
  // (comments).
  absl::StatusOr<RegexNodePtr> ParseAtom(int depth);

  // In extended mode (x), skips whitespace and comments from '#' to the end of
  // the line.
  void SkipIgnored();

  // `s` closed under case-insensitive equality when the i flag is on.
  CodepointSet Folded(CodepointSet s) const;

  // A kSet node, counting its ranges against max_set_ranges unless another
  // node shares them (sets of a few ranges are bounded by the pattern's length).
  absl::StatusOr<RegexNodePtr> SetNode(size_t start, CodepointSet set);

  // A class item: `positive` (folded under i), complemented when `negated`.
  CodepointSet ItemSet(CodepointSet positive, bool negated) const;

  // An atom other than a group: the recursion's frames stay small (see
  // kMaxRegexNesting).
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<RegexNodePtr> ParseLeaf(bool top_level);

  absl::StatusOr<RegexNodePtr> ParseGroup(int depth);

  // Parses the flags of "(?flags)" or "(?flags:" with pos_ after "(?",
  // setting flags_; true for the scoped form (pos_ after ':'), false for the
  // bare one (pos_ after ')'), which sets the flags for the rest of the
  // enclosing group.
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<bool> ParseFlags(size_t start);

  // Consumes '(' and what follows it up to the group's body; false for a
  // whole (?#comment) or (?flags).
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<bool> ParseGroupOpen();

  // Parses \p{...}, \P{...} (`negate`), \pL or \PL with pos_ after the 'p'
  // or 'P' (at `start`, the backslash): the class folded under i, then
  // complemented for \P or \p{^..}. Sets escape_is_class_.
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<CodepointSet> ParseProperty(size_t start, bool negate);

  // Parses an escape at pos_ ('\\'): the codepoints of the escape or, when
  // `*negated` is set on return (\D \W \S), of its complement; for \p and \P
  // (escape_is_class_ set on return) the class itself, folded and negated as
  // it must be. In a class, \b is a backspace.
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<CodepointSet> ParseEscape(bool in_class, bool* negated);

  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<CodepointSet> ParseClass();

  std::string_view p_;
  const RegexLimits& limits_;
  size_t pos_ = 0;
  size_t end_ = 0;
  RegexFlags flags_;
  bool seen_atom_ = false;  // an atom was parsed (a later '^' is not at the start)
  bool escape_is_class_ = false;  // the last escape parsed was \p or \P
  // Sets by source: "p" or "P", "i" or "-" and a property name; "[", "i" or
  // "-" and a whole class.
  absl::flat_hash_map<std::string, CodepointSet> set_cache_;
  absl::flat_hash_set<const void*> counted_sets_;  // CodepointSet::storage() counted in set_ranges_
  size_t set_ranges_ = 0;
};

}  // namespace maskd::automaton_internal

#endif  // MASKD_AUTOMATON_INTERNAL_REGEX_TREE_PARSER_H_
