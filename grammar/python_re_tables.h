// The codepoint data Python's `re` uses on str patterns, generated from
// Python itself by grammar/gen_python_re_tables.py (see the .cc header for
// the Python and Unicode versions). Lark terminals are Python regexes, so
// translating them exactly needs these rather than maskd's ASCII classes.
#ifndef MASKD_GRAMMAR_PYTHON_RE_TABLES_H_
#define MASKD_GRAMMAR_PYTHON_RE_TABLES_H_

#include <cstddef>
#include <cstdint>

namespace maskd::grammar::python_re {

struct CodepointRange {
  uint32_t lo, hi;  // closed
};

extern const char kUnicodeVersion[];

// \d, \w, \s (their complements are \D, \W, \S).
extern const CodepointRange kDigit[], kWord[], kSpace[];
extern const size_t kDigit_size, kWord_size, kSpace_size;
// The codepoints whose simple lowercase form is in \d, \w, \s: what those
// classes match inside a case-insensitive class that has cased members.
extern const CodepointRange kDigitLowered[], kWordLowered[], kSpaceLowered[];
extern const size_t kDigitLowered_size, kWordLowered_size, kSpaceLowered_size;
// Codepoints with a case (re's iscased: lowercase or uppercase differs).
extern const CodepointRange kCased[];
extern const size_t kCased_size;

// Case-insensitive equivalence groups of two or more codepoints: group i is
// kCaseGroupMembers[kCaseGroupStarts[i] .. kCaseGroupStarts[i + 1]), sorted.
// Under (?i) a cased codepoint matches exactly its group.
extern const uint32_t kCaseGroupMembers[];
extern const uint32_t kCaseGroupStarts[];
extern const size_t kCaseGroupCount;

}  // namespace maskd::grammar::python_re

#endif  // MASKD_GRAMMAR_PYTHON_RE_TABLES_H_
