// Internals of the JSON Schema converter, exposed for tests.
#ifndef MASKD_SCHEMA_INTERNAL_JSON_SCHEMA_INTERNAL_H_
#define MASKD_SCHEMA_INTERNAL_JSON_SCHEMA_INTERNAL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "schema/json_schema.h"

namespace maskd::json_schema_internal {

// A decimal number: sign, integer digits (no leading zeros; "0" for zero) and
// fraction digits (no trailing zeros). Zero is never negative.
struct Decimal {
  bool neg = false;
  std::string ip = "0";
  std::string fp;
  bool is_integer() const { return fp.empty(); }
};
// Parses "-12.5e3"-style text (JSON number syntax, leniently).
std::optional<Decimal> ParseDecimal(std::string_view text);
// -1, 0, 1.
int CompareDecimal(const Decimal& a, const Decimal& b);

// An integer as sign + digits.
struct BigInt {
  bool neg = false;
  std::string digits = "0";
};

// Regex for the JSON integers in [lo, hi] (either may be absent: unbounded),
// written without leading zeros or "-0". nullopt when the range is empty.
std::optional<std::string> IntegerRangeRegex(const std::optional<BigInt>& lo,
                                             const std::optional<BigInt>& hi);
// Convenience for tests.
std::optional<std::string> IntegerRangeRegex64(std::optional<int64_t> lo,
                                               std::optional<int64_t> hi);

// Regex for JSON numbers (no exponent, except where a whole half-line is
// allowed) in the range; nullopt when empty.
std::optional<std::string> NumberRangeRegex(const std::optional<Decimal>& lo, bool lo_exclusive,
                                            const std::optional<Decimal>& hi, bool hi_exclusive);

// Python's repr(float) (what json.dumps writes for a float).
std::string PythonFloatRepr(double d);
// JSON string literal (with quotes) as json.dumps writes it.
std::string PythonJsonString(std::string_view utf8, bool ensure_ascii);

// Regex matching the JSON-encoded content (between the quotes) of the strings
// an ECMA-262 `pattern` matches somewhere (search semantics: unanchored unless
// ^/$). InvalidArgument naming the construct when unsupported.
// With `anchored`, both ends are treated as anchored (^...$) whatever the
// pattern says. *was_anchored (optional) tells whether the pattern was
// anchored at both ends by itself. Groups nested deeper than `max_nesting`
// (at most kMaxPatternNesting) are InvalidArgument.
// With `length` (min, max; max < 0: none) and a pattern anchored at both ends
// made of single-character sets with at most one repeated set, the length
// bounds are folded into that repeat and *length_applied is set.
absl::StatusOr<std::string> PatternToJsonStringRegex(
    std::string_view pattern, bool anchored = false, bool* was_anchored = nullptr,
    std::pair<int64_t, int64_t> length = {0, -1}, bool* length_applied = nullptr,
    int max_nesting = kMaxPatternNesting);

// Regex matching the JSON-encoded content (between the quotes) of every string
// that is not one of `words` (UTF-8), whatever its spelling: a character of an
// excluded word written raw, as a short escape or as \uXXXX (either case) is
// still that character, so "\u0061" is excluded with "a".
std::string ExcludedStringsRegex(const std::vector<std::string>& words);

// Regex matching one character of JSON string content (raw or escaped).
const std::string& JsonCharRegex();
// Regex matching one escaped character of JSON string content (\" \\ \/ \b \f
// \n \r \t or \uXXXX): JsonCharRegex's escapes, as one group.
const std::string& JsonEscapeRegex();

}  // namespace maskd::json_schema_internal

#endif  // MASKD_SCHEMA_INTERNAL_JSON_SCHEMA_INTERNAL_H_
