// enum/const: each value as json.dumps writes it, kept when the sibling
// keywords accept it.
// See schema/internal/converter.h.
#include "schema/internal/converter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "automaton/regex_text.h"
#include "schema/internal/messages.h"

namespace maskd::json_schema_internal {

namespace {

bool HasNestedObject(const json& v) {
  if (v.is_array()) {
    for (auto& x : v)
      if (x.is_structured()) return true;
  }
  if (v.is_object()) {
    for (auto& x : v)
      if (x.is_structured()) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<Re> Converter::ConvertEnum(const json& s, const std::string& ptr,
                                          const std::set<std::string>& types, bool non_integer) {
  json values = json::array();
  if (auto e = s.find("enum"); e != s.end()) {
    if (!e->is_array()) return Invalid(absl::StrCat("enum at ", Where(ptr), " is not an array"));
    values = *e;
  }
  if (auto c = s.find("const"); c != s.end()) {
    if (s.contains("enum")) {
      if (std::find(values.begin(), values.end(), *c) == values.end()) return Re();
    }
    values = json::array({*c});
  }
  // Other validation keywords beside enum/const (e.g. bounds, or the
  // exclusions a `not` leaves): keep the values the rest of the schema
  // accepts, tested on their json.dumps text against the rest's regex. If
  // the rest cannot be converted, the values are kept, and the warnings and
  // $ref counts of the failed attempt are undone. Errors that end every
  // conversion still do: the budget's, a malformed schema, an internal one.
  std::shared_ptr<const Dfa> rest_dfa;
  if (HasValidation(s, {"type", "nullable", "enum", "const", "not"})) {
    json rest = s;
    rest.erase("enum");
    rest.erase("const");
    rest.erase("nullable");
    rest.erase("not");
    rest["type"] = TypeList(types);
    auto saved_warnings = warnings_;
    auto saved_stack = ref_stack_;
    absl::StatusOr<Re> rr = Convert(rest, ptr);
    if (rr.ok()) {
      if (!*rr) return Re();
      MASKD_ASSIGN_OR_RETURN(rest_dfa, BudgetedDfa(**rr, o_.budget.max_states));
    } else if (IsBudgetError(rr.status()) || IsMalformedSchemaError(rr.status()) ||
               rr.status().code() == absl::StatusCode::kInternal) {
      return rr.status();
    } else {
      warnings_ = saved_warnings;
      ref_stack_ = saved_stack;
    }
  }
  std::vector<std::string> parts;
  for (auto& v : values) {
    if (!TypeMatches(v, types)) continue;
    if (non_integer && v.is_number() && IsIntegral(v)) continue;
    if (rest_dfa && !(o_.whitespace == JsonWhitespace::kFlexible && v.is_structured()) &&
        !EnumValueMatches(*rest_dfa, v)) {
      if (!HasNestedObject(v)) continue;
      Warn("enum", ptr, "a value with nested objects kept without checking sibling keywords");
    }
    parts.push_back(ConstRegex(v));
  }
  return UnionRe(parts);
}

// Whether the rest regex accepts `v`. The regex fixes the order of object
// keys (schema order), so a top-level object is tried in every key order
// (up to 7 keys; larger objects in their own order).
bool Converter::EnumValueMatches(const Dfa& dfa, const json& v) const {
  if (!v.is_object() || v.size() < 2 || v.size() > 7) return dfa.Matches(ConstText(v));
  std::vector<std::string> keys;
  for (auto it = v.begin(); it != v.end(); ++it) keys.push_back(it.key());
  std::sort(keys.begin(), keys.end());
  do {
    json o = json::object();
    for (auto& k : keys) o[k] = v.at(k);
    if (dfa.Matches(ConstText(o))) return true;
  } while (std::next_permutation(keys.begin(), keys.end()));
  return false;
}

// json.dumps text of a value in the layout (kFlexible: no whitespace).
std::string Converter::ConstText(const json& v) const {
  const std::string item_sep = o_.whitespace == JsonWhitespace::kPython ? ", " : ",";
  const std::string key_sep = o_.whitespace == JsonWhitespace::kPython ? ": " : ":";
  switch (v.type()) {
    case json::value_t::number_float: return PythonFloatRepr(v.get<double>());
    case json::value_t::string: return PythonJsonString(v.get<std::string>(), o_.ensure_ascii);
    case json::value_t::array: {
      std::vector<std::string> items;
      for (auto& x : v) items.push_back(ConstText(x));
      return "[" + absl::StrJoin(items, item_sep) + "]";
    }
    case json::value_t::object: {
      std::vector<std::string> items;
      for (auto it = v.begin(); it != v.end(); ++it)
        items.push_back(PythonJsonString(it.key(), o_.ensure_ascii) + key_sep + ConstText(it.value()));
      return "{" + absl::StrJoin(items, item_sep) + "}";
    }
    default: return v.dump();
  }
}

std::string Converter::ConstRegex(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return v.get<bool>() ? "true" : "false";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return v.dump() + "(?:\\.0)?";
    case json::value_t::number_float: {
      double d = v.get<double>();
      if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 1e16) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.0f", d);
        std::string i = buf;
        if (i == "-0") return "-?0(?:\\.0)?";
        return RegexEscape(i) + "(?:\\.0)?";
      }
      return RegexEscape(PythonFloatRepr(d));
    }
    case json::value_t::string:
      return RegexEscape(PythonJsonString(v.get<std::string>(), o_.ensure_ascii));
    case json::value_t::array: {
      if (v.empty()) return Open('[') + Close(']').substr(ws_.size());
      std::vector<std::string> items;
      for (auto& x : v) items.push_back(ConstRegex(x));
      return Open('[') + absl::StrJoin(items, item_sep_) + Close(']');
    }
    case json::value_t::object: {
      if (v.empty()) return Open('{') + Close('}').substr(ws_.size());
      std::vector<std::string> items;
      for (auto it = v.begin(); it != v.end(); ++it) {
        items.push_back(RegexEscape(PythonJsonString(it.key(), o_.ensure_ascii)) + key_sep_ +
                        ConstRegex(it.value()));
      }
      return Open('{') + absl::StrJoin(items, item_sep_) + Close('}');
    }
    default: return "null";
  }
}

}  // namespace maskd::json_schema_internal
