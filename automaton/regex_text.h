// Writing maskd's regex syntax (docs/regex.md): literal text escaped, code
// points and code point sets spelled. Every writer of regex text (the JSON
// Schema converter, the GBNF/EBNF and Lark front ends, the Python regex
// translator, the avoid-strings rewriter) spells characters through this
// header; regex_scan.h finds extents in such text and Regex::Parse reads it.
//
// Each front end keeps the spelling it has always written (the regexes and
// the tests that pin them stay byte for byte): the spellings below differ
// only in which characters are written as themselves, and every spelling of
// a code point reads back as that code point.
#ifndef MASKD_AUTOMATON_REGEX_TEXT_H_
#define MASKD_AUTOMATON_REGEX_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "automaton/codepoint_set.h"

namespace maskd {

// `literal`'s bytes as regex text matching exactly them, outside a class:
// the metacharacters . ^ $ | ? * + ( ) [ ] { } \ backslashed, control bytes
// (below 0x20, and 0x7F) as \xhh, every other byte (UTF-8 included) as
// itself.
std::string RegexEscape(std::string_view literal);

// `literal`'s bytes as members of a class [...]: \ ] [ ^ - backslashed,
// every other byte as itself (controls too).
std::string RegexClassEscape(std::string_view literal);

// How one code point is written.
enum class CodepointSpelling {
  // Outside a class only: RegexEscape of its UTF-8. (JSON Schema.)
  kLiteral,
  // Inside a class only: controls (below 0x20, and 0x7F) as \xhh, else
  // RegexClassEscape of its UTF-8. (JSON Schema.)
  kClassMember,
  // ASCII letters and digits as themselves, other printable ASCII
  // backslashed, everything else as \x{h} (lowercase hex). (GBNF/EBNF.)
  kAlnumElseEscaped,
  // Printable ASCII other than . ^ $ | ? * + ( ) [ ] { } \ - # and space,
  // and everything from U+00A0 but U+2028/U+2029, as themselves (UTF-8);
  // everything else as \x{H} (uppercase hex). (Python regex, Lark.)
  kPrintableElseHex,
};

enum class HexDigits { kLower, kUpper };

// Appends `cp` as \x{H}: hex digits without leading zeros, in `digits` case
// (the avoid-strings rewriter writes every code point so, in lowercase).
void AppendHexEscape(std::string* out, uint32_t cp, HexDigits digits);

// Appends `cp` (at most kMaxCodepoint) spelled as `spelling` says.
void AppendCodepoint(std::string* out, uint32_t cp, CodepointSpelling spelling);

// Appends `set`: its one code point spelled `alone` when it has a single
// one, else a class [...] of its ranges, each end spelled `in_class`, lo-hi
// (two adjacent code points written one after the other). An empty set is
// "[]", which the regex parser does not read: callers write the empty
// language their own way.
void AppendCodepointSet(std::string* out, const CodepointSet& set, CodepointSpelling alone,
                        CodepointSpelling in_class);

}  // namespace maskd

#endif  // MASKD_AUTOMATON_REGEX_TEXT_H_
