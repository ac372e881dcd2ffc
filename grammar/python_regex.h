// PythonRegex: translate a Python `re` pattern (str semantics, as Lark
// compiles its terminals) into maskd's regex syntax (docs/regex.md) with the
// same full-match language over Unicode text.
//
// What differs from maskd's own reading of a pattern is rewritten: \d, \w
// and \s are Unicode classes as in Python (maskd's are ASCII); `.` follows
// the s flag; the i flag is lowered by replacing every cased character and
// class by its case-insensitive closure under Python's rules; the x flag
// drops whitespace and comments; scoped flags `(?i:...)` and leading global
// flags `(?i)` are honoured. Classes are emitted as explicit codepoint
// ranges. What a full-match DFA cannot express exactly is an error naming the
// construct: anchors (^ $ \A \Z \b \B), lookaround, backreferences, atomic
// groups, possessive quantifiers, conditionals, \N{...}, the L flag, and
// case-insensitive classes holding cased characters beyond U+FFFF (Python's
// own matching of those is inconsistent). Lazy quantifiers are kept; maskd
// reads them as a language.
#ifndef MASKD_GRAMMAR_PYTHON_REGEX_H_
#define MASKD_GRAMMAR_PYTHON_REGEX_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace maskd::grammar {

struct PythonRegexFlags {
  bool ignore_case = false;  // i
  bool dot_all = false;      // s
  bool verbose = false;      // x
  bool ascii = false;        // a: \d \w \s and case folding ASCII only
};

// `pattern` is UTF-8. On error the status is INVALID_ARGUMENT and
// *error_offset (when given) is the byte offset in `pattern` of the
// construct at fault.
absl::StatusOr<std::string> TranslatePythonRegex(std::string_view pattern,
                                                 const PythonRegexFlags& flags,
                                                 size_t* error_offset = nullptr);

// A maskd regex matching exactly the UTF-8 string `text`, or, with
// `ignore_case`, what Python's `(?i:` re.escape(text) `)` matches.
std::string LiteralRegex(std::string_view text, bool ignore_case);

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_PYTHON_REGEX_H_
