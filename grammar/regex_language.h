// RegexLanguage: facts about the language of a regex syntax tree, decided on
// the tree itself (no automaton): whether it matches any string at all,
// whether it matches a non-empty one, the empty one, its shortest match, and
// bounds on what its automaton holds. Internal to grammar/.
#ifndef MASKD_GRAMMAR_REGEX_LANGUAGE_H_
#define MASKD_GRAMMAR_REGEX_LANGUAGE_H_

#include <array>
#include <bitset>
#include <cstdint>

#include "automaton/regex.h"

namespace maskd::grammar {

struct RegexLanguage {
  static constexpr uint64_t kNoMatch = ~uint64_t{0};
  bool any = false;        // some string matches (maybe only the empty one)
  bool non_empty = false;  // some non-empty string matches
  bool nullable = false;   // the empty string matches
  // Fewest UTF-8 bytes of a match (kNoMatch when none): the DFA's
  // DistanceToAccept from its start.
  uint64_t min_bytes = kNoMatch;
  // At least the states of the NFA automaton/nfa.cc builds for the regex
  // (its match state included; saturating at kNoMatch).
  uint64_t nfa_states = 0;
  // Every byte of the UTF-8 of every match, and maybe more (a superset of
  // the DFA's LiveBytes): bit b & 63 of word b >> 6 for byte b.
  std::array<uint64_t, 4> bytes = {};
  std::bitset<256> ByteSet() const;
};

// Iterative: trees may be as deep as kMaxRegexNesting.
RegexLanguage AnalyzeRegex(const RegexNode& root);

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_REGEX_LANGUAGE_H_
