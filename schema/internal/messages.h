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

// An error that ends the conversion, thrown through the converter and turned
// back into its status at the entry points.
struct ConvertError {
  absl::Status status;
};
[[noreturn]] void Throw(absl::Status s);
[[noreturn]] void Invalid(const std::string& msg);

}  // namespace maskd::json_schema_internal

#endif  // MASKD_SCHEMA_INTERNAL_MESSAGES_H_
