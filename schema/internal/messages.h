// What the converter's errors and warnings say: JSON pointers to the schema
// location, shown bounded (keys can be megabytes long), and the errors that
// end a conversion.
#ifndef MASKD_SCHEMA_INTERNAL_MESSAGES_H_
#define MASKD_SCHEMA_INTERNAL_MESSAGES_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace maskd::json_schema_internal {

// `ptr` + "/" + `key` escaped as a JSON pointer token (~ as ~0, / as ~1).
std::string PtrEscape(const std::string& key);
std::string Child(const std::string& ptr, const std::string& key);
// `ptr` + "/key/i".
std::string Child(const std::string& ptr, const std::string& key, size_t i);

// Error messages and warnings go back to clients: a pointer is shown whole up
// to kMaxShownBytes, else its head and tail. Whole error messages are capped
// at kMaxMessageBytes the same way.
inline constexpr size_t kMaxShownBytes = 200;
inline constexpr size_t kMaxMessageBytes = 1024;
std::string Shown(std::string_view s, size_t max = kMaxShownBytes);
// A pointer as messages show it: "/" for the root.
std::string Where(const std::string& ptr);

absl::Status ConversionDeadlineError();
absl::Status ConversionCancelledError();

// InvalidArgument with `msg`: the schema says something the converter
// refuses (a bad keyword value, an unknown $ref, ...).
absl::Status Invalid(const std::string& msg);

// A schema whose JSON has a shape the converter's reads cannot take (e.g. a
// "required" that is a string, merged with another): "malformed schema: "
// and what nlohmann's accessor said (schema/internal/json_access.h).
absl::Status MalformedSchemaError(std::string_view what);
// Whether `s` is a MalformedSchemaError.
bool IsMalformedSchemaError(const absl::Status& s);

}  // namespace maskd::json_schema_internal

#endif  // MASKD_SCHEMA_INTERNAL_MESSAGES_H_
