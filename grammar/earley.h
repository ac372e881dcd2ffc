// EarleyRecognizer: a reference recognizer for a Grammar over bytes.
//
// The correctness oracle for grammar engines, not a fast path: it decides
// membership in the language grammar.h defines, byte by byte, with no lexer.
// Each terminal is compiled to an automaton/dfa.h Dfa and scanned inside Earley
// items (earley_item.h: terminal, DFA state, origin), so every split of the text into
// terminals counts; %ignore terminals may match before, after and between the
// symbols of every alternative (each dot position may absorb ignored
// strings; the incremental parser, earley_parser.h, absorbs them only
// between terminals: the same language in fewer items). Nullable rules and
// terminals are handled the Aycock-Horspool way
// (predicting a nullable symbol also steps over it), so left recursion, right
// recursion, empty rules and ambiguity all work.
//
// Work is bounded per byte: an Earley set holding more than
// EarleyOptions::max_items_per_position items, or costing more than
// max_steps_per_position steps to build (a step: one item added or found
// already there, by a prediction, completion or scan), stops the run with
// RESOURCE_EXHAUSTED naming the byte offset and the limit. Without them an
// ambiguous grammar holds O(n) items per set (productions x origins x DFA
// states) and a completion may revisit every item of its origin set, so a
// set could cost O(n^2) steps.
//
// Thread-safe: the methods are const and keep no state between calls.
#ifndef MASKD_GRAMMAR_EARLEY_H_
#define MASKD_GRAMMAR_EARLEY_H_

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "automaton/dfa.h"
#include "grammar/compiled_grammar.h"
#include "grammar/grammar.h"

namespace maskd::grammar {

struct EarleyOptions {
  size_t max_items_per_position = 1 << 20;
  size_t max_steps_per_position = 1 << 24;
  // Items in all the sets of an incremental parser together (earley_parser.h;
  // about 20 bytes each): bounds one sequence's memory.
  size_t max_chart_items = 1 << 22;
  RegexLimits regex_limits;  // for the terminals' regexes
  DfaOptions dfa_options;    // for the terminals' DFAs
  // Whole (the default) or lazy terminal DFAs (terminal_dfas.h), for a
  // GrammarIndex, whose GrammarGuide tells a lazy DFA's refused state from a
  // rejected byte. EarleyRecognizer, the reference, builds whole DFAs.
  TerminalMode terminal_mode = TerminalMode::kWhole;
};

class EarleyRecognizer {
 public:
  // Validates `g` (grammar.h's invariants) and compiles its terminals.
  static absl::StatusOr<EarleyRecognizer> Create(const Grammar& g,
                                                 const EarleyOptions& options = {});

  // Whether `text` is in the grammar's language.
  absl::StatusOr<bool> Accepts(std::string_view text) const;
  // Whether some continuation of `prefix` is accepted (the empty continuation
  // included). Exact under Validate's invariants: every rule derives a string
  // and every live DFA state reaches acceptance.
  absl::StatusOr<bool> IsViablePrefix(std::string_view prefix) const;
  // The bytes b for which prefix + b is a viable prefix (empty when `prefix`
  // is not viable).
  absl::StatusOr<std::bitset<256>> NextBytes(std::string_view prefix) const;

 private:
  struct Chart;

  EarleyRecognizer() = default;
  // Runs the recognizer over `text`, leaving every Earley set in `chart`.
  absl::Status Run(std::string_view text, Chart* chart) const;

  std::shared_ptr<const CompiledGrammar> g_;
  size_t max_items_ = 0;
  size_t max_steps_ = 0;
};

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_EARLEY_H_
