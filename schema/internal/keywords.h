// The JSON Schema vocabulary the converter reads: which keywords validate,
// which it refuses, its own internal keywords, and small readers of keyword
// values (types, bounds, numbers).
#ifndef MASKD_SCHEMA_INTERNAL_KEYWORDS_H_
#define MASKD_SCHEMA_INTERNAL_KEYWORDS_H_

#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "schema/internal/json_schema_internal.h"

namespace maskd::json_schema_internal {

// Schemas keep their keys in document order (properties are written in it).
using json = nlohmann::ordered_json;

// A parsed schema document (JsonSchemaDocument's tree).
struct ParsedSchema {
  json root;
};

// Internal keywords, only in schemas the converter derives (negations): no
// user schema is expected to spell them.
//   kNotStrings: [s1, s2, ...]: a string is none of these (any spelling).
//   kUnsupportedKw: [keyword, pointer, why]: the schema cannot be expressed;
//     an error naming keyword and pointer if any of its types survives.
inline constexpr char kNotStrings[] = "$maskd.notStrings";
inline constexpr char kUnsupportedKw[] = "$maskd.unsupported";

// Keywords not listed as handled or unsupported (annotations such as title,
// description, examples, default, $schema, $id, $comment, deprecated,
// readOnly, writeOnly, and non-JSON-Schema keywords such as x-*) are ignored,
// as the spec says.
// Validation keywords this converter handles.
bool IsHandled(const std::string& k);
// Validation keywords no regex built here enforces: an error.
bool IsUnsupported(const std::string& k);
bool IsValidationKeyword(const std::string& k);
// Whether object `s` has a validation keyword outside `except`.
bool HasValidation(const json& s, const std::set<std::string>& except = {});

// The seven JSON Schema types, in the order their regexes are joined.
const std::vector<std::string>& AllTypes();
// `types` as a JSON array in AllTypes() order.
json TypeList(const std::set<std::string>& types);

// A number's shortest text (integers as written, floats as std::to_chars
// writes them); "" for a non-number.
std::string NumberText(const json& v);
// A number as a Decimal; nullopt for a non-number.
std::optional<Decimal> DecimalOf(const json& v);
// Whether v is a number with an integral value.
bool IsIntegral(const json& v);
// Whether v is of one of `types` (JSON Schema type names; an integral number
// is an "integer").
bool TypeMatches(const json& v, const std::set<std::string>& types);
// Draft-4 boolean exclusiveMinimum/Maximum to the numeric form, in place.
void NormalizeBounds(json& s);
// Whether NormalizeBounds would change `s` (a boolean exclusive bound).
bool HasDraft4Bounds(const json& s);

}  // namespace maskd::json_schema_internal

#endif  // MASKD_SCHEMA_INTERNAL_KEYWORDS_H_
