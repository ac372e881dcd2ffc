// RegexLanguage: facts about the language of a regex syntax tree, decided on
// the tree itself (no automaton): whether it matches any string at all, and
// whether it matches a non-empty one. Internal to grammar/.
#ifndef MASKD_GRAMMAR_REGEX_LANGUAGE_H_
#define MASKD_GRAMMAR_REGEX_LANGUAGE_H_

#include "automaton/regex.h"

namespace maskd::grammar {

struct RegexLanguage {
  bool any = false;        // some string matches (maybe only the empty one)
  bool non_empty = false;  // some non-empty string matches
};

// Iterative: trees may be as deep as kMaxRegexNesting.
RegexLanguage AnalyzeRegex(const RegexNode& root);

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_REGEX_LANGUAGE_H_
