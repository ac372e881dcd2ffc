// Reads of a schema's JSON that can fail on its shape. See
// schema/internal/json_access.h. The messages are nlohmann 3.11's.
#include "schema/internal/json_access.h"

#include <charconv>

#include "absl/strings/str_cat.h"
#include "schema/internal/messages.h"

namespace maskd::json_schema_internal {

absl::StatusOr<std::string> StringValue(const json& v) {
  if (!v.is_string()) {
    return MalformedSchemaError(
        absl::StrCat("[json.exception.type_error.302] type must be string, but is ", v.type_name()));
  }
  return v.get<std::string>();
}

absl::Status CheckIndexable(const json& v) {
  if (v.is_array()) return absl::OkStatus();
  return MalformedSchemaError(absl::StrCat(
      "[json.exception.type_error.305] cannot use operator[] with a numeric argument with ",
      v.type_name()));
}

absl::Status CheckKeyWritable(const json& v) {
  if (v.is_object() || v.is_null()) return absl::OkStatus();
  return MalformedSchemaError(absl::StrCat(
      "[json.exception.type_error.305] cannot use operator[] with a string argument with ",
      v.type_name()));
}

absl::Status CheckPushBack(const json& v) {
  if (v.is_array() || v.is_null()) return absl::OkStatus();
  return MalformedSchemaError(
      absl::StrCat("[json.exception.type_error.308] cannot use push_back() with ", v.type_name()));
}

absl::Status CheckKeysIterable(const json& v) {
  if (v.is_object() || v.begin() == v.end()) return absl::OkStatus();
  return MalformedSchemaError(
      "[json.exception.invalid_iterator.207] cannot use key() for non-object iterators");
}

absl::StatusOr<size_t> ParseIndex(const std::string& digits) {
  unsigned long index = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    return absl::InternalError("json schema conversion failed: stoul");
  }
  return static_cast<size_t>(index);
}

}  // namespace maskd::json_schema_internal
