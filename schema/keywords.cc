// The JSON Schema vocabulary the converter reads. See schema/internal/keywords.h.
#include "schema/internal/keywords.h"

#include <charconv>
#include <cmath>
#include <utility>

namespace maskd::json_schema_internal {

bool IsHandled(const std::string& k) {
  static const std::set<std::string> kSet = {
      "type", "enum", "const", "properties", "required", "additionalProperties",
      "minProperties", "maxProperties", "items", "prefixItems", "additionalItems", "minItems",
      "maxItems", "uniqueItems", "minLength", "maxLength", "pattern", "format", "minimum",
      "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "anyOf", "oneOf",
      "allOf", "$ref", "nullable", "patternProperties", "propertyNames",
      "unevaluatedProperties", "not", "if", "dependencies", "dependentRequired",
      "dependentSchemas", "contains", "minContains", "maxContains", kNotStrings, kUnsupportedKw};
  return kSet.count(k) > 0;
}

bool IsUnsupported(const std::string& k) {
  static const std::set<std::string> kSet = {"unevaluatedItems", "$dynamicRef", "$recursiveRef",
                                             "contentSchema"};
  return kSet.count(k) > 0;
}

bool IsValidationKeyword(const std::string& k) { return IsHandled(k) || IsUnsupported(k); }

bool HasValidation(const json& s, const std::set<std::string>& except) {
  if (!s.is_object()) return false;
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (except.count(it.key())) continue;
    if (IsValidationKeyword(it.key())) return true;
  }
  return false;
}

const std::vector<std::string>& AllTypes() {
  static const std::vector<std::string> kAll = {"null", "boolean", "object", "array",
                                                "string", "integer", "number"};
  return kAll;
}

json TypeList(const std::set<std::string>& types) {
  json out = json::array();
  for (auto& t : AllTypes())
    if (types.count(t)) out.push_back(t);
  return out;
}

std::string NumberText(const json& v) {
  if (v.is_number_integer()) return v.dump();
  if (v.is_number_float()) {
    double d = v.get<double>();
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof(buf), d);
    return std::string(buf, res.ptr);
  }
  return "";
}

std::optional<Decimal> DecimalOf(const json& v) {
  if (!v.is_number()) return std::nullopt;
  return ParseDecimal(NumberText(v));
}

bool TypeMatches(const json& v, const std::set<std::string>& types) {
  if (v.is_null()) return types.count("null");
  if (v.is_boolean()) return types.count("boolean");
  if (v.is_string()) return types.count("string");
  if (v.is_array()) return types.count("array");
  if (v.is_object()) return types.count("object");
  if (v.is_number()) return types.count("number") || (types.count("integer") && IsIntegral(v));
  return false;
}

bool IsIntegral(const json& v) {
  if (v.is_number_integer()) return true;
  if (v.is_number_float()) {
    double d = v.get<double>();
    return std::isfinite(d) && std::floor(d) == d;
  }
  return false;
}

namespace {
// Each exclusive bound and the bound it qualifies in draft 4.
constexpr std::pair<const char*, const char*> kExclusiveBounds[] = {
    {"exclusiveMinimum", "minimum"}, {"exclusiveMaximum", "maximum"}};
}  // namespace

bool HasDraft4Bounds(const json& s) {
  if (!s.is_object()) return false;
  for (auto [ex, bound] : kExclusiveBounds) {
    auto it = s.find(ex);
    if (it != s.end() && it->is_boolean()) return true;
  }
  return false;
}

void NormalizeBounds(json& s) {
  if (!s.is_object()) return;
  for (auto [ex, bound] : kExclusiveBounds) {
    auto it = s.find(ex);
    if (it == s.end() || !it->is_boolean()) continue;
    bool on = it->get<bool>();
    s.erase(ex);
    if (on && s.contains(bound)) {
      s[ex] = s[bound];
      s.erase(bound);
    }
  }
}

}  // namespace maskd::json_schema_internal
