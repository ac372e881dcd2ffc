// The BNF front ends (grammar/bnf_parser.h) in three files: the lexical
// level (bnf_lexer.cc: positions, blanks, names, code points and escapes),
// the syntax (bnf_parser.cc: rules, sequences, literals, classes, groups)
// and the building of the Grammar (bnf_lowering.cc: terminals, helper rules
// for groups and repeats). One class reads both dialects; `dialect_` picks
// the lexical and layout rules that differ. Internal to maskd_grammar.
#ifndef MASKD_GRAMMAR_BNF_INTERNAL_H_
#define MASKD_GRAMMAR_BNF_INTERNAL_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "automaton/codepoint_set.h"
#include "grammar/bnf_parser.h"
#include "grammar/grammar.h"

namespace maskd::grammar::bnf_internal {

enum class Dialect { kGbnf, kEbnf };

inline bool IsDigit(char c) { return c >= '0' && c <= '9'; }
inline bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// A repeat operator's bounds: min to max copies, max none for unbounded.
struct Quantifier {
  uint64_t min = 0;
  std::optional<uint64_t> max;
};

// One parsed element of a sequence, before it is placed in a rule: nothing
// (an empty literal), one symbol, or a group not yet turned into a rule (a
// group of one alternative is inlined unless an operator needs one symbol).
struct Item {
  enum class Kind { kEmpty, kSymbol, kGroup };
  Kind kind = Kind::kEmpty;
  Symbol symbol;
  std::vector<std::vector<Symbol>> alternatives;  // kGroup
  size_t offset = 0;                              // where it starts in the text
};

class BnfParser {
 public:
  BnfParser(std::string_view text, Dialect dialect, const GrammarLimits& limits)
      : text_(text),
        dialect_(dialect),
        limits_(limits),
        max_nesting_(std::min(limits.max_nesting, kMaxBnfNesting)) {}

  absl::StatusOr<Grammar> Parse();

 private:
  // --- Positions and errors.
  SourcePos PosAt(size_t offset) const;
  absl::Status Error(size_t offset, const std::string& what) const {
    SourcePos p = PosAt(offset);
    return absl::InvalidArgumentError(
        absl::StrCat("line ", p.line, ", column ", p.column, ": ", what));
  }
  absl::Status Exhausted(size_t offset, const std::string& what) const {
    SourcePos p = PosAt(offset);
    return absl::ResourceExhaustedError(
        absl::StrCat("line ", p.line, ", column ", p.column, ": ", what));
  }

  // --- Lexical helpers.
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  bool IsNameChar(char c, bool first) const {
    if (dialect_ == Dialect::kGbnf) return IsAlpha(c) || IsDigit(c) || c == '-';
    return IsAlpha(c) || c == '_' || c == '-' || c == '.' || (!first && IsDigit(c));
  }
  // Skips blanks and # comments; newlines too when `newlines` is set. GBNF
  // rules end at a newline outside groups; EBNF always skips them.
  void SkipSpace(bool newlines);
  bool SkipsNewlines(bool nested) const { return dialect_ == Dialect::kEbnf || nested; }
  std::string_view ParseName();
  // At a `name ::=` (EBNF: where the sequence before it ends).
  bool AtRuleDefinition() const;
  // One code point of a literal or class: UTF-8 or an escape (pos_ at it,
  // not at the end).
  absl::StatusOr<uint32_t> ParseCodepoint(bool in_class);
  absl::StatusOr<uint32_t> ParseEscape(bool in_class);
  // The escape letter `c` read, its backslash at `start`.
  absl::StatusOr<uint32_t> GbnfEscape(char c, size_t start);
  absl::StatusOr<uint32_t> EbnfEscape(char c, bool in_class, size_t start);
  // min_digits to max_digits hex digits: a Unicode scalar value.
  absl::StatusOr<uint32_t> ParseHexEscape(int min_digits, int max_digits, size_t start);
  absl::Status BadEscape(char c, size_t start) const;
  absl::StatusOr<uint64_t> ParseCount();
  // An operator * + ? or {m} {m,} {m,n} (pos_ at its first character).
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<Quantifier> ParseQuantifier(bool skip_newlines);

  // --- Grammar structure.
  absl::Status ParseRule();
  absl::StatusOr<std::vector<std::vector<Symbol>>> ParseAlternates(bool nested);
  absl::StatusOr<std::vector<Symbol>> ParseSequence(bool nested);
  // Groups recurse: ParseElement -> ParseGroup -> ParseAlternates ->
  // ParseSequence -> ParseElement, kMaxBnfNesting times at most. Every other
  // kind of element is parsed out of line (ABSL_ATTRIBUTE_NOINLINE) so that
  // the frames on that path stay small: 1000 levels must fit a thread's
  // stack, under AddressSanitizer too (bnf_parser_test DeepNestingIsACleanError).
  absl::StatusOr<Item> ParseElement(bool nested);
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<Item> ParseGroup(size_t start);
  // ParseGroup's refusals: a lookahead, nesting past max_nesting_; no ')'.
  ABSL_ATTRIBUTE_NOINLINE absl::Status CheckGroupOpens(size_t start) const;
  ABSL_ATTRIBUTE_NOINLINE absl::Status CheckGroupCloses(size_t start) const;
  // ParseSequence's out-of-line parts: an EBNF rule definition must start a
  // line; an operator (pos_ at it) applied to `*last`.
  ABSL_ATTRIBUTE_NOINLINE absl::Status CheckRuleStartsLine() const;
  ABSL_ATTRIBUTE_NOINLINE absl::Status ParseOperatorOn(std::optional<Item>* last,
                                                        bool skip_newlines);
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<Item> ParseLiteral();
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<Item> ParseClass();
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<Item> ParseAnyCharacter(size_t start);
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<Item> ParseNamed(size_t start);
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<Item> ParseRegexMacro(size_t start);
  ABSL_ATTRIBUTE_NOINLINE absl::Status Unexpected(size_t start, char c) const;

  // --- Building.
  absl::StatusOr<uint32_t> RuleId(std::string_view name, size_t offset);
  absl::StatusOr<uint32_t> NewHelperRule(std::vector<std::vector<Symbol>> alternatives,
                                         size_t offset);
  absl::StatusOr<Item> TerminalItem(std::string name, std::string regex,
                                    std::optional<std::string> literal, bool repeatable,
                                    size_t offset);
  // A non-empty literal: the terminal of its code points, `literal` set.
  absl::StatusOr<Item> LiteralItem(const std::vector<uint32_t>& cps, std::string name,
                                   size_t offset);
  absl::StatusOr<Item> SetItem(const CodepointSet& set, std::string name, size_t offset);
  // A rule with no alternatives, which Normalize removes with every
  // alternative using it: what a class or Regex matching nothing lowers to.
  absl::StatusOr<Item> NeverItem(size_t offset);
  // The item as one symbol (a group becomes a helper rule); nullopt when it
  // derives only the empty string.
  absl::StatusOr<std::optional<Symbol>> AsSymbol(Item item);
  // The item repeated as `q` says; `offset` is the operator's.
  absl::StatusOr<Item> ApplyQuantifier(Item item, Quantifier q, size_t offset);
  // A repeatable terminal x repeated: one terminal whose regex counts.
  absl::StatusOr<Item> RepeatedTerminal(Symbol x, Quantifier q, size_t item_offset, size_t offset);
  // Any symbol x repeated: copies and helper rules.
  absl::StatusOr<Item> RepeatedSymbol(Symbol x, Quantifier q, size_t item_offset, size_t offset);
  absl::Status AppendItem(Item item, std::vector<Symbol>* seq);
  // Helper symbols for exactly / at most `k` copies of `x` (k >= 1).
  absl::StatusOr<Symbol> ExactCopies(Symbol x, uint64_t k, size_t offset,
                                     absl::flat_hash_map<uint64_t, Symbol>* memo);
  absl::StatusOr<Symbol> UpToCopies(Symbol x, uint64_t k, size_t offset,
                                    absl::flat_hash_map<uint64_t, Symbol>* memo);

  std::string_view text_;
  Dialect dialect_;
  GrammarLimits limits_;
  uint32_t max_nesting_;
  size_t pos_ = 0;
  size_t last_token_end_ = 0;  // end offset of the last element or operator
  uint32_t depth_ = 0;
  std::vector<size_t> line_starts_;

  Grammar g_;
  absl::flat_hash_map<std::string, uint32_t> rule_ids_;
  std::vector<std::optional<size_t>> defined_at_;  // per rule: offset of its definition
  std::vector<size_t> first_use_;                  // per rule: offset of its first use
  absl::flat_hash_map<std::string, uint32_t> terminal_ids_;  // by regex
  std::vector<bool> repeatable_;  // per terminal: a literal or class (not yet repeated)
  std::string current_rule_;
  absl::flat_hash_map<std::string, uint32_t> helper_counts_;
  std::optional<uint32_t> never_rule_;  // a rule deriving nothing: the empty class
  std::vector<bool> helper_;            // per rule id: made by lowering
};

}  // namespace maskd::grammar::bnf_internal

#endif  // MASKD_GRAMMAR_BNF_INTERNAL_H_
