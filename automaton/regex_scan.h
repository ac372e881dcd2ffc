// Lexical scanning of maskd's regex syntax (docs/regex.md) for code that
// splices regex text without parsing it into a tree: where an escape or a
// character class ends. Regex::Parse is the authority on what the text means;
// this only finds extents, so that a '(' or '|' inside an escape or a class
// is never taken for structure.
#ifndef MASKD_AUTOMATON_REGEX_SCAN_H_
#define MASKD_AUTOMATON_REGEX_SCAN_H_

#include <cstddef>
#include <string_view>

namespace maskd {

// `p[i]` is '\\' or '['. The index just past the escape (`\c`; `\p{..}`,
// `\P{..}`, `\x{..}`, `\u{..}`; `\xHH`; `\uHHHH`) or the class (`[`, an
// optional `^`, a leading `]` taken as itself, escapes skipped, up to the
// closing `]`) that starts there; std::string_view::npos when the text ends
// first.
size_t RegexEscapeOrClassEnd(std::string_view p, size_t i);

}  // namespace maskd

#endif  // MASKD_AUTOMATON_REGEX_SCAN_H_
