// `not`: the complement of a schema, as a schema (JSON to JSON).
// See schema/internal/converter.h.
#include "schema/internal/converter.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schema/internal/messages.h"

namespace maskd::json_schema_internal {

// ---------- not, if/then/else, dependencies: rewritten as allOf/anyOf
// The rewrites below produce schemas whose instances are exactly those of
// the original (spec semantics); a part that has no exact rewrite becomes a
// kUnsupportedKw marker that is an error only if one of its types survives
// the merge with its siblings (so {"type": "integer", "not": {"pattern":
// ...}} converts: no string survives).

json Marker(const char* type, const std::string& keyword, const std::string& ptr,
            const std::string& why) {
  json m = json::object();
  if (type) m["type"] = type;
  m[kUnsupportedKw] = json::array({keyword, ptr, why});
  return m;
}

json AnyOfOrSingle(std::vector<json> branches) {
  std::vector<json> kept;
  for (auto& b : branches) {
    if (b.is_boolean() && !b.get<bool>()) continue;
    if (b.is_boolean() || (b.is_object() && b.empty())) return true;
    kept.push_back(std::move(b));
  }
  if (kept.empty()) return false;
  if (kept.size() == 1) return kept[0];
  json a = json::array();
  for (auto& b : kept) a.push_back(std::move(b));
  return json{{"anyOf", std::move(a)}};
}

// `not` whose content only restricts types: handled by ApplyNot.
bool IsTypeOnlyNot(const json& n) {
  if (n.is_boolean()) return true;
  if (!n.is_object()) return false;
  for (auto it = n.begin(); it != n.end(); ++it)
    if (it.key() != "type" && IsValidationKeyword(it.key())) return false;
  return true;
}

namespace {

// Appends the branch "a value of type `t` with `extra`".
void AddTypeBranch(std::vector<json>* out, const char* t, json extra) {
  extra["type"] = t;
  out->push_back(std::move(extra));
}

bool IsFalse(const json& s) { return s.is_boolean() && !s.get<bool>(); }

// Values of the types `s` does not allow ("type", with "nullable").
void NegateType(const json& s, std::vector<json>* out) {
  auto t = s.find("type");
  if (t == s.end()) return;
  std::set<std::string> ts;
  if (t->is_string()) ts.insert(t->get<std::string>());
  if (t->is_array())
    for (auto& x : *t)
      if (x.is_string()) ts.insert(x.get<std::string>());
  if (auto n = s.find("nullable"); n != s.end() && n->is_boolean() && n->get<bool>())
    ts.insert("null");
  std::set<std::string> comp;
  for (auto& x : AllTypes())
    if (!ts.count(x)) comp.insert(x);
  if (ts.count("number")) comp.erase("integer");
  if (ts.count("integer") || ts.count("number")) comp.erase("number");
  if (ts.count("integer") && !ts.count("number")) {
    out->push_back(json{{"type", "number"}, {"not", {{"type", "integer"}}}});
  }
  if (!comp.empty()) out->push_back(json{{"type", TypeList(comp)}});
}

// Some key outside the names: exact when the names are "anything but these
// strings" (some key is one of them) or nothing.
void NegatePropertyNames(const json& names_in, const std::string& ptr, std::vector<json>* out) {
  json names = names_in;
  if (names.is_boolean() && !names.get<bool>()) {
    AddTypeBranch(out, "object", json{{"minProperties", 1}});
  } else if (names.is_object() && names.size() == 1 && names.contains("not") &&
             names["not"].is_object() && names["not"].size() == 1 &&
             (names["not"].contains("const") || names["not"].contains("enum"))) {
    const json& inner = names["not"];
    json vals = inner.contains("const") ? json::array({inner["const"]}) : inner["enum"];
    for (auto& v : vals)
      if (v.is_string()) AddTypeBranch(out, "object", json{{"required", {v}}});
  } else if (!(names.is_boolean() || (names.is_object() && !HasValidation(names)))) {
    out->push_back(Marker("object", "not", ptr, "negated propertyNames"));
  }
}

// Numbers past each bound; a marker for multipleOf.
void NegateNumber(const json& s, const std::string& ptr, std::vector<json>* out) {
  for (auto [k, nk] : {std::pair<const char*, const char*>{"minimum", "exclusiveMaximum"},
                       {"exclusiveMinimum", "maximum"}, {"maximum", "exclusiveMinimum"},
                       {"exclusiveMaximum", "minimum"}}) {
    if (auto v = s.find(k); v != s.end() && v->is_number()) AddTypeBranch(out, "number", json{{nk, *v}});
  }
  if (s.contains("multipleOf")) out->push_back(Marker("number", "not", ptr, "negated multipleOf"));
}

}  // namespace

// The complement of schema `s` (at `ptr`): a schema matching exactly the
// JSON values `s` rejects. Spec semantics: no type inference inside `not`
// (`{"not": {"required": ["a"]}}` is "an object without a", not "anything
// but an object with a"). The union of one complement per keyword family,
// in this order.
absl::StatusOr<json> Converter::Negate(const json& s_in, const std::string& ptr, int depth) {
  if (depth > 32) return Unsupported("not", ptr, "nested too deep (recursive $ref inside not?)");
  if (s_in.is_boolean()) return json(!s_in.get<bool>());
  if (!s_in.is_object()) return Invalid(absl::StrCat("schema at ", Where(ptr), " is not an object"));
  json s = s_in;
  NormalizeBounds(s);
  std::vector<json> out;
  if (auto it = s.find("$ref"); it != s.end() && it->is_string()) {
    std::string tptr;
    MASKD_ASSIGN_OR_RETURN(const json* target, Resolve(it->get<std::string>(), ptr, &tptr));
    MASKD_ASSIGN_OR_RETURN(json n, Negate(*target, tptr, depth + 1));
    out.push_back(std::move(n));
  }
  NegateType(s, &out);
  if (s.contains("enum") || s.contains("const")) NegateEnum(s, ptr, &out);
  MASKD_RETURN_IF_ERROR(NegateObject(s, ptr, depth, &out));
  MASKD_RETURN_IF_ERROR(NegateDependencies(s, ptr, depth, &out));
  MASKD_RETURN_IF_ERROR(NegateArray(s, ptr, depth, &out));
  MASKD_RETURN_IF_ERROR(NegateString(s, ptr, &out));
  NegateNumber(s, ptr, &out);
  MASKD_RETURN_IF_ERROR(NegateApplicators(s, ptr, depth, &out));
  if (auto m = s.find(kUnsupportedKw); m != s.end()) out.push_back(json{{kUnsupportedKw, *m}});
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (IsUnsupported(it.key())) out.push_back(Marker(nullptr, it.key(), ptr, ""));
  }
  return AnyOfOrSingle(std::move(out));
}

absl::Status Converter::NegateObject(const json& s, const std::string& ptr, int depth,
                                     std::vector<json>* out) {
  if (auto r = s.find("required"); r != s.end() && r->is_array()) {
    for (auto& k : *r) {
      if (k.is_string()) AddTypeBranch(out, "object", json{{"properties", {{k.get<std::string>(), false}}}});
    }
  }
  if (auto p = s.find("properties"); p != s.end() && p->is_object()) {
    for (auto it = p->begin(); it != p->end(); ++it) {
      MASKD_ASSIGN_OR_RETURN(json n, Negate(it.value(), Child(Child(ptr, "properties"), it.key()), depth + 1));
      if (IsFalse(n)) continue;
      AddTypeBranch(out, "object", json{{"required", {it.key()}}, {"properties", {{it.key(), n}}}});
    }
  }
  for (const char* k : {"additionalProperties", "unevaluatedProperties"}) {
    auto a = s.find(k);
    if (a == s.end() || (a->is_boolean() && a->get<bool>()) || (a->is_object() && a->empty()))
      continue;
    bool declares = s.contains("properties") || s.contains("patternProperties");
    if (std::string(k) == "unevaluatedProperties") {
      // Applicators beside it evaluate properties too.
      for (const char* ap : {"allOf", "anyOf", "oneOf", "$ref", "if", "dependentSchemas",
                             "dependencies", "additionalProperties"})
        declares = declares || s.contains(ap);
    }
    if (a->is_boolean() && !declares) {
      AddTypeBranch(out, "object", json{{"minProperties", 1}});
    } else {
      out->push_back(Marker("object", "not", ptr, absl::StrCat("negated ", k)));
    }
    break;  // additionalProperties wins (as in ConvertObject)
  }
  if (auto pp = s.find("patternProperties"); pp != s.end() && pp->is_object()) {
    for (auto it = pp->begin(); it != pp->end(); ++it) {
      MASKD_ASSIGN_OR_RETURN(json n, Negate(it.value(), Child(Child(ptr, "patternProperties"), it.key()), depth + 1));
      if (IsFalse(n)) continue;
      out->push_back(Marker("object", "not", ptr, "negated patternProperties"));
    }
  }
  if (auto pn = s.find("propertyNames"); pn != s.end()) NegatePropertyNames(*pn, ptr, out);
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> min, IntKw(s, "minProperties", ptr));
  if (min && *min > 0) AddTypeBranch(out, "object", json{{"maxProperties", *min - 1}});
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> max, IntKw(s, "maxProperties", ptr));
  if (max) AddTypeBranch(out, "object", json{{"minProperties", *max + 1}});
  return absl::OkStatus();
}

absl::Status Converter::NegateDependencies(const json& s, const std::string& ptr, int depth,
                                           std::vector<json>* out) {
  for (const char* k : {"dependencies", "dependentRequired", "dependentSchemas"}) {
    auto d = s.find(k);
    if (d == s.end() || !d->is_object()) continue;
    for (auto it = d->begin(); it != d->end(); ++it) {
      const std::string& a = it.key();
      if (it->is_array()) {
        for (auto& b : *it) {
          if (b.is_string() && b.get<std::string>() != a)
            AddTypeBranch(out, "object", json{{"required", {a}}, {"properties", {{b.get<std::string>(), false}}}});
        }
      } else {
        MASKD_ASSIGN_OR_RETURN(json n, Negate(it.value(), Child(Child(ptr, k), a), depth + 1));
        if (IsFalse(n)) continue;
        out->push_back(json{{"allOf", {json{{"type", "object"}, {"required", {a}}}, n}}});
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Converter::NegateArray(const json& s, const std::string& ptr, int depth,
                                    std::vector<json>* out) {
  MASKD_RETURN_IF_ERROR(NegateItems(s, ptr, depth, out));
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> min, IntKw(s, "minItems", ptr));
  if (min && *min > 0) AddTypeBranch(out, "array", json{{"maxItems", *min - 1}});
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> max, IntKw(s, "maxItems", ptr));
  if (max) AddTypeBranch(out, "array", json{{"minItems", *max + 1}});
  if (auto u = s.find("uniqueItems"); u != s.end() && u->is_boolean() && u->get<bool>())
    out->push_back(Marker("array", "not", ptr, "negated uniqueItems"));
  if (auto c = s.find("contains"); c != s.end()) {
    MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> min_c, IntKw(s, "minContains", ptr));
    MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> hi, IntKw(s, "maxContains", ptr));
    const int64_t lo = min_c.value_or(1);
    if (lo > 0) AddTypeBranch(out, "array", json{{"contains", *c}, {"minContains", 0}, {"maxContains", lo - 1}});
    if (hi) AddTypeBranch(out, "array", json{{"contains", *c}, {"minContains", *hi + 1}});
  }
  return absl::OkStatus();
}

// Arrays with an element outside its schema: a tuple position's, the
// elements' after the tuple, or every element's (items as one schema).
absl::Status Converter::NegateItems(const json& s, const std::string& ptr, int depth,
                                    std::vector<json>* out) {
  auto items = s.find("items");
  auto prefix = s.find("prefixItems");
  const bool use_prefix = prefix != s.end() && prefix->is_array();
  const json* tuple = use_prefix ? &*prefix
                      : items != s.end() && items->is_array() ? &*items : nullptr;
  const char* tuple_kw = use_prefix ? "prefixItems" : "items";
  if (tuple) {
    for (size_t i = 0; i < tuple->size(); ++i) {
      MASKD_ASSIGN_OR_RETURN(json n, Negate((*tuple)[i], Child(ptr, tuple_kw, i), depth + 1));
      if (IsFalse(n)) continue;
      json t = json::array();
      for (size_t j = 0; j < i; ++j) t.push_back(true);
      t.push_back(n);
      AddTypeBranch(out, "array", json{{"minItems", i + 1}, {tuple_kw, t}});
    }
    // The schema for the elements after the tuple.
    const json* rest = nullptr;
    if (use_prefix && items != s.end()) rest = &*items;
    if (auto ai = s.find("additionalItems"); !use_prefix && ai != s.end()) rest = &*ai;
    if (rest) {
      MASKD_ASSIGN_OR_RETURN(json n, Negate(*rest, ptr, depth + 1));
      if (n.is_boolean() && n.get<bool>()) {
        AddTypeBranch(out, "array", json{{"minItems", tuple->size() + 1}});
      } else if (!n.is_boolean()) {
        out->push_back(Marker("array", "not", ptr, "negated items after a tuple"));
      }
    }
  } else if (items != s.end()) {
    MASKD_ASSIGN_OR_RETURN(json n, Negate(*items, Child(ptr, "items"), depth + 1));
    if (!IsFalse(n)) AddTypeBranch(out, "array", json{{"contains", {{"not", *items}}}});
  }
  return absl::OkStatus();
}

// Strings outside the length bounds or the excluded strings; a marker for
// pattern and format (no exact complement).
absl::Status Converter::NegateString(const json& s, const std::string& ptr,
                                     std::vector<json>* out) {
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> min, IntKw(s, "minLength", ptr));
  if (min && *min > 0) AddTypeBranch(out, "string", json{{"maxLength", *min - 1}});
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> max, IntKw(s, "maxLength", ptr));
  if (max) AddTypeBranch(out, "string", json{{"minLength", *max + 1}});
  if (s.contains("pattern")) out->push_back(Marker("string", "not", ptr, "negated pattern"));
  if (s.contains("format")) out->push_back(Marker("string", "not", ptr, "negated format"));
  if (auto ns = s.find(kNotStrings); ns != s.end()) AddTypeBranch(out, "string", json{{"enum", *ns}});
  return absl::OkStatus();
}

// The complement of each combinator: any allOf branch's, all anyOf/oneOf
// branches' (oneOf as anyOf), the `not` content, and the failing branch of
// if/then/else.
absl::Status Converter::NegateApplicators(const json& s, const std::string& ptr, int depth,
                                          std::vector<json>* out) {
  if (auto a = s.find("allOf"); a != s.end() && a->is_array()) {
    for (size_t i = 0; i < a->size(); ++i) {
      MASKD_ASSIGN_OR_RETURN(json n, Negate((*a)[i], Child(ptr, "allOf", i), depth + 1));
      out->push_back(std::move(n));
    }
  }
  for (const char* k : {"anyOf", "oneOf"}) {
    auto a = s.find(k);
    if (a == s.end() || !a->is_array()) continue;
    if (std::string(k) == "oneOf" && a->size() > 1 && !DisjointBranches(*a)) {
      Warn("oneOf", ptr, "inside not: treated as anyOf (values matching several branches rejected)");
    }
    json all = json::array();
    bool none = false;
    for (size_t i = 0; i < a->size(); ++i) {
      MASKD_ASSIGN_OR_RETURN(json n, Negate((*a)[i], Child(ptr, k, i), depth + 1));
      if (IsFalse(n)) none = true;
      all.push_back(n);
    }
    if (!none) out->push_back(json{{"allOf", all}});
  }
  if (auto n = s.find("not"); n != s.end()) out->push_back(*n);
  if (auto i = s.find("if"); i != s.end()) {
    if (auto t = s.find("then"); t != s.end()) {
      MASKD_ASSIGN_OR_RETURN(json n, Negate(*t, Child(ptr, "then"), depth + 1));
      out->push_back(json{{"allOf", {*i, n}}});
    }
    if (auto e = s.find("else"); e != s.end()) {
      MASKD_ASSIGN_OR_RETURN(json n, Negate(*e, Child(ptr, "else"), depth + 1));
      MASKD_ASSIGN_OR_RETURN(json ni, Negate(*i, Child(ptr, "if"), depth + 1));
      out->push_back(json{{"allOf", {ni, n}}});
    }
  }
  return absl::OkStatus();
}

// Values of each type other than the enum's (or const's).
void Converter::NegateEnum(const json& s, const std::string& ptr, std::vector<json>* out) {
  json values = json::array();
  if (auto e = s.find("enum"); e != s.end() && e->is_array()) values = *e;
  if (auto c = s.find("const"); c != s.end()) {
    bool in = !s.contains("enum") || std::find(values.begin(), values.end(), *c) != values.end();
    values = in ? json::array({*c}) : json::array();
  }
  bool has_null = false, has_true = false, has_false = false;
  json strings = json::array();
  std::vector<std::pair<Decimal, json>> numbers;
  bool empty_array = false, empty_object = false, other_array = false, other_object = false;
  for (auto& v : values) {
    if (v.is_null()) has_null = true;
    else if (v.is_boolean()) (v.get<bool>() ? has_true : has_false) = true;
    else if (v.is_string()) strings.push_back(v);
    else if (v.is_number()) {
      if (auto d = DecimalOf(v)) numbers.emplace_back(*d, v);
    } else if (v.is_array()) (v.empty() ? empty_array : other_array) = true;
    else if (v.is_object()) (v.empty() ? empty_object : other_object) = true;
  }
  if (!has_null) out->push_back(json{{"type", "null"}});
  if (!has_true && !has_false) out->push_back(json{{"type", "boolean"}});
  else if (!has_true || !has_false) out->push_back(json{{"type", "boolean"}, {"const", !has_true}});
  if (strings.empty()) out->push_back(json{{"type", "string"}});
  else out->push_back(json{{"type", "string"}, {kNotStrings, strings}});
  std::sort(numbers.begin(), numbers.end(),
            [](auto& a, auto& b) { return CompareDecimal(a.first, b.first) < 0; });
  if (numbers.empty()) {
    out->push_back(json{{"type", "number"}});
  } else {
    out->push_back(json{{"type", "number"}, {"exclusiveMaximum", numbers.front().second}});
    for (size_t i = 0; i + 1 < numbers.size(); ++i) {
      if (CompareDecimal(numbers[i].first, numbers[i + 1].first) == 0) continue;
      out->push_back(json{{"type", "number"}, {"exclusiveMinimum", numbers[i].second},
                          {"exclusiveMaximum", numbers[i + 1].second}});
    }
    out->push_back(json{{"type", "number"}, {"exclusiveMinimum", numbers.back().second}});
  }
  if (other_array) out->push_back(Marker("array", "not", ptr, "enum/const with a non-empty array"));
  else out->push_back(empty_array ? json{{"type", "array"}, {"minItems", 1}} : json{{"type", "array"}});
  if (other_object) out->push_back(Marker("object", "not", ptr, "enum/const with a non-empty object"));
  else out->push_back(empty_object ? json{{"type", "object"}, {"minProperties", 1}} : json{{"type", "object"}});
}

}  // namespace maskd::json_schema_internal
