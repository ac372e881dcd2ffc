// Reads of a schema's JSON that can fail on its shape, as statuses. The
// converter once used nlohmann's throwing accessors here and turned their
// exceptions into "malformed schema: <what>"; these checks give the same
// errors with the same text (MalformedSchemaError), before the access.
#ifndef MASKD_SCHEMA_INTERNAL_JSON_ACCESS_H_
#define MASKD_SCHEMA_INTERNAL_JSON_ACCESS_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schema/internal/keywords.h"

namespace maskd::json_schema_internal {

// v's string (nlohmann's v.get<std::string>()).
absl::StatusOr<std::string> StringValue(const json& v);
// OK when v[i] may be read (v an array: const operator[](size_t)).
absl::Status CheckIndexable(const json& v);
// OK when v[key] may be written (v an object, or null, which becomes one).
absl::Status CheckKeyWritable(const json& v);
// OK when v.push_back() may be called (v an array, or null).
absl::Status CheckPushBack(const json& v);
// OK when the keys of v's elements may be read while iterating it: v an
// object, or a value with nothing to iterate (null, empty array).
absl::Status CheckKeysIterable(const json& v);
// Decimal digits (a JSON pointer token, a rule number) as an index, in
// std::stoul's range; InternalError "json schema conversion failed: stoul"
// otherwise, the error std::stoul's exception became.
absl::StatusOr<size_t> ParseIndex(const std::string& digits);

}  // namespace maskd::json_schema_internal

#endif  // MASKD_SCHEMA_INTERNAL_JSON_ACCESS_H_
