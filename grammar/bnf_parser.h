// BNF front ends: llama.cpp's GBNF and XGrammar's EBNF into a Grammar.
//
// Both dialects write rules as `name ::= alternatives`, with "..." literals,
// [...] / [^...] character classes over Unicode code points, ( ) groups, `|`,
// and the operators * + ? {m} {m,} {m,n}; the start rule is `root`, and
// neither has %ignore. They differ in layout and lexical details
// (docs/grammars.md has the full table):
//
//   GBNF (llama.cpp)            rule names [a-zA-Z0-9-]+; a rule ends at a
//                               newline outside parentheses (a line may end
//                               in `|` and continue); `.` is any character;
//                               escapes \x.. (2 digits) \u.... \U........
//                               \t \r \n \\ \" \[ \].
//   EBNF (XGrammar)             rule names [a-zA-Z_.-][a-zA-Z0-9_.-]*; layout
//                               free, a rule runs up to the next `name ::=`
//                               that starts a line; no `.`; C escapes
//                               (\' \" \? \\ \a \b \f \n \r \t \v \0 \e,
//                               \x with any number of digits, \u, \U) and,
//                               inside classes, \ before any of ^$.*+?()[]{}|/-;
//                               `Regex("...")` is a terminal in maskd's regex
//                               syntax.
//
// Output: literals and classes become terminals (one per distinct regex;
// `literal` set when the terminal is one fixed string), groups and operators
// become helper rules named "<rule>__<n>"; a repeated terminal becomes one
// terminal (`[0-9]+` is the terminal /[0-9]+/, which is the same language
// since a Grammar has no maximal munch and these dialects no %ignore).
// Helper rules and symbols grow linearly with the text: a counted repeat
// {m,n} of a group costs O(log n) helper rules. Normalize runs last, so
// alternatives through rules deriving nothing are dropped.
//
// Errors: INVALID_ARGUMENT "line L, column C: <what>" (1-based, columns in
// bytes) for malformed text, undefined or twice-defined rules, bad escapes and
// ranges, a missing `root`, and constructs outside the supported subset
// (GBNF token references <...>, EBNF lookahead (= ...), TagDispatch and
// other macros, rule attributes); RESOURCE_EXHAUSTED naming the GrammarLimits
// field for a limit passed. Group nesting is bounded by
// min(limits.max_nesting, kMaxBnfNesting), which bounds the parser's stack.
#ifndef MASKD_GRAMMAR_BNF_PARSER_H_
#define MASKD_GRAMMAR_BNF_PARSER_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "grammar/grammar.h"

namespace maskd::grammar {

// The deepest group nesting any limits allow: each level costs the parser a
// few hundred bytes of stack, so this keeps it under 1 MiB.
inline constexpr uint32_t kMaxBnfNesting = 1000;

absl::StatusOr<Grammar> ParseGbnf(std::string_view text, const GrammarLimits& limits = {});
absl::StatusOr<Grammar> ParseXgrammarEbnf(std::string_view text, const GrammarLimits& limits = {});

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_BNF_PARSER_H_
