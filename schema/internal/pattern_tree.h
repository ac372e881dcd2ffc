// The syntax tree of a JSON Schema `pattern` (ECMA-262 syntax) and its
// parser (pattern_parser.cc). Internal to maskd_schema.
#ifndef MASKD_SCHEMA_INTERNAL_PATTERN_TREE_H_
#define MASKD_SCHEMA_INTERNAL_PATTERN_TREE_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "automaton/codepoint_set.h"

namespace maskd::json_schema_internal {

// One node of a pattern. kSet: one character of `set` (which may hold
// surrogates, never encodable: the emitter drops them). kCat, kAlt: the
// concatenation, the alternation of `kids`. kRep: kids[0] repeated `min` to
// `max` times. kEmpty: the empty string. kBol, kEol: ^ and $ (and \A, \Z).
struct PNode {
  enum Kind { kSet, kCat, kAlt, kRep, kEmpty, kBol, kEol } kind = kEmpty;
  CodepointSet set;
  std::vector<PNode> kids;
  int min = 0, max = -1;  // -1: unbounded
};

// Parses `utf8` (a pattern as JSON text decodes it; a byte that is not
// well-formed UTF-8 reads as the codepoint of its value). Groups nest at most
// `max_nesting` deep (clamped to [1, kMaxPatternNesting]). Errors are
// InvalidArgument naming the byte offset.
absl::StatusOr<PNode> ParsePattern(std::string_view utf8, int max_nesting);

}  // namespace maskd::json_schema_internal

#endif  // MASKD_SCHEMA_INTERNAL_PATTERN_TREE_H_
