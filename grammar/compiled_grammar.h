// CompiledGrammar: a validated Grammar in the form Earley parsers run on:
// numbered productions, nullability, and one DFA per terminal.
//
// Immutable once created; shared by the reference recognizer (earley.h), the
// incremental parser (earley_parser.h) and the token-mask engine
// (grammar_index.h).
#ifndef MASKD_GRAMMAR_COMPILED_GRAMMAR_H_
#define MASKD_GRAMMAR_COMPILED_GRAMMAR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "automaton/dfa.h"
#include "automaton/regex.h"
#include "grammar/grammar.h"
#include "grammar/terminal_dfas.h"

namespace maskd::grammar {

struct Production {
  uint32_t rule;
  std::vector<Symbol> rhs;
};

class CompiledGrammar {
 public:
  // Validates `g` (grammar.h's invariants) and compiles each terminal's regex;
  // a terminal that does not compile is an error naming it and its line and
  // column. ResourceExhausted when rules, terminals or productions reach 2^30.
  // With `dfas`, the terminals' DFAs are taken from (and added to) that cache.
  // `mode`: whole or lazy DFAs (terminal_dfas.h).
  static absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Create(
      const Grammar& g, const RegexLimits& regex_limits = {}, const DfaOptions& dfa_options = {},
      TerminalDfas* dfas = nullptr, TerminalMode mode = TerminalMode::kWhole);

  const std::vector<Production>& productions() const { return productions_; }
  // Production ids of rule `r`.
  const std::vector<uint32_t>& rule_productions(uint32_t r) const { return rule_productions_[r]; }
  size_t num_rules() const { return rule_productions_.size(); }
  size_t num_terminals() const { return dfas_.size(); }
  bool nullable_rule(uint32_t r) const { return nullable_rule_[r]; }
  // The terminal's DFA accepts at its start (matches the empty string).
  bool nullable_terminal(uint32_t t) const { return nullable_terminal_[t]; }
  const Dfa& dfa(uint32_t t) const { return *dfas_[t]; }
  // The terminal's language L is closed under concatenation (L L is within
  // L), so two of its strings in a row are also one of them (\s+, [a-z]*).
  // Computed for whole DFAs of at most kMaxClosedCheckStates states; false
  // above and for lazy ones (whose check would build their states).
  bool concat_closed(uint32_t t) const { return concat_closed_[t]; }
  static constexpr uint32_t kMaxClosedCheckStates = 512;
  const std::vector<uint32_t>& ignore() const { return ignore_; }
  uint32_t start() const { return start_; }

  // Shortest strings, in bytes (saturating at kNoLength): of rule `r`, and of
  // what is left of production `p` from rhs[pos] on (pos <= rhs.size()).
  static constexpr uint64_t kNoLength = ~uint64_t{0};
  uint64_t rule_min_length(uint32_t r) const { return rule_min_[r]; }
  uint64_t min_suffix_length(uint32_t p, uint32_t pos) const {
    return suffix_min_[suffix_begin_[p] + pos];
  }
  static uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
    return a > kNoLength - b ? kNoLength : a + b;
  }

 private:
  CompiledGrammar() = default;
  void ComputeMinLengths();

  std::vector<Production> productions_;
  std::vector<std::vector<uint32_t>> rule_productions_;
  std::vector<bool> nullable_rule_;
  std::vector<bool> nullable_terminal_;
  std::vector<bool> concat_closed_;
  std::vector<std::shared_ptr<const Dfa>> dfas_;
  std::vector<uint32_t> ignore_;
  uint32_t start_ = 0;
  std::vector<uint64_t> rule_min_;      // per rule
  std::vector<uint64_t> suffix_min_;    // per production, rhs.size() + 1 entries
  std::vector<size_t> suffix_begin_;    // per production, its first entry; then the end
};

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_COMPILED_GRAMMAR_H_
