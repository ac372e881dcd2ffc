// Regex text for characters of a JSON string's content: the encoded forms
// (raw, short escape, \uXXXX) of a set of decoded characters, and the pieces
// they are made of. Internal to maskd_schema (json_string_class.cc).
#ifndef MASKD_SCHEMA_INTERNAL_JSON_STRING_CLASS_H_
#define MASKD_SCHEMA_INTERNAL_JSON_STRING_CLASS_H_

#include <cstdint>
#include <string>

#include "automaton/codepoint_set.h"

namespace maskd::json_schema_internal {

// A regex class (or one escaped literal) over `set`: raw UTF-8, no
// surrogates inside, not empty.
std::string ClassOf(const CodepointSet& set);

// The 4-hex-digit codes from `lo` to `hi` (both at most 0xFFFF), either
// letter case.
std::string HexRange(uint32_t lo, uint32_t hi);

// Every encoded form of one character of `set` inside a JSON string; ""
// when no character of `set` can be encoded (empty, or surrogates only).
std::string EncodeSet(const CodepointSet& set);

}  // namespace maskd::json_schema_internal

#endif  // MASKD_SCHEMA_INTERNAL_JSON_STRING_CLASS_H_
