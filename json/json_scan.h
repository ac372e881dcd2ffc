// A structural pre-scan of untrusted JSON text, run before any parser builds a
// tree from it: how deep arrays and objects nest, how many members an object
// has, and where the document ends. Used by the JSON Schema front end
// (schema/) and the tokenizer loader (index/); not part of the public API.
//
// Why: the trees that JSON parsers build are then walked, copied, compared and
// serialized by recursive code (nlohmann::json's copy constructor and dump(),
// the schema converter's walks), so nesting depth is stack depth; and
// nlohmann::ordered_json inserts object members with a linear search, so an
// object's member count is quadratic time. nlohmann's lexer also stops at a
// NUL byte as if the text ended there, accepting "{}\0garbage"; this scan
// finds the real end. Limits bound stack use, which an operator cannot raise:
// callers pass their maximum or a lower configured value.
#ifndef MASKD_JSON_JSON_SCAN_H_
#define MASKD_JSON_JSON_SCAN_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace maskd::internal {

struct JsonScanLimits {
  // Arrays and objects open at once, at most. 0: unlimited.
  size_t max_depth = 256;
  // Members of one object, at most. 0: unlimited.
  size_t max_object_members = 0;
  // Named in the max_depth error when set (e.g. the option that sets it).
  const char* depth_limit_name = nullptr;
};

// Checks `text` (one JSON document, optionally surrounded by JSON whitespace)
// against `limits`, and that no byte follows the document but whitespace.
// InvalidArgument "<what>: <problem> at byte offset N" (N: the byte that
// opens the level too deep, the member too many, or the first trailing
// byte). The scan is lenient about everything else: text it cannot follow
// (an unmatched bracket, an unterminated string) passes, for the real
// parser to report with its own position. Linear time, no allocation
// beyond one counter per open object when max_object_members is set.
absl::Status CheckJsonStructure(std::string_view text, const JsonScanLimits& limits,
                                std::string_view what);

// `s` for an error message: whole when at most `max` bytes, else its head and
// tail (cut on UTF-8 character boundaries) around "...(N bytes)...". Keys,
// token strings and type names in documents can be megabytes long.
std::string Excerpt(std::string_view s, size_t max = 200);

}  // namespace maskd::internal

#endif  // MASKD_JSON_JSON_SCAN_H_
