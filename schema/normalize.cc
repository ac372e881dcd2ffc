// Schema rewriting, JSON to JSON: allOf (and $ref beside other keywords)
// merged into one schema, if/then/else and dependencies lowered into allOf
// of unions.
// See schema/internal/converter.h.
#include "schema/internal/converter.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schema/internal/json_access.h"
#include "schema/internal/messages.h"

namespace maskd::json_schema_internal {

namespace {

// The types both `a` and `b` allow ("type" values), in a fixed order; an
// integer is a number.
json IntersectTypes(const json& a, const json& b) {
  auto set_of = [](const json& t) {
    std::set<std::string> out;
    if (t.is_string()) out.insert(t.get<std::string>());
    if (t.is_array())
      for (auto& x : t)
        if (x.is_string()) out.insert(x.get<std::string>());
    return out;
  };
  auto ta = set_of(a), tb = set_of(b);
  json out = json::array();
  for (const char* t : {"null", "boolean", "object", "array", "string", "number", "integer"}) {
    bool in_a = ta.count(t) || (std::string(t) == "integer" && ta.count("number"));
    bool in_b = tb.count(t) || (std::string(t) == "integer" && tb.count("number"));
    if (in_a && in_b) out.push_back(t);
  }
  if (out.size() == 2 && out[0] == "number" && out[1] == "integer") out = json::array({"number"});
  return out;
}

// Tuples merged position by position (allOf where both have one).
absl::StatusOr<json> MergeTuples(const json& a, const json& b) {
  // b[i] is read for each i below b.size().
  if (b.size() > 0) MASKD_RETURN_IF_ERROR(CheckIndexable(b));
  json out = json::array();
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i < a.size() && i < b.size()) out.push_back(json{{"allOf", json::array({a[i], b[i]})}});
    else out.push_back(i < a.size() ? a[i] : b[i]);
  }
  return out;
}

// patternProperties of `b` added to `a`'s (allOf where both have a pattern).
absl::Status MergePatternProperties(json& a, const json& b) {
  MASKD_RETURN_IF_ERROR(CheckKeysIterable(b));
  if (!b.empty()) MASKD_RETURN_IF_ERROR(CheckKeyWritable(a));
  for (auto p = b.begin(); p != b.end(); ++p) {
    if (a.contains(p.key())) a[p.key()] = json{{"allOf", json::array({a[p.key()], p.value()})}};
    else a[p.key()] = p.value();
  }
  return absl::OkStatus();
}

// The keywords LowerConditionals moves out of a schema.
constexpr const char* kDependencyKeywords[] = {"dependencies", "dependentRequired",
                                               "dependentSchemas"};
bool HasConditionals(const json& s) {
  if (s.contains("if")) return true;
  for (const char* k : kDependencyKeywords) {
    if (s.contains(k)) return true;
  }
  return false;
}

bool IsLowerBound(const std::string& k) {
  return k == "minimum" || k == "exclusiveMinimum" || k == "minLength" || k == "minItems" ||
         k == "minProperties";
}

bool IsUpperBound(const std::string& k) {
  return k == "maximum" || k == "exclusiveMaximum" || k == "maxLength" || k == "maxItems" ||
         k == "maxProperties";
}

// `s`'s properties merged into `acc`'s: each side's additionalProperties
// applies to the other side's extra properties (spec semantics of allOf).
// acc's "properties", when present, is an object: only this writes it.
// In place: acc's properties keep their order, s's new ones follow.
void MergeProperties(json& acc, const json& s) {
  const bool acc_had = acc.contains("properties");
  const auto s_it = s.find("properties");
  const json* s_props = s_it != s.end() ? &*s_it : nullptr;
  if (!acc_had && s_props == nullptr) return;
  json& merged_props = acc["properties"];  // created empty when absent
  if (merged_props.is_null()) merged_props = json::object();
  if (s_props && s_props->is_object()) {
    for (auto it = s_props->begin(); it != s_props->end(); ++it) {
      if (merged_props.contains(it.key())) {
        merged_props[it.key()] = json{{"allOf", json::array({merged_props[it.key()], it.value()})}};
      } else if (acc.contains("additionalProperties") && !acc.contains("patternProperties")) {
        merged_props[it.key()] =
            json{{"allOf", json::array({it.value(), acc["additionalProperties"]})}};
      } else {
        merged_props[it.key()] = it.value();
      }
    }
  }
  if (acc_had && s.contains("additionalProperties") && !s.contains("patternProperties")) {
    // acc's own properties: those s does not declare (s's were added above).
    for (auto it = merged_props.begin(); it != merged_props.end(); ++it) {
      if (s_props && s_props->contains(it.key())) continue;
      *it = json{{"allOf", json::array({*it, s["additionalProperties"]})}};
    }
  }
}

}  // namespace

// Merges `s` (at `ptr`) into `acc` (an object schema, or false).
absl::Status Converter::MergeInto(json& acc, const json& s_in, const std::string& ptr,
                                  int depth) {
  if (depth > 64) return Invalid(absl::StrCat("allOf/$ref nesting too deep at ", Where(ptr)));
  if (acc.is_boolean()) return absl::OkStatus();  // already false
  if (s_in.is_boolean()) {
    if (!s_in.get<bool>()) acc = false;
    return absl::OkStatus();
  }
  if (!s_in.is_object()) {
    return Invalid(absl::StrCat("schema at ", Where(ptr), " is not an object"));
  }
  // `s_in` itself, or a copy where it must change (the numeric bounds form,
  // conditionals lowered): a merge reads large schemas many times over. The
  // $ref and allOf merged here are skipped below, not erased.
  json owned;
  const bool changes = HasDraft4Bounds(s_in) || HasConditionals(s_in);
  if (changes) {
    owned = s_in;
    NormalizeBounds(owned);
  }
  const json& s = changes ? owned : s_in;
  bool ref_merged = false, all_of_merged = false;
  if (auto it = s.find("$ref"); it != s.end() && it->is_string()) {
    std::string tptr;
    MASKD_ASSIGN_OR_RETURN(const json* target, Resolve(it->get<std::string>(), ptr, &tptr));
    ref_merged = true;
    MASKD_RETURN_IF_ERROR(MergeInto(acc, *target, tptr, depth + 1));
    if (acc.is_boolean()) return absl::OkStatus();
  }
  if (auto it = s.find("allOf"); it != s.end() && it->is_array()) {
    all_of_merged = true;
    for (size_t i = 0; i < it->size(); ++i) {
      MASKD_RETURN_IF_ERROR(MergeInto(acc, (*it)[i], Child(ptr, "allOf", i), depth + 1));
      if (acc.is_boolean()) return absl::OkStatus();
    }
  }
  if (changes) {
    json parts = json::array();
    MASKD_RETURN_IF_ERROR(LowerConditionals(owned, ptr, &parts));
    for (auto& part : parts) {
      MASKD_RETURN_IF_ERROR(MergeInto(acc, part, ptr, depth + 1));
      if (acc.is_boolean()) return absl::OkStatus();
    }
  }
  MergeProperties(acc, s);
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    if (k == "properties" || (k == "$ref" && ref_merged) || (k == "allOf" && all_of_merged)) {
      continue;
    }
    if (!acc.contains(k)) {
      acc[k] = it.value();
      continue;
    }
    MASKD_RETURN_IF_ERROR(MergeKeyword(acc, k, it.value(), ptr));
    if (acc.is_boolean()) return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status Converter::MergeKeyword(json& acc, const std::string& k, const json& v,
                                     const std::string& ptr) {
  json& a = acc[k];
  if (a == v) return absl::OkStatus();
  if (k == "type") {
    a = IntersectTypes(a, v);
  } else if (k == "required" || k == kNotStrings) {
    for (auto& x : v) {
      if (std::find(a.begin(), a.end(), x) != a.end()) continue;
      MASKD_RETURN_IF_ERROR(CheckPushBack(a));
      a.push_back(x);
    }
  } else if (k == "enum" || k == "const") {
    json va = k == "enum" ? a : json::array({a});
    json vb = k == "enum" ? v : json::array({v});
    json out = json::array();
    for (auto& x : va)
      if (std::find(vb.begin(), vb.end(), x) != vb.end()) out.push_back(x);
    if (k == "const" && out.empty()) acc = false;  // no instance (`a` dangles now)
    else if (k == "enum") a = out;
  } else if (IsLowerBound(k)) {
    if (v.is_number() && a.is_number() && v.get<double>() > a.get<double>()) a = v;
  } else if (IsUpperBound(k)) {
    if (v.is_number() && a.is_number() && v.get<double>() < a.get<double>()) a = v;
  } else if (k == "anyOf" || k == "oneOf") {
    if (a.size() * v.size() > 256) {
      return Invalid(absl::StrCat("allOf at ", Where(ptr), ": ", k, " product too large"));
    }
    json out = json::array();
    for (auto& x : a)
      for (auto& y : v) out.push_back(json{{"allOf", json::array({x, y})}});
    a = out;
  } else if (k == "items" && a.is_array() != v.is_array()) {
    return Invalid(absl::StrCat("allOf at ", Where(ptr), ": cannot merge tuple and list items"));
  } else if ((k == "items" || k == "prefixItems") && a.is_array()) {
    MASKD_ASSIGN_OR_RETURN(a, MergeTuples(a, v));
  } else if (k == "items" || k == "additionalProperties" || k == "additionalItems" ||
             k == "propertyNames" || k == "unevaluatedProperties") {
    a = json{{"allOf", json::array({a, v})}};
  } else if (k == "patternProperties") {
    MASKD_RETURN_IF_ERROR(MergePatternProperties(a, v));
  } else if (k == "uniqueItems") {
    a = a.is_boolean() && a.get<bool>() ? a : v;
  } else if (k == "not") {
    a = json{{"anyOf", json::array({a, v})}};
  } else if (k == "nullable") {
    a = a.is_boolean() && v.is_boolean() ? json(a.get<bool>() && v.get<bool>()) : a;
  } else if (k == kUnsupportedKw) {
    // Keep the first: either is an error if reached.
  } else if (k == "format") {
    Warn("format", ptr, absl::StrCat("allOf of two formats: \"", Shown(v.dump()), "\" not enforced"));
  } else if (IsValidationKeyword(k)) {
    return Invalid(absl::StrCat("allOf at ", Where(ptr), ": cannot merge two different \"", k,
                                "\" keywords"));
  }
  // Annotations and unknown keywords: keep the first.
  return absl::OkStatus();
}

// if/then/else as (if and then) or (not if and else): disjoint branches.
absl::StatusOr<json> Converter::Conditional(const json& s, const std::string& ptr) {
  auto t = s.find("then");
  auto e = s.find("else");
  if (t == s.end() && e == s.end()) return json(true);
  const json& cond = s["if"];
  json a = json{{"allOf", {cond, t == s.end() ? json(true) : *t}}};
  MASKD_ASSIGN_OR_RETURN(json ni, Negate(cond, Child(ptr, "if"), 0));
  json b = json{{"allOf", {ni, e == s.end() ? json(true) : *e}}};
  return json{{"anyOf", {a, b}}};
}

// One dependency "a" -> (required names | schema) as a union of two
// disjoint branches: "a" absent, or "a" present with what it needs. When
// the schema already requires "a", only the second branch.
json Converter::Dependency(const std::string& a, const json& dep, const json& s) {
  bool a_required = false;
  if (auto r = s.find("required"); r != s.end() && r->is_array())
    a_required = std::find(r->begin(), r->end(), json(a)) != r->end();
  json present;
  if (dep.is_array()) {
    json req = json::array({a});
    for (auto& b : dep) req.push_back(b);
    present = json{{"required", req}};
  } else {
    present = json{{"allOf", {json{{"required", {a}}}, dep}}};
  }
  if (a_required) return present;
  return json{{"anyOf", {json{{"properties", {{a, false}}}}, present}}};
}

// Moves `if`/`then`/`else` and the dependency keywords of `s` into a list of
// schemas that all hold (allOf), erasing them from `s`.
absl::Status Converter::LowerConditionals(json& s, const std::string& ptr, json* parts) {
  if (s.contains("if")) {
    MASKD_ASSIGN_OR_RETURN(json conditional, Conditional(s, ptr));
    parts->push_back(std::move(conditional));
    s.erase("if");
    s.erase("then");
    s.erase("else");
  }
  for (const char* k : kDependencyKeywords) {
    auto d = s.find(k);
    if (d == s.end()) continue;
    if (!d->is_object()) return Invalid(absl::StrCat(k, " at ", Where(ptr), " is not an object"));
    for (auto it = d->begin(); it != d->end(); ++it) {
      if (!it->is_array() && !it->is_object() && !it->is_boolean()) {
        return Invalid(absl::StrCat(k, " at ", Where(ptr), ": \"", Shown(it.key()),
                                    "\" is not an array or a schema"));
      }
      parts->push_back(Dependency(it.key(), it.value(), s));
    }
    s.erase(k);
  }
  return absl::OkStatus();
}

// A flat schema (no $ref/allOf) with a `not` beyond types, `if` or
// dependencies: the same schema with those keywords moved into allOf, and
// its types made explicit (what ConvertPlain would infer), so that merged
// branches carrying their own types cannot change them.
absl::StatusOr<std::optional<json>> Converter::Lower(const json& s, const std::string& ptr) {
  auto n = s.find("not");
  bool complex_not = n != s.end() && !IsTypeOnlyNot(*n);
  bool has = complex_not || s.contains("if") || s.contains("dependencies") ||
             s.contains("dependentRequired") || s.contains("dependentSchemas");
  if (!has) return std::optional<json>();
  json out = s;
  if (auto t = out.find("type"); t != out.end()) {
    if (auto nl = out.find("nullable"); nl != out.end() && nl->is_boolean() && nl->get<bool>()) {
      json ts = t->is_array() ? *t : json::array({*t});
      ts.push_back("null");
      out["type"] = ts;
    }
  } else {
    out["type"] = TypeList(InferTypes(out));
  }
  out.erase("nullable");
  json parts = json::array();
  if (complex_not) {
    MASKD_ASSIGN_OR_RETURN(json neg, Negate(*n, Child(ptr, "not"), 0));
    // Drop branches of types `s` does not allow: smaller products.
    if (neg.is_object() && neg.contains("anyOf") && out["type"].is_array()) {
      std::set<std::string> allowed;
      for (auto& t : out["type"])
        if (t.is_string()) allowed.insert(t.get<std::string>());
      if (allowed.count("number")) allowed.insert("integer");
      if (allowed.count("integer")) allowed.insert("number");  // integers among numbers
      std::vector<json> kept;
      for (auto& b : neg["anyOf"]) {
        bool keep = true;
        if (b.is_object() && b.contains("type")) {
          keep = false;
          json ts = b["type"].is_array() ? b["type"] : json::array({b["type"]});
          for (auto& t : ts)
            if (t.is_string() && allowed.count(t.get<std::string>())) keep = true;
        }
        if (keep) kept.push_back(b);
      }
      neg = AnyOfOrSingle(std::move(kept));
    }
    parts.push_back(neg);
    out.erase("not");
  }
  MASKD_RETURN_IF_ERROR(LowerConditionals(out, ptr, &parts));
  out["allOf"] = parts;
  return std::optional<json>(std::move(out));
}

}  // namespace maskd::json_schema_internal
