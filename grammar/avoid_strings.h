// RegexAvoiding: the regex (maskd syntax) of every UTF-8 text that contains
// none of some strings, for free text between structural tags: text in which
// a trigger such as "<tool_call>" may only appear where a tag begins.
//
// Construction: the Aho-Corasick automaton of the strings over code points
// (its states are the strings' proper prefixes that end no string), each
// edge labelled with a code-point class, turned into a regex by state
// elimination. Every state accepts. Size: the automaton has at most
// 1 + total code points states; the regex grows with the strings' overlaps
// and is refused past `max_regex_bytes`.
#ifndef MASKD_GRAMMAR_AVOID_STRINGS_H_
#define MASKD_GRAMMAR_AVOID_STRINGS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace maskd::grammar {

struct AvoidLimits {
  size_t max_code_points = 512;      // in all the strings together
  size_t max_regex_bytes = 1 << 16;  // of the result
};

// InvalidArgument for an empty string or malformed UTF-8 (naming its index),
// ResourceExhausted past a limit (naming it). No strings: any text.
absl::StatusOr<std::string> RegexAvoiding(const std::vector<std::string>& strings,
                                          const AvoidLimits& limits = {});

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_AVOID_STRINGS_H_
