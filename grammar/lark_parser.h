// ParseLark: a Lark grammar (the subset Outlines and llguidance use) into
// the common Grammar form (grammar/grammar.h).
//
// The language is that of lark.Lark(text, parser="earley",
// lexer="dynamic_complete"): every split of the text into terminals counts.
// Supported (docs/grammars.md, "Lark"):
//   - rules (lowercase names; `?rule` and `!rule` modifiers, `-> alias` and
//     rule priorities `.n` accepted, none changes the language) and templates
//     `name{a, b}: ...` used as `name{x, y}`;
//   - terminals (UPPERCASE names, priorities `.n` kept in
//     Terminal::priority), defined from strings, `"lit"i`, `/regex/flags`,
//     ranges `"a".."z"` and other terminals; each is inlined into one maskd
//     regex; a terminal defined in terms of itself is an error;
//   - operators `? * +`, `~ n`, `~ n..m`, `[x]`, `( )`, `|`; comments `//`
//     and `#`; a newline ends a definition unless the next line starts
//     with `|`;
//   - `%import common.NAME [-> ALIAS]`, `%import common (A, B)` for Lark's
//     common terminals (maskd's own definitions of what they mean, plus
//     Outlines' UNESCAPED_STRING), `%ignore` of terminal names, strings,
//     regexes or their combinations, `%override` and `%extend` of rules and
//     terminals defined earlier.
// Regexes are Python `re` patterns translated by grammar/python_regex.h
// (Unicode \d \w \s, exact i/s/x flags). Refused with an error: %declare
// (needs an external lexer), imports from other modules, terminals matching
// the empty string (Lark's Earley refuses them too). Names, directives and
// modifiers are lexed as Lark's own lexer does.
//
// One known difference in language: Lark's %ignore takes the greedy match
// only, the common form any match, so an ignored line comment may end
// before the end of its line here (docs/grammars.md, "Where maskd and Lark
// can differ").
//
// Errors are INVALID_ARGUMENT "line L, column C: <what>"; passing a
// GrammarLimits bound is RESOURCE_EXHAUSTED naming the limit. Recursion is
// bounded by limits.max_nesting (at most 1000). The result has been through
// Normalize.
#ifndef MASKD_GRAMMAR_LARK_PARSER_H_
#define MASKD_GRAMMAR_LARK_PARSER_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "grammar/grammar.h"

namespace maskd::grammar {

// `start` names the start rule.
absl::StatusOr<Grammar> ParseLark(std::string_view text, const GrammarLimits& limits = {},
                                  std::string_view start = "start");

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_LARK_PARSER_H_
