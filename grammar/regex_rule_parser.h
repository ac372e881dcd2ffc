// ParseRegexRule: one regex rule (grammar/regex_rules.h) as a syntax tree,
// as far as rule references matter: GrammarFromRegexRules' parser.
#ifndef MASKD_GRAMMAR_REGEX_RULE_PARSER_H_
#define MASKD_GRAMMAR_REGEX_RULE_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grammar/grammar.h"
#include "grammar/regex_rules.h"

namespace maskd::grammar::regex_rule_parser {

// A repeat's max for "*", "+" and "{m,}".
inline constexpr uint32_t kUnbounded = ~uint32_t{0};

// A regex rule's syntax tree, as far as references matter. A node without a
// reference is kept as its source text (`begin`, `end`), quantifiers included.
// When a reference-free text is parsed to be split (ParseRegexRule's split_top),
// its top level is kept as structure too: quantifiers as kRepeat, a plain
// group as its contents (begin and end still on its parentheses).
struct Node {
  enum class Kind : uint8_t { kText, kRef, kConcat, kAlternate, kRepeat };
  Kind kind = Kind::kText;
  size_t begin = 0, end = 0;  // source bytes [begin, end)
  uint32_t ref = 0;           // kRef: the rule
  uint32_t min = 0, max = 0;  // kRepeat
  bool has_ref = false;
  bool flags_only = false;    // kText: a standalone "(?i)"-style flag group
  bool has_flags = false;     // kConcat: holds a flags_only item
  std::vector<Node> kids;
};

// `text` is rule.regex, or a reference-free part of it to split (split_top:
// its top level kept as structure, see Node). Offsets are into `text`.
// INVALID_ARGUMENT naming the rule and the byte offset for bad syntax (a
// reference to a rule of num_rules or more, unbalanced parentheses, a flag
// group beside or around a reference); RESOURCE_EXHAUSTED past
// limits.max_nesting or limits.max_repeat.
absl::StatusOr<Node> ParseRegexRule(absl::string_view text, const RegexRule& rule, uint32_t num_rules,
                                    const GrammarLimits& limits, bool split_top);

}  // namespace maskd::grammar::regex_rule_parser

#endif  // MASKD_GRAMMAR_REGEX_RULE_PARSER_H_
