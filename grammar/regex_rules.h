// Regex rules: a grammar written as regexes that name each other.
//
// Each rule is a regex in maskd's syntax (docs/regex.md) in which `(?&k)`,
// k a decimal index into the rule list, stands for rule k's language. A set
// of such rules is a context-free grammar: references may recurse. This is
// the form in which the JSON Schema converter (schema/json_schema_rules.h)
// hands over a schema that no single regex holds (recursive $ref, any-value
// nesting without a bound, schemas whose regex is too large).
//
// GrammarFromRegexRules lowers the rules into the common Grammar form: every
// maximal part of a regex that contains no reference becomes one terminal
// (its text verbatim), the operators around references become rules (a
// repeat X* is the left-recursive helper H := ε | H X; X{m,n} is m copies
// then n-m nested optional ones). The language is exactly the rules'.
#ifndef MASKD_GRAMMAR_REGEX_RULES_H_
#define MASKD_GRAMMAR_REGEX_RULES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/grammar.h"

namespace maskd::grammar {

struct RegexRule {
  std::string name;   // for messages and ToText (e.g. a JSON pointer)
  std::string regex;  // maskd regex syntax plus `(?&k)` references
};

// rules[start] is the start rule. INVALID_ARGUMENT naming the rule and the
// byte offset for a reference to a missing rule or unbalanced parentheses;
// RESOURCE_EXHAUSTED past `limits` (rules, terminals, symbols, nesting,
// repeat bounds; max_text_bytes bounds the regexes' bytes together).
// The result is normalized (Normalize): INVALID_ARGUMENT when the start rule
// derives no string.
absl::StatusOr<Grammar> GrammarFromRegexRules(const std::vector<RegexRule>& rules, uint32_t start,
                                              const GrammarLimits& limits);

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_REGEX_RULES_H_
