// Unicode property classes (\p{...}) and simple case folding over the tables
// of automaton/unicode_tables.h, shared by the regex parser and the JSON Schema
// `pattern` translator.
//
// Names match loosely (UAX #44 LM3 without the "is" prefix): case, spaces,
// '_' and '-' are ignored, so "Lu", "lu", "Uppercase_Letter" and
// "uppercase letter" are one value.
#ifndef MASKD_AUTOMATON_UNICODE_PROPERTY_H_
#define MASKD_AUTOMATON_UNICODE_PROPERTY_H_

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace maskd::unicode {

// Closed codepoint ranges.
using CodepointRanges = std::vector<std::pair<uint32_t, uint32_t>>;

// The version of the Unicode Character Database the tables come from.
std::string_view UcdVersion();

// The codepoints of the property expression `expr`: the text between the
// braces of \p{...}, or the letter of \pL. Accepted:
//   V                          a General_Category value (short or long name,
//                              groups L, LC, L&, M, N, P, S, Z, C included), a
//                              Script value (long name or four-letter code),
//                              Any, ASCII or Assigned; General_Category wins a
//                              name that is both (none is, in this UCD);
//   gc=V, General_Category=V   a General_Category value;
//   sc=V, Script=V             a Script value;
//   ^expr                      negation: *negated is set, the ranges are
//                              still those of expr.
// The ranges are sorted, disjoint and never hold a surrogate (Cs is empty).
// An unknown name or a property other than these (Script_Extensions, binary
// properties) is InvalidArgument naming it.
absl::StatusOr<CodepointRanges> PropertyRanges(std::string_view expr, bool* negated);

// Appends to `*out`, unsorted and possibly overlapping, every codepoint that
// simple case folding (CaseFolding.txt C + S) makes equivalent to a codepoint
// of `ranges` other than itself: the union of `ranges` and `*out` is then
// closed under case-insensitive equality. `ranges` need not be sorted.
void AppendCaseVariants(absl::Span<const std::pair<uint32_t, uint32_t>> ranges,
                        CodepointRanges* out);

}  // namespace maskd::unicode

#endif  // MASKD_AUTOMATON_UNICODE_PROPERTY_H_
