// What the converter's errors and warnings say. See schema/internal/messages.h.
#include "schema/internal/messages.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "json/json_scan.h"

namespace maskd::json_schema_internal {

std::string PtrEscape(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out.push_back(c);
  }
  return out;
}

std::string Child(const std::string& ptr, const std::string& key) {
  return ptr + "/" + PtrEscape(key);
}

std::string Child(const std::string& ptr, const std::string& key, size_t i) {
  return absl::StrCat(ptr, "/", PtrEscape(key), "/", i);
}

std::string Shown(std::string_view s, size_t max) { return internal::Excerpt(s, max); }

std::string Where(const std::string& ptr) { return ptr.empty() ? "/" : Shown(ptr); }

absl::Status ConversionDeadlineError() {
  return absl::DeadlineExceededError("JSON Schema conversion exceeded its deadline");
}

absl::Status ConversionCancelledError() {
  return absl::CancelledError("JSON Schema conversion cancelled");
}

absl::Status Invalid(const std::string& msg) { return absl::InvalidArgumentError(msg); }

namespace {
constexpr char kMalformedPrefix[] = "malformed schema: ";
}  // namespace

absl::Status MalformedSchemaError(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(kMalformedPrefix, Shown(what)));
}

bool IsMalformedSchemaError(const absl::Status& s) {
  return s.code() == absl::StatusCode::kInvalidArgument &&
         absl::StartsWith(s.message(), kMalformedPrefix);
}

}  // namespace maskd::json_schema_internal
