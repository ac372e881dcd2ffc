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
// repeat X* is the left-recursive helper H := ε | H X; X{m,n} is O(log n)
// rules over binary powers of X). A reference-free part over the
// TerminalLimits is lowered the same way, at its top-level operators, until
// each piece fits. The language is exactly the rules'.
#ifndef MASKD_GRAMMAR_REGEX_RULES_H_
#define MASKD_GRAMMAR_REGEX_RULES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "automaton/dfa.h"
#include "automaton/regex.h"
#include "grammar/grammar.h"

namespace maskd::grammar {

struct RegexRule {
  std::string name;   // for messages and ToText (e.g. a JSON pointer)
  std::string regex;  // maskd regex syntax plus `(?&k)` references
};

// The most one terminal may be: the limits its regex is compiled under
// (CompiledGrammar::Create's). A reference-free part whose regex is over
// regex.max_nodes (counted repeats expanded) or regex.max_set_ranges, or whose
// DFA needs more than dfa.max_states states, is split at its top-level
// alternation, concatenation or quantifier into rules over smaller pieces,
// recursively; a piece with no such operator left keeps the limit's error.
// regex.max_pattern_bytes is raised to each part's length (max_text_bytes
// bounds the text). dfa.deadline and dfa.cancel bound the DFA checks.
struct TerminalLimits {
  RegexLimits regex;
  DfaOptions dfa;
  // False: no part's DFA is built here, only the regex limits split parts.
  // For a caller that builds the terminals' DFAs next anyway and lowers
  // again with true only when one is over dfa.max_states.
  bool check_dfa = true;
};

// rules[start] is the start rule. INVALID_ARGUMENT naming the rule and the
// byte offset for a reference to a missing rule or unbalanced parentheses;
// RESOURCE_EXHAUSTED past `limits` (rules, terminals, symbols, nesting,
// repeat bounds; max_text_bytes bounds the regexes' bytes together).
// The result is normalized (Normalize): INVALID_ARGUMENT when the start rule
// derives no string.
absl::StatusOr<Grammar> GrammarFromRegexRules(const std::vector<RegexRule>& rules, uint32_t start,
                                              const GrammarLimits& limits,
                                              const TerminalLimits& terminal = {});

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_REGEX_RULES_H_
