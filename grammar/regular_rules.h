// InlineRegularRules: a grammar with each regular rule turned into one
// terminal, for engines that lex terminals with DFAs.
//
// Character-level grammars (GBNF, EBNF) spell lexemes as rules over one-
// character terminals: a JSON string is `"\"" ([^"\\] | "\\" ...)* "\""`. An
// Earley engine would then finish a terminal, and take a parser step, at
// every byte. Rules that are regular are better lexed whole by one DFA.
//
// A rule is regular here when each alternative uses only terminals, regular
// rules, and the rule itself only as its last symbol (R ::= a R | b, which
// is a* b) or its first (R ::= R a | b, which is b a*); with both kinds,
// R ::= a R | R c | b is a* b c*. Rules in a cycle through other rules are
// not. A regular rule referenced by a non-regular rule (or the start) becomes
// a terminal whose regex is the rule's language; the regular rules below it
// are inlined into that regex.
//
// The language is unchanged: without %ignore, a rule's strings are exactly
// its terminals' concatenations. Grammars with %ignore terminals are
// returned unchanged (an ignored string may come between a rule's symbols
// but never inside a terminal). A merged terminal is kept only when its
// regex has at most max_regex_bytes and max_terminal_nodes, its DFA compiles
// within the given limits, and it matches some non-empty string; otherwise
// the rule stays a rule and the regular rules it references become
// terminals instead.
#ifndef MASKD_GRAMMAR_REGULAR_RULES_H_
#define MASKD_GRAMMAR_REGULAR_RULES_H_

#include <cstddef>

#include "automaton/dfa.h"
#include "automaton/regex.h"
#include "grammar/grammar.h"
#include "grammar/terminal_dfas.h"

namespace maskd::grammar {

struct InlineOptions {
  size_t max_regex_bytes = 1 << 14;
  // Syntax nodes with counted repeats expanded (Regex::expanded_size): what
  // a terminal's NFA, built whole at compile, grows with. A few bytes of
  // regex can expand past it (an object inside `{0,99}`); the parser then
  // steps over the repeats' rules instead. 0: no cap. (A DFA already in
  // `dfas` is used whatever its size: it costs nothing more.)
  size_t max_terminal_nodes = 1 << 14;
  RegexLimits regex_limits;
  DfaOptions dfa_options;
  TerminalDfas* dfas = nullptr;  // where the merged terminals' DFAs are looked up
  TerminalMode mode = TerminalMode::kWhole;  // how they are built
};

// `g` must satisfy Validate; so does the result.
Grammar InlineRegularRules(const Grammar& g, const InlineOptions& options = {});

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_REGULAR_RULES_H_
