// Grammar: a context-free grammar over bytes, the one form every grammar
// front end (Lark, GBNF, XGrammar's EBNF) produces and every grammar engine
// consumes.
//
// Symbols are terminals and rules. A terminal is a regular language over
// bytes, written in maskd's regex syntax (docs/regex.md) and matched whole:
// its text never contains an ignored string. A rule is a list of
// alternatives, each a sequence of symbols (an empty sequence derives the
// empty string). Front ends lower EBNF operators (groups, ?, *, +, {m,n})
// into helper rules, so a Grammar is plain BNF.
//
// Language: every byte string derivable from `start`, where before, after
// and between any two symbols of a sequence any number of strings matched by
// an `ignore` terminal may appear (Lark's %ignore; GBNF and EBNF have none).
// Every way of splitting a text into terminals counts (no maximal munch):
// the language of Lark's Earley parser with lexer="dynamic_complete".
// Priorities do not change the language.
//
// Invariants after Validate: every Symbol id indexes its table; `start`
// names a rule; every rule derives at least one string and is reachable
// from `start`; every terminal matches at least one non-empty string.
#ifndef MASKD_GRAMMAR_GRAMMAR_H_
#define MASKD_GRAMMAR_GRAMMAR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace maskd::grammar {

// 1-based line and column (in bytes) of a construct in the grammar text.
struct SourcePos {
  uint32_t line = 0;
  uint32_t column = 0;
};

struct Symbol {
  enum class Kind : uint8_t { kTerminal, kRule };
  Kind kind = Kind::kTerminal;
  uint32_t id = 0;  // index into Grammar::terminals or Grammar::rules

  static Symbol Terminal(uint32_t id) { return {Kind::kTerminal, id}; }
  static Symbol Rule(uint32_t id) { return {Kind::kRule, id}; }
  bool is_terminal() const { return kind == Kind::kTerminal; }
  friend bool operator==(const Symbol& a, const Symbol& b) {
    return a.kind == b.kind && a.id == b.id;
  }
};

struct Terminal {
  std::string name;   // as written ("NUMBER"), or the quoted literal ("\"{\"")
  std::string regex;  // maskd regex syntax, matched in full
  // Set when the terminal is one fixed string (engines may force it).
  std::optional<std::string> literal;
  int priority = 0;   // Lark's terminal priority; 0 when none
  SourcePos where;
};

struct Rule {
  std::string name;  // as written, or "<origin>__<n>" for a lowered operator
  std::vector<std::vector<Symbol>> alternatives;
  SourcePos where;
};

struct Grammar {
  std::vector<Terminal> terminals;
  std::vector<Rule> rules;
  uint32_t start = 0;           // a rule id
  std::vector<uint32_t> ignore;  // terminal ids
};

// Bounds on a grammar text and what it lowers to; every front end takes them
// and answers RESOURCE_EXHAUSTED naming the limit when one is passed.
struct GrammarLimits {
  size_t max_text_bytes = 1 << 20;
  uint32_t max_rules = 10000;          // after lowering
  uint32_t max_terminals = 10000;
  uint32_t max_symbols = 1000000;      // in all alternatives together
  uint32_t max_nesting = 256;          // groups inside groups: bounds parser recursion
  uint32_t max_repeat = 1000;          // the largest m or n in {m,n}
};

// Drops the alternatives that use a rule deriving no string, then the rules
// unreachable from `start` (ids renumbered, order kept). INVALID_ARGUMENT
// when `start` derives no string. Every front end calls it last.
absl::Status Normalize(Grammar* g);

// Checks the invariants above (INVALID_ARGUMENT naming the rule or terminal
// and its position: "rule 'value' (line 3, column 1) derives no string").
absl::Status Validate(const Grammar& g);

// Validate without the terminals' own invariant (that each regex parses and
// matches a non-empty string): for callers that build every terminal's DFA
// next and check it there (CompiledGrammar::Create), so a large grammar's
// terminals are not parsed once more only to be checked.
absl::Status ValidateRules(const Grammar& g);

// The grammar as BNF text, one rule per line, terminals by name, for error
// messages, tests and `maskctl grammar`. Deterministic.
std::string ToText(const Grammar& g);

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_GRAMMAR_H_
