// CompiledGrammar: a validated Grammar in the form Earley parsers run on:
// numbered productions, nullability, and one DFA per terminal.
//
// Immutable once created but for its deferred terminal DFAs, each built once
// when first asked for (deferred_dfa.h); shared by the reference recognizer
// (earley.h), the incremental parser (earley_parser.h) and the token-mask
// engine (grammar_index.h), from any thread.
#ifndef MASKD_GRAMMAR_COMPILED_GRAMMAR_H_
#define MASKD_GRAMMAR_COMPILED_GRAMMAR_H_

#include <atomic>
#include <bitset>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "automaton/dfa.h"
#include "automaton/regex.h"
#include "grammar/deferred_dfa.h"
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
  // `mode`: whole or lazy DFAs (terminal_dfas.h); in lazy mode a terminal
  // whose build no limit can refuse (DeferredBuild::Deferrable) is only
  // parsed here, and its DFA built when first asked for (deferred_dfa.h).
  static absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Create(
      const Grammar& g, const RegexLimits& regex_limits = {}, const DfaOptions& dfa_options = {},
      std::shared_ptr<TerminalDfas> dfas = nullptr, TerminalMode mode = TerminalMode::kWhole);

  const std::vector<Production>& productions() const { return productions_; }
  // Production ids of rule `r`.
  const std::vector<uint32_t>& rule_productions(uint32_t r) const { return rule_productions_[r]; }
  size_t num_rules() const { return rule_productions_.size(); }
  size_t num_terminals() const { return terminals_.size(); }
  bool nullable_rule(uint32_t r) const { return nullable_rule_[r]; }
  // The terminal's DFA accepts at its start (matches the empty string).
  bool nullable_terminal(uint32_t t) const { return nullable_terminal_[t]; }
  // The terminal's DFA, built by this call when it was deferred. One load
  // from a flat array once built (the parser asks per item and byte).
  const Dfa& dfa(uint32_t t) const {
    const Dfa* dfa = dfa_of_[t].load(std::memory_order_acquire);
    return dfa != nullptr ? *dfa : BuildDfa(t);
  }
  // The terminal's DFA when built, else null (builds nothing).
  const Dfa* built_dfa(uint32_t t) const { return terminals_[t]->IfBuilt(); }
  // Whether the terminal's DFA was left to its first use (then built_dfa
  // may change from null to the DFA at any time, on any thread).
  bool deferred(uint32_t t) const { return terminals_[t]->deferred(); }
  bool has_deferred() const { return deferred_ != nullptr; }
  // OK, or the error of the first deferred build that failed (its walk was
  // refused: deferred_dfa.h).
  absl::Status DeferredError() const;
  // Bytes some state of the terminal's DFA takes to a live state, or more:
  // Dfa::LiveBytes, or for a deferred terminal the bytes of its regex.
  const std::bitset<256>& live_bytes(uint32_t t) const { return live_bytes_[t]; }
  // The terminal's language L is closed under concatenation
  // (terminal_dfas.h: ConcatClosed); false for a deferred terminal until
  // its DFA is built.
  bool concat_closed(uint32_t t) const { return terminals_[t]->concat_closed(); }
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
  // Appends terminal `t`'s DFA (built now, or deferred in lazy mode) and
  // facts; an error names the terminal.
  absl::Status AddTerminal(const Terminal& t, const RegexLimits& regex_limits,
                           const DfaOptions& dfa_options, const std::shared_ptr<TerminalDfas>& dfas,
                           TerminalMode mode);
  void ComputeMinLengths();
  // terminals_[t]->Get(), noted in dfa_of_ when built.
  const Dfa& BuildDfa(uint32_t t) const;

  std::vector<Production> productions_;
  std::vector<std::vector<uint32_t>> rule_productions_;
  std::vector<bool> nullable_rule_;
  std::vector<bool> nullable_terminal_;
  std::vector<uint64_t> terminal_min_;  // per terminal: its shortest match, in bytes
  std::vector<std::bitset<256>> live_bytes_;
  std::vector<std::unique_ptr<DeferredDfa>> terminals_;
  // Per terminal: its DFA once built, else null (terminals_[t]->IfBuilt()).
  std::unique_ptr<std::atomic<const Dfa*>[]> dfa_of_;
  std::shared_ptr<DeferredBuild> deferred_;  // null when no terminal is deferred
  std::vector<uint32_t> ignore_;
  uint32_t start_ = 0;
  std::vector<uint64_t> rule_min_;      // per rule
  std::vector<uint64_t> suffix_min_;    // per production, rhs.size() + 1 entries
  std::vector<size_t> suffix_begin_;    // per production, its first entry; then the end
};

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_COMPILED_GRAMMAR_H_
