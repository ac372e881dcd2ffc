// The regex parser behind Regex::Parse (automaton/regex.h): pattern text to
// syntax tree. Internal to automaton/.
#ifndef MASKD_AUTOMATON_INTERNAL_REGEX_PARSER_H_
#define MASKD_AUTOMATON_INTERNAL_REGEX_PARSER_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "automaton/regex.h"

namespace maskd::automaton_internal {

// The syntax tree of `pattern` (a leading '^' and trailing unescaped '$'
// dropped). InvalidArgument naming the construct and its byte offset;
// ResourceExhausted past `limits` (nesting, class and repeat sizes). Regex::
// Parse checks the pattern's byte size and expanded node count around it.
absl::StatusOr<std::unique_ptr<RegexNode>> ParseRegexTree(std::string_view pattern,
                                                          const RegexLimits& limits);

}  // namespace maskd::automaton_internal

#endif  // MASKD_AUTOMATON_INTERNAL_REGEX_PARSER_H_
