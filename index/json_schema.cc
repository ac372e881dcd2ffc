// JSON Schema -> regex. See index/json_schema.h and docs/json-schema.md.
#include "index/json_schema.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "index/dfa.h"
#include "index/json_schema_internal.h"

namespace maskd {
namespace {

using json = nlohmann::ordered_json;
using Re = std::optional<std::string>;  // nullopt: the empty language
using namespace json_schema_internal;

struct ConvertError {
  absl::Status status;
};

[[noreturn]] void Throw(absl::Status s) { throw ConvertError{std::move(s)}; }
[[noreturn]] void Invalid(const std::string& msg) { Throw(absl::InvalidArgumentError(msg)); }

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
std::string Where(const std::string& ptr) { return ptr.empty() ? "/" : ptr; }

// Keywords not listed below (annotations such as title, description, examples,
// default, $schema, $id, $comment, deprecated, readOnly, writeOnly, and
// non-JSON-Schema keywords such as x-*) are ignored, as the spec says.
// Validation keywords this converter handles.
bool IsHandled(const std::string& k) {
  static const std::set<std::string> kSet = {
      "type", "enum", "const", "properties", "required", "additionalProperties",
      "minProperties", "maxProperties", "items", "prefixItems", "additionalItems", "minItems",
      "maxItems", "uniqueItems", "minLength", "maxLength", "pattern", "format", "minimum",
      "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "anyOf", "oneOf",
      "allOf", "$ref", "nullable", "patternProperties", "propertyNames",
      "unevaluatedProperties", "not"};
  return kSet.count(k) > 0;
}
// Validation keywords no regex built here enforces: an error.
bool IsUnsupported(const std::string& k) {
  static const std::set<std::string> kSet = {
      "if", "dependencies", "dependentRequired", "dependentSchemas", "contains", "minContains",
      "maxContains", "unevaluatedItems", "$dynamicRef", "$recursiveRef", "contentSchema"};
  return kSet.count(k) > 0;
}
bool IsValidationKeyword(const std::string& k) { return IsHandled(k) || IsUnsupported(k); }

bool HasValidation(const json& s, const std::set<std::string>& except = {}) {
  if (!s.is_object()) return false;
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (except.count(it.key())) continue;
    if (IsValidationKeyword(it.key())) return true;
  }
  return false;
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

// Draft-4 boolean exclusiveMinimum/Maximum to the numeric form.
void NormalizeBounds(json& s) {
  if (!s.is_object()) return;
  for (auto [ex, bound] : {std::pair<const char*, const char*>{"exclusiveMinimum", "minimum"},
                           {"exclusiveMaximum", "maximum"}}) {
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

bool IsIntegral(const json& v) {
  if (v.is_number_integer()) return true;
  if (v.is_number_float()) {
    double d = v.get<double>();
    return std::isfinite(d) && std::floor(d) == d;
  }
  return false;
}

class Converter {
 public:
  Converter(const json& root, const JsonSchemaOptions& o) : root_(root), o_(o) {
    switch (o.whitespace) {
      case JsonWhitespace::kPython:
        item_sep_ = ", ";
        key_sep_ = ": ";
        break;
      case JsonWhitespace::kCompact:
        item_sep_ = ",";
        key_sep_ = ":";
        break;
      case JsonWhitespace::kFlexible:
        ws_ = "(?:" + o.whitespace_pattern + ")";
        item_sep_ = ws_ + "," + ws_;
        key_sep_ = ws_ + ":" + ws_;
        break;
    }
  }

  std::string Run() {
    Re r = Convert(root_, "");
    if (!r) {
      if (!cut_required_.empty()) {
        Invalid(absl::StrCat("schema has no instance within max_recursion_depth ",
                             o_.max_recursion_depth, ": ", cut_required_));
      }
      Invalid("schema has no valid instance (it is false or contradictory)");
    }
    return *r;
  }

  std::vector<std::string> warnings() const {
    return std::vector<std::string>(warnings_.begin(), warnings_.end());
  }

 private:
  void Warn(const std::string& keyword, const std::string& ptr, const std::string& what) {
    warnings_.insert(absl::StrCat(keyword, " at ", Where(ptr), ": ", what));
  }
  [[noreturn]] void Unsupported(const std::string& keyword, const std::string& ptr,
                                const std::string& why = "") {
    Invalid(absl::StrCat("unsupported keyword \"", keyword, "\" at ", Where(ptr),
                         why.empty() ? "" : ": ", why));
  }
  void CheckSize(const Re& r) {
    if (r && r->size() > o_.max_regex_bytes) {
      Throw(absl::ResourceExhaustedError(absl::StrCat(
          "regex exceeds max_regex_bytes (", o_.max_regex_bytes, ")")));
    }
  }

  // ---------- separators
  std::string Open(char c) const {
    return absl::StrCat("\\", std::string(1, c), ws_);
  }
  std::string Close(char c) const { return absl::StrCat(ws_, "\\", std::string(1, c)); }

  // ---------- $ref
  const json& ResolvePointer(const std::string& fragment, const std::string& ref,
                             const std::string& ptr, std::string* target_ptr) {
    // fragment: after '#', percent-encoded JSON pointer.
    std::string decoded;
    for (size_t i = 0; i < fragment.size(); ++i) {
      if (fragment[i] == '%' && i + 2 < fragment.size()) {
        int v = 0;
        bool ok = true;
        for (int k = 1; k <= 2; ++k) {
          char c = fragment[i + k];
          int d = c >= '0' && c <= '9' ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
          if (d < 0) ok = false;
          v = v * 16 + d;
        }
        if (ok) {
          decoded.push_back(static_cast<char>(v));
          i += 2;
          continue;
        }
      }
      decoded.push_back(fragment[i]);
    }
    if (!decoded.empty() && decoded[0] != '/') {
      // A plain-name fragment: $anchor or draft-4..7 "id": "#name".
      auto it = Anchors().find(decoded);
      if (it == Anchors().end()) {
        Invalid(absl::StrCat("unknown $ref \"", ref, "\" at ", Where(ptr)));
      }
      *target_ptr = it->second.first;
      return *it->second.second;
    }
    const json* cur = &root_;
    std::string out;
    size_t i = 0;
    while (i < decoded.size()) {
      size_t j = decoded.find('/', i + 1);
      if (j == std::string::npos) j = decoded.size();
      std::string tok = decoded.substr(i + 1, j - i - 1);
      std::string key;
      for (size_t k = 0; k < tok.size(); ++k) {
        if (tok[k] == '~' && k + 1 < tok.size() && (tok[k + 1] == '0' || tok[k + 1] == '1')) {
          key.push_back(tok[k + 1] == '0' ? '~' : '/');
          ++k;
        } else {
          key.push_back(tok[k]);
        }
      }
      if (cur->is_object() && cur->contains(key)) {
        cur = &(*cur)[key];
      } else if (cur->is_array() && !key.empty() &&
                 key.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoul(key) < cur->size()) {
        cur = &(*cur)[std::stoul(key)];
      } else {
        Invalid(absl::StrCat("unknown $ref \"", ref, "\" at ", Where(ptr)));
      }
      out += "/" + PtrEscape(key);
      i = j;
    }
    *target_ptr = out;
    return *cur;
  }

  const std::map<std::string, std::pair<std::string, const json*>>& Anchors() {
    if (!anchors_built_) {
      anchors_built_ = true;
      CollectAnchors(root_, "");
    }
    return anchors_;
  }
  void CollectAnchors(const json& s, const std::string& ptr) {
    if (s.is_object()) {
      for (const char* k : {"$anchor", "$dynamicAnchor"}) {
        auto it = s.find(k);
        if (it != s.end() && it->is_string()) anchors_.emplace(it->get<std::string>(), std::pair{ptr, &s});
      }
      for (const char* k : {"$id", "id"}) {
        auto it = s.find(k);
        if (it != s.end() && it->is_string()) {
          std::string id = it->get<std::string>();
          if (!id.empty() && id[0] == '#') anchors_.emplace(id.substr(1), std::pair{ptr, &s});
        }
      }
      for (auto it = s.begin(); it != s.end(); ++it) {
        if (it.key() == "enum" || it.key() == "const" || it.key() == "examples" ||
            it.key() == "default")
          continue;
        CollectAnchors(it.value(), Child(ptr, it.key()));
      }
    } else if (s.is_array()) {
      for (size_t i = 0; i < s.size(); ++i) CollectAnchors(s[i], absl::StrCat(ptr, "/", i));
    }
  }

  std::string RootId() const {
    for (const char* k : {"$id", "id"}) {
      auto it = root_.find(k);
      if (root_.is_object() && it != root_.end() && it->is_string()) {
        std::string id = it->get<std::string>();
        if (auto h = id.find('#'); h != std::string::npos) id = id.substr(0, h);
        return id;
      }
    }
    return "";
  }

  const json& Resolve(const std::string& ref, const std::string& ptr, std::string* target_ptr) {
    size_t hash = ref.find('#');
    std::string base = hash == std::string::npos ? ref : ref.substr(0, hash);
    std::string fragment = hash == std::string::npos ? "" : ref.substr(hash + 1);
    if (!base.empty()) {
      std::string id = RootId();
      bool same = !id.empty() && (base == id || (id.size() > base.size() &&
                                                 id.compare(id.size() - base.size(), base.size(),
                                                            base) == 0 &&
                                                 id[id.size() - base.size() - 1] == '/'));
      if (!same) {
        Invalid(absl::StrCat("unsupported $ref \"", ref, "\" at ", Where(ptr),
                             ": only local references (#...) are resolved"));
      }
    }
    return ResolvePointer(fragment, ref, ptr, target_ptr);
  }

  Re ConvertRef(const std::string& ref, const std::string& ptr) {
    std::string tptr;
    const json& target = Resolve(ref, ptr, &tptr);
    if (auto it = ref_cache_.find(tptr); it != ref_cache_.end()) return it->second;
    int& count = ref_stack_[tptr];
    if (count >= o_.max_recursion_depth) {
      ++cuts_;
      Warn("$ref", ptr,
           absl::StrCat("recursion into ", Where(tptr), " cut at depth ", o_.max_recursion_depth));
      return std::nullopt;
    }
    ++count;
    int before = cuts_;
    Re r = Convert(target, tptr);
    --ref_stack_[tptr];
    if (cuts_ == before) ref_cache_[tptr] = r;
    return r;
  }

  // ---------- allOf merging
  // Merges `s` (at `ptr`) into `acc` (an object schema, or false).
  void MergeInto(json& acc, const json& s_in, const std::string& ptr, int depth) {
    if (depth > 64) Invalid(absl::StrCat("allOf/$ref nesting too deep at ", Where(ptr)));
    if (acc.is_boolean()) return;  // already false
    if (s_in.is_boolean()) {
      if (!s_in.get<bool>()) acc = false;
      return;
    }
    if (!s_in.is_object()) Invalid(absl::StrCat("schema at ", Where(ptr), " is not an object"));
    json s = s_in;
    NormalizeBounds(s);
    if (auto it = s.find("$ref"); it != s.end() && it->is_string()) {
      std::string tptr;
      const json& target = Resolve(it->get<std::string>(), ptr, &tptr);
      s.erase("$ref");
      MergeInto(acc, target, tptr, depth + 1);
      if (acc.is_boolean()) return;
    }
    if (auto it = s.find("allOf"); it != s.end() && it->is_array()) {
      json parts = *it;
      s.erase("allOf");
      for (size_t i = 0; i < parts.size(); ++i) {
        MergeInto(acc, parts[i], Child(ptr, "allOf", i), depth + 1);
        if (acc.is_boolean()) return;
      }
    }
    // Properties: each side's additionalProperties applies to the other
    // side's extra properties (spec semantics of allOf).
    const json* acc_props = acc.contains("properties") ? &acc["properties"] : nullptr;
    const json* s_props = s.contains("properties") ? &s["properties"] : nullptr;
    json merged_props = acc_props ? *acc_props : json::object();
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
    if (acc_props && s.contains("additionalProperties") && !s.contains("patternProperties")) {
      for (auto it = acc_props->begin(); it != acc_props->end(); ++it) {
        if (s_props && s_props->contains(it.key())) continue;
        merged_props[it.key()] =
            json{{"allOf", json::array({merged_props[it.key()], s["additionalProperties"]})}};
      }
    }
    if (acc_props || s_props) acc["properties"] = merged_props;

    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      const json& v = it.value();
      if (k == "properties") continue;
      if (!acc.contains(k)) {
        acc[k] = v;
        continue;
      }
      json& a = acc[k];
      if (a == v) continue;
      if (k == "type") {
        auto set_of = [](const json& t) {
          std::set<std::string> out;
          if (t.is_string()) out.insert(t.get<std::string>());
          if (t.is_array())
            for (auto& x : t)
              if (x.is_string()) out.insert(x.get<std::string>());
          return out;
        };
        auto ta = set_of(a), tb = set_of(v);
        json out = json::array();
        for (const char* t : {"null", "boolean", "object", "array", "string", "number", "integer"}) {
          bool in_a = ta.count(t) || (std::string(t) == "integer" && ta.count("number"));
          bool in_b = tb.count(t) || (std::string(t) == "integer" && tb.count("number"));
          if (in_a && in_b) out.push_back(t);
        }
        if (out.size() == 2 && out[0] == "number" && out[1] == "integer") out = json::array({"number"});
        a = out;
      } else if (k == "required") {
        for (auto& x : v)
          if (std::find(a.begin(), a.end(), x) == a.end()) a.push_back(x);
      } else if (k == "enum" || k == "const") {
        json va = k == "enum" ? a : json::array({a});
        json vb = k == "enum" ? v : json::array({v});
        json out = json::array();
        for (auto& x : va)
          if (std::find(vb.begin(), vb.end(), x) != vb.end()) out.push_back(x);
        if (k == "const" && out.empty()) acc = false;
        if (acc.is_boolean()) return;
        if (k == "enum") a = out;
      } else if (k == "minimum" || k == "exclusiveMinimum" || k == "minLength" ||
                 k == "minItems" || k == "minProperties") {
        if (v.is_number() && a.is_number() && v.get<double>() > a.get<double>()) a = v;
      } else if (k == "maximum" || k == "exclusiveMaximum" || k == "maxLength" ||
                 k == "maxItems" || k == "maxProperties") {
        if (v.is_number() && a.is_number() && v.get<double>() < a.get<double>()) a = v;
      } else if (k == "anyOf" || k == "oneOf") {
        if (a.size() * v.size() > 256) {
          Invalid(absl::StrCat("allOf at ", Where(ptr), ": ", k, " product too large"));
        }
        json out = json::array();
        for (auto& x : a)
          for (auto& y : v) out.push_back(json{{"allOf", json::array({x, y})}});
        a = out;
      } else if (k == "items" && a.is_array() != v.is_array()) {
        Invalid(absl::StrCat("allOf at ", Where(ptr), ": cannot merge tuple and list items"));
      } else if ((k == "items" || k == "prefixItems") && a.is_array()) {
        json out = json::array();
        for (size_t i = 0; i < std::max(a.size(), v.size()); ++i) {
          if (i < a.size() && i < v.size()) out.push_back(json{{"allOf", json::array({a[i], v[i]})}});
          else out.push_back(i < a.size() ? a[i] : v[i]);
        }
        a = out;
      } else if (k == "items" || k == "additionalProperties" || k == "additionalItems" ||
                 k == "propertyNames" || k == "unevaluatedProperties") {
        a = json{{"allOf", json::array({a, v})}};
      } else if (k == "patternProperties") {
        for (auto p = v.begin(); p != v.end(); ++p) {
          if (a.contains(p.key())) a[p.key()] = json{{"allOf", json::array({a[p.key()], p.value()})}};
          else a[p.key()] = p.value();
        }
      } else if (k == "uniqueItems") {
        a = a.is_boolean() && a.get<bool>() ? a : v;
      } else if (k == "not") {
        a = json{{"anyOf", json::array({a, v})}};
      } else if (k == "nullable") {
        a = a.is_boolean() && v.is_boolean() ? json(a.get<bool>() && v.get<bool>()) : a;
      } else if (k == "format") {
        Warn("format", ptr, absl::StrCat("allOf of two formats: \"", v.dump(), "\" not enforced"));
      } else if (IsValidationKeyword(k)) {
        Invalid(absl::StrCat("allOf at ", Where(ptr), ": cannot merge two different \"", k,
                             "\" keywords"));
      }
      // Annotations and unknown keywords: keep the first.
    }
  }

  // ---------- the main recursion
  Re Convert(const json& s_in, const std::string& ptr) {
    if (++calls_ > 2000000) Throw(absl::ResourceExhaustedError("schema too complex"));
    if (++depth_ > 400) Invalid(absl::StrCat("schema nesting too deep at ", Where(ptr)));
    struct DepthGuard {
      int& d;
      ~DepthGuard() { --d; }
    } guard{depth_};
    Re r = ConvertInner(s_in, ptr);
    CheckSize(r);
    return r;
  }

  Re ConvertInner(const json& s_in, const std::string& ptr) {
    if (s_in.is_boolean()) return s_in.get<bool>() ? Re(AnyValue(o_.any_value_depth)) : Re();
    if (!s_in.is_object()) {
      Invalid(absl::StrCat("schema at ", Where(ptr), " is not an object or a boolean"));
    }
    for (auto it = s_in.begin(); it != s_in.end(); ++it) {
      if (IsUnsupported(it.key())) Unsupported(it.key(), ptr);
    }
    const json* s = &s_in;
    json normalized;
    if (s->contains("exclusiveMinimum") || s->contains("exclusiveMaximum")) {
      normalized = *s;
      NormalizeBounds(normalized);
      s = &normalized;
    }
    if (auto it = s->find("$ref"); it != s->end()) {
      if (!it->is_string()) Invalid(absl::StrCat("$ref at ", Where(ptr), " is not a string"));
      if (!HasValidation(*s, {"$ref"})) return ConvertRef(it->get<std::string>(), ptr);
      json acc = json::object();
      MergeInto(acc, *s, ptr, 0);
      return Convert(acc, ptr);
    }
    if (auto it = s->find("allOf"); it != s->end()) {
      if (!it->is_array()) Invalid(absl::StrCat("allOf at ", Where(ptr), " is not an array"));
      json acc = json::object();
      MergeInto(acc, *s, ptr, 0);
      return Convert(acc, ptr);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      auto it = s->find(key);
      if (it == s->end()) continue;
      if (!it->is_array() || it->empty()) {
        Invalid(absl::StrCat(key, " at ", Where(ptr), " is not a non-empty array"));
      }
      if (std::string(key) == "oneOf" && it->size() > 1 && !DisjointBranches(*it)) {
        Warn("oneOf", ptr, "exclusivity not enforced (treated as anyOf)");
      }
      json base = *s;
      base.erase(key);
      bool plain = !HasValidation(base);
      std::vector<std::string> parts;
      for (size_t i = 0; i < it->size(); ++i) {
        std::string bptr = Child(ptr, key, i);
        Re r;
        if (plain) {
          r = Convert((*it)[i], bptr);
        } else {
          json acc = json::object();
          MergeInto(acc, base, ptr, 0);
          MergeInto(acc, (*it)[i], bptr, 0);
          r = Convert(acc, bptr);
        }
        if (r) parts.push_back(*r);
      }
      return Union(parts);
    }
    return ConvertPlain(*s, ptr);
  }

  // oneOf whose branches are consts/enums of distinct values or distinct
  // single types cannot overlap.
  bool DisjointBranches(const json& branches) {
    std::set<std::string> types;
    for (auto& b : branches) {
      if (!b.is_object()) return false;
      auto t = b.find("type");
      if (t == b.end() || !t->is_string() || b.contains("$ref") || b.contains("anyOf") ||
          b.contains("oneOf") || b.contains("allOf"))
        return false;
      std::string ts = t->get<std::string>();
      if (ts == "integer") ts = "number";
      if (!types.insert(ts).second) return false;
    }
    return true;
  }

  static std::string Union(const std::vector<std::string>& parts_in) {
    std::vector<std::string> parts;
    std::set<std::string> seen;
    for (auto& p : parts_in)
      if (seen.insert(p).second) parts.push_back(p);
    if (parts.empty()) return std::string();  // caller checks emptiness through Re
    if (parts.size() == 1) return parts[0];
    return "(?:" + absl::StrJoin(parts, "|") + ")";
  }
  static Re UnionRe(const std::vector<std::string>& parts) {
    if (parts.empty()) return std::nullopt;
    return Union(parts);
  }

  Re ConvertPlain(const json& s, const std::string& ptr) {
    // Allowed types.
    static const std::vector<std::string> kAll = {"null", "boolean", "object", "array",
                                                  "string", "integer", "number"};
    std::set<std::string> types;
    if (auto t = s.find("type"); t != s.end()) {
      if (t->is_string()) {
        types.insert(t->get<std::string>());
      } else if (t->is_array()) {
        for (auto& x : *t)
          if (x.is_string()) types.insert(x.get<std::string>());
      } else {
        Invalid(absl::StrCat("type at ", Where(ptr), " is not a string or array"));
      }
      for (auto& x : types)
        if (std::find(kAll.begin(), kAll.end(), x) == kAll.end())
          Invalid(absl::StrCat("unknown type \"", x, "\" at ", Where(ptr)));
    } else {
      types = InferTypes(s);
    }
    if (auto n = s.find("nullable"); n != s.end() && n->is_boolean() && n->get<bool>())
      types.insert("null");
    if (auto n = s.find("not"); n != s.end()) ApplyNot(*n, Child(ptr, "not"), &types);
    if (types.count("number")) types.erase("integer");

    if (s.contains("enum") || s.contains("const")) return ConvertEnum(s, ptr, types);

    std::vector<std::string> parts;
    for (const std::string& t : kAll) {
      if (!types.count(t)) continue;
      Re r;
      if (t == "null") r = "null";
      else if (t == "boolean") r = "(?:true|false)";
      else if (t == "object") r = ConvertObject(s, ptr);
      else if (t == "array") r = ConvertArray(s, ptr);
      else if (t == "string") r = ConvertString(s, ptr);
      else if (t == "integer") r = ConvertInteger(s, ptr);
      else if (t == "number") r = ConvertNumber(s, ptr);
      if (r) parts.push_back(*r);
    }
    return UnionRe(parts);
  }

  std::set<std::string> InferTypes(const json& s) const {
    static const std::vector<std::string> kAll = {"null", "boolean", "object", "array",
                                                  "string", "integer", "number"};
    std::set<std::string> all(kAll.begin(), kAll.end());
    if (!o_.infer_type_from_keywords) return all;
    static const std::map<std::string, std::string> kKeywordType = {
        {"properties", "object"}, {"required", "object"}, {"additionalProperties", "object"},
        {"patternProperties", "object"}, {"minProperties", "object"},
        {"maxProperties", "object"}, {"propertyNames", "object"},
        {"unevaluatedProperties", "object"}, {"items", "array"}, {"prefixItems", "array"},
        {"additionalItems", "array"}, {"minItems", "array"}, {"maxItems", "array"},
        {"uniqueItems", "array"}, {"minLength", "string"}, {"maxLength", "string"},
        {"pattern", "string"}, {"format", "string"}, {"minimum", "number"},
        {"maximum", "number"}, {"exclusiveMinimum", "number"},
        {"exclusiveMaximum", "number"}, {"multipleOf", "number"}};
    std::set<std::string> found;
    for (auto it = s.begin(); it != s.end(); ++it) {
      auto k = kKeywordType.find(it.key());
      if (k != kKeywordType.end()) found.insert(k->second);
    }
    if (found.size() != 1) return all;
    if (*found.begin() == "number") return {"number"};
    return found;
  }

  void ApplyNot(const json& n, const std::string& ptr, std::set<std::string>* types) {
    if (n.is_boolean()) {
      if (n.get<bool>()) types->clear();
      return;
    }
    if (!n.is_object()) Unsupported("not", ptr);
    if (n.empty()) {
      types->clear();
      return;
    }
    bool only_type = true;
    for (auto it = n.begin(); it != n.end(); ++it)
      if (it.key() != "type" && IsValidationKeyword(it.key())) only_type = false;
    if (!only_type || !n.contains("type")) Unsupported("not", ptr, "only \"not\": {\"type\": ...} is enforced");
    std::vector<std::string> ts;
    if (n["type"].is_string()) ts.push_back(n["type"].get<std::string>());
    else if (n["type"].is_array())
      for (auto& x : n["type"]) ts.push_back(x.get<std::string>());
    for (auto& t : ts) {
      if (t == "number") {
        types->erase("number");
        types->erase("integer");
      } else if (t == "integer") {
        if (types->count("number")) Unsupported("not", ptr, "\"not\": integer inside number");
        types->erase("integer");
      } else {
        types->erase(t);
      }
    }
  }

  // ---------- enum / const
  static bool TypeMatches(const json& v, const std::set<std::string>& types) {
    if (v.is_null()) return types.count("null");
    if (v.is_boolean()) return types.count("boolean");
    if (v.is_string()) return types.count("string");
    if (v.is_array()) return types.count("array");
    if (v.is_object()) return types.count("object");
    if (v.is_number()) return types.count("number") || (types.count("integer") && IsIntegral(v));
    return false;
  }

  Re ConvertEnum(const json& s, const std::string& ptr, const std::set<std::string>& types) {
    json values = json::array();
    if (auto e = s.find("enum"); e != s.end()) {
      if (!e->is_array()) Invalid(absl::StrCat("enum at ", Where(ptr), " is not an array"));
      values = *e;
    }
    if (auto c = s.find("const"); c != s.end()) {
      if (s.contains("enum")) {
        if (std::find(values.begin(), values.end(), *c) == values.end()) return std::nullopt;
      }
      values = json::array({*c});
    }
    std::vector<std::string> parts;
    for (auto& v : values) {
      if (!TypeMatches(v, types)) continue;
      parts.push_back(ConstRegex(v));
    }
    return UnionRe(parts);
  }

  std::string ConstRegex(const json& v) {
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

  // ---------- any value
  std::string StringAny() const { return "\"" + JsonCharRegex() + "*\""; }

  const std::string& AnyValue(int depth) {
    if (depth < 0) depth = 0;
    auto it = any_cache_.find(depth);
    if (it != any_cache_.end()) return it->second;
    std::string scalars = absl::StrCat("null|true|false|", *NumberRangeRegex({}, false, {}, false),
                                       "|", StringAny());
    std::string r;
    if (depth == 0) {
      r = "(?:" + scalars + ")";
    } else {
      const std::string v = AnyValue(depth - 1);
      std::string arr = absl::StrCat(Open('['), "(?:", v, "(?:", item_sep_, v, ")*)?", Close(']'));
      std::string kv = absl::StrCat(StringAny(), key_sep_, v);
      std::string obj = absl::StrCat(Open('{'), "(?:", kv, "(?:", item_sep_, kv, ")*)?", Close('}'));
      r = absl::StrCat("(?:", scalars, "|", arr, "|", obj, ")");
    }
    return any_cache_[depth] = r;
  }

  // ---------- numbers
  struct Bounds {
    std::optional<Decimal> lo, hi;
    bool lo_ex = false, hi_ex = false;
  };
  Bounds ReadBounds(const json& s, const std::string& ptr) {
    Bounds b;
    auto tighten_lo = [&](const json& v, bool ex, const char* kw) {
      if (!v.is_number()) Invalid(absl::StrCat(kw, " at ", Where(ptr), " is not a number"));
      auto d = DecimalOf(v);
      if (!d) return;
      if (!b.lo || CompareDecimal(*d, *b.lo) > 0 || (CompareDecimal(*d, *b.lo) == 0 && ex)) {
        b.lo = d;
        b.lo_ex = ex;
      }
    };
    auto tighten_hi = [&](const json& v, bool ex, const char* kw) {
      if (!v.is_number()) Invalid(absl::StrCat(kw, " at ", Where(ptr), " is not a number"));
      auto d = DecimalOf(v);
      if (!d) return;
      if (!b.hi || CompareDecimal(*d, *b.hi) < 0 || (CompareDecimal(*d, *b.hi) == 0 && ex)) {
        b.hi = d;
        b.hi_ex = ex;
      }
    };
    if (auto it = s.find("minimum"); it != s.end()) tighten_lo(*it, false, "minimum");
    if (auto it = s.find("exclusiveMinimum"); it != s.end()) tighten_lo(*it, true, "exclusiveMinimum");
    if (auto it = s.find("maximum"); it != s.end()) tighten_hi(*it, false, "maximum");
    if (auto it = s.find("exclusiveMaximum"); it != s.end()) tighten_hi(*it, true, "exclusiveMaximum");
    return b;
  }

  static BigInt Floor(const Decimal& d) {
    BigInt b{d.neg, d.ip};
    if (!d.fp.empty() && d.neg) b.digits = IncDigitsPublic(d.ip);
    return b;
  }
  static BigInt Ceil(const Decimal& d) {
    BigInt b{d.neg, d.ip};
    if (!d.fp.empty() && !d.neg) b.digits = IncDigitsPublic(d.ip);
    if (b.digits == "0") b.neg = false;
    return b;
  }
  static std::string IncDigitsPublic(std::string s) {
    int i = static_cast<int>(s.size()) - 1;
    while (i >= 0 && s[i] == '9') s[i--] = '0';
    if (i < 0) return "1" + s;
    ++s[i];
    return s;
  }
  static std::string DecDigitsPublic(std::string s) {  // s > 0
    int i = static_cast<int>(s.size()) - 1;
    while (i >= 0 && s[i] == '0') s[i--] = '9';
    --s[i];
    size_t k = 0;
    while (k + 1 < s.size() && s[k] == '0') ++k;
    return s.substr(k);
  }
  static BigInt AddOne(BigInt b, int delta) {  // delta = +1 or -1
    bool zero = b.digits == "0";
    if (zero) return BigInt{delta < 0, "1"};
    if (b.neg == (delta < 0)) {
      b.digits = IncDigitsPublic(b.digits);
    } else {
      b.digits = DecDigitsPublic(b.digits);
      if (b.digits == "0") b.neg = false;
    }
    return b;
  }

  Re ConvertInteger(const json& s, const std::string& ptr) {
    Bounds b = ReadBounds(s, ptr);
    std::optional<BigInt> lo, hi;
    if (b.lo) {
      lo = b.lo_ex ? AddOne(Floor(*b.lo), +1) : Ceil(*b.lo);
    }
    if (b.hi) {
      hi = b.hi_ex ? AddOne(Ceil(*b.hi), -1) : Floor(*b.hi);
    }
    Re r;
    if (auto m = s.find("multipleOf"); m != s.end()) {
      r = IntegerMultiple(*m, lo, hi, ptr);
    } else {
      r = IntegerRangeRegex(lo, hi);
    }
    if (!r) return r;
    return absl::StrCat("(?:", *r, ")(?:\\.0)?");
  }

  Re IntegerMultiple(const json& mv, const std::optional<BigInt>& lo,
                     const std::optional<BigInt>& hi, const std::string& ptr) {
    auto m = DecimalOf(mv);
    if (!m || m->neg || (m->ip == "0" && m->fp.empty())) {
      Invalid(absl::StrCat("multipleOf at ", Where(ptr), " is not a positive number"));
    }
    if (!m->fp.empty()) {
      // Every integer is a multiple of m when 1/m is an integer (m = 1/k).
      double inv = 1.0 / mv.get<double>();
      if (std::fabs(inv - std::round(inv)) < 1e-9) return IntegerRangeRegex(lo, hi);
      Unsupported("multipleOf", ptr, "a fractional multipleOf on integers");
    }
    if (m->ip == "1") return IntegerRangeRegex(lo, hi);
    // Bounded and small: enumerate.
    if (lo && hi && lo->digits.size() <= 15 && hi->digits.size() <= 15 && m->ip.size() <= 15) {
      long long l = std::stoll(lo->digits) * (lo->neg ? -1 : 1);
      long long h = std::stoll(hi->digits) * (hi->neg ? -1 : 1);
      long long step = std::stoll(m->ip);
      long long first = l >= 0 ? ((l + step - 1) / step) * step : -((-l) / step) * step;
      if (h < first) return std::nullopt;
      if ((h - first) / step <= 2000) {
        std::vector<std::string> parts;
        for (long long x = first; x <= h; x += step) parts.push_back(std::to_string(x));
        return UnionRe(parts);
      }
    }
    if (!lo && !hi) {
      const std::string& d = m->ip;
      // 10^k: k trailing zeros.
      if (d[0] == '1' && d.find_first_not_of('0', 1) == std::string::npos) {
        return absl::StrCat("(?:0|-?[1-9][0-9]*0{", d.size() - 1, "})");
      }
      if (d == "2") return std::string("(?:-?[0-9]*[02468])");
      if (d == "5") return std::string("(?:-?[0-9]*[05])");
    }
    if (lo && !lo->neg && !hi) {
      const std::string& d = m->ip;
      if (lo->digits == "0" || lo->digits == "1") {
        if (d[0] == '1' && d.find_first_not_of('0', 1) == std::string::npos)
          return absl::StrCat("(?:", lo->digits == "0" ? "0|" : "", "[1-9][0-9]*0{", d.size() - 1, "})");
        if (d == "2") return absl::StrCat("(?:", lo->digits == "0" ? "0|" : "", "[1-9][0-9]*[02468]|[2468])");
        if (d == "5") return absl::StrCat("(?:", lo->digits == "0" ? "0|" : "", "[1-9][0-9]*[05]|5)");
      }
    }
    Unsupported("multipleOf", ptr, absl::StrCat("multipleOf ", m->ip, " with these bounds"));
  }

  Re ConvertNumber(const json& s, const std::string& ptr) {
    Bounds b = ReadBounds(s, ptr);
    if (auto mv = s.find("multipleOf"); mv != s.end()) {
      auto m = DecimalOf(*mv);
      if (!m || m->neg || (m->ip == "0" && m->fp.empty())) {
        Invalid(absl::StrCat("multipleOf at ", Where(ptr), " is not a positive number"));
      }
      if (m->fp.empty()) {
        // Integer multiples: the integer regex (with an optional ".0").
        json t = s;
        t.erase("type");
        return ConvertInteger(t, ptr);
      }
      // 10^-k: at most k fraction digits (then zeros).
      bool pow10 = m->ip == "0" && m->fp.back() == '1' &&
                   m->fp.find_first_not_of('0') == m->fp.size() - 1;
      if (pow10 && !b.lo && !b.hi) {
        return absl::StrCat("-?(?:0|[1-9][0-9]*)(?:\\.[0-9]{1,", m->fp.size(), "}0*)?");
      }
      if (pow10 && b.lo && b.hi) {
        // Enumerate the grid when small: integer part range x fraction digits.
        Warn("multipleOf", ptr, "fraction digits not enforced together with bounds");
      } else {
        Unsupported("multipleOf", ptr, absl::StrCat("multipleOf ", NumberText(*mv)));
      }
    }
    return NumberRangeRegex(b.lo, b.lo_ex, b.hi, b.hi_ex);
  }

  // ---------- strings
  std::string CharRe() const { return JsonCharRegex(); }

  std::string Repeat(const std::string& unit, int64_t min, std::optional<int64_t> max,
                     const std::string& keyword_ptr, const char* max_kw) {
    if (min < 0) min = 0;
    if (max && *max > o_.max_counted_repeat) {
      Warn(max_kw, keyword_ptr, absl::StrCat("bound ", *max, " above max_counted_repeat (",
                                             o_.max_counted_repeat, "): not enforced"));
      max.reset();
    }
    if (min > o_.max_counted_repeat) {
      Invalid(absl::StrCat("lower bound ", min, " at ", Where(keyword_ptr),
                           " above max_counted_repeat"));
    }
    if (max && *max == 0) return "";
    if (!max) {
      if (min == 0) return unit + "*";
      if (min == 1) return unit + "+";
      return absl::StrCat(unit, "{", min, ",}");
    }
    if (min == *max) return min == 1 ? unit : absl::StrCat(unit, "{", min, "}");
    if (min == 0 && *max == 1) return unit + "?";
    return absl::StrCat(unit, "{", min, ",", *max, "}");
  }

  static std::optional<int64_t> IntKw(const json& s, const char* k, const std::string& ptr) {
    auto it = s.find(k);
    if (it == s.end()) return std::nullopt;
    if (!it->is_number() || it->get<double>() < 0) {
      Invalid(absl::StrCat(k, " at ", Where(ptr), " is not a non-negative number"));
    }
    double d = it->get<double>();
    if (d > 1e15) return static_cast<int64_t>(1e15);
    return static_cast<int64_t>(std::ceil(d));
  }

  Re ConvertString(const json& s, const std::string& ptr) {
    auto min_len = IntKw(s, "minLength", ptr);
    auto max_len = IntKw(s, "maxLength", ptr);
    if (min_len && max_len && *min_len > *max_len) return std::nullopt;
    std::string content;
    bool has_pattern = false;
    if (auto p = s.find("pattern"); p != s.end()) {
      if (!p->is_string()) Invalid(absl::StrCat("pattern at ", Where(ptr), " is not a string"));
      bool length_applied = false;
      if ((min_len && *min_len > 0) || max_len) {
        auto r = PatternToJsonStringRegex(p->get<std::string>(), false, nullptr,
                                          {min_len.value_or(0), max_len.value_or(-1)},
                                          &length_applied);
        if (r.ok() && length_applied) {
          return "\"" + *r + "\"";
        }
      }
      content = PatternRegex(p->get<std::string>(), ptr, "pattern");
      has_pattern = true;
    }
    if (auto f = s.find("format"); f != s.end() && f->is_string()) {
      std::string fr = FormatRegex(f->get<std::string>());
      if (fr.empty()) {
        Warn("format", ptr, absl::StrCat("\"", f->get<std::string>(), "\" not enforced"));
      } else if (has_pattern) {
        Warn("format", ptr, absl::StrCat("\"", f->get<std::string>(),
                                         "\" not enforced together with pattern"));
      } else {
        content = fr;
        has_pattern = true;
      }
    }
    if (has_pattern) {
      if ((min_len && *min_len > 0) || max_len) {
        Warn(max_len ? "maxLength" : "minLength", ptr,
             "not enforced together with pattern/format");
      }
      return "\"" + content + "\"";
    }
    return "\"" + Repeat(CharRe(), min_len.value_or(0), max_len, ptr, "maxLength") + "\"";
  }

  // A pattern's regex over JSON string content. An unanchored pattern
  // (search semantics) whose automaton would be large is anchored instead,
  // with a warning: ".*p.*" can need exponentially many DFA states.
  std::string PatternRegex(const std::string& pattern, const std::string& ptr,
                           const char* keyword) {
    auto cached = pattern_cache_.find(pattern);
    if (cached == pattern_cache_.end()) {
      bool was_anchored = false;
      auto r = PatternToJsonStringRegex(pattern, false, &was_anchored);
      if (!r.ok()) Unsupported(keyword, ptr, std::string(r.status().message()));
      PatternInfo info{*r, false};
      if (!was_anchored) {
        DfaOptions dopt;
        dopt.max_states = kMaxUnanchoredPatternStates;
        auto dfa = Dfa::FromPattern(*r, RegexLimits{}, dopt);
        if (!dfa.ok()) {
          auto anchored = PatternToJsonStringRegex(pattern, true);
          if (anchored.ok()) info = PatternInfo{*anchored, true};
        }
      }
      cached = pattern_cache_.emplace(pattern, std::move(info)).first;
    }
    if (cached->second.anchored_instead) {
      Warn(keyword, ptr,
           "unanchored pattern matched as anchored (its search automaton is too large)");
    }
    return cached->second.regex;
  }

  static std::string FormatRegex(const std::string& f) {
    static const std::string kDate =
        "(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
        "|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)";
    static const std::string kTime =
        "(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
    static const std::string kOctet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
    static const std::string kIpv4 = absl::StrCat(kOctet, "(?:\\.", kOctet, "){3}");
    static const std::string kH16 = "[0-9a-fA-F]{1,4}";
    static const std::string kLs32 = absl::StrCat("(?:", kH16, ":", kH16, "|", kIpv4, ")");
    static const std::string kIpv6 = absl::StrCat(
        "(?:(?:", kH16, ":){6}", kLs32,
        "|::(?:", kH16, ":){5}", kLs32,
        "|(?:", kH16, ")?::(?:", kH16, ":){4}", kLs32,
        "|(?:(?:", kH16, ":){0,1}", kH16, ")?::(?:", kH16, ":){3}", kLs32,
        "|(?:(?:", kH16, ":){0,2}", kH16, ")?::(?:", kH16, ":){2}", kLs32,
        "|(?:(?:", kH16, ":){0,3}", kH16, ")?::", kH16, ":", kLs32,
        "|(?:(?:", kH16, ":){0,4}", kH16, ")?::", kLs32,
        "|(?:(?:", kH16, ":){0,5}", kH16, ")?::", kH16,
        "|(?:(?:", kH16, ":){0,6}", kH16, ")?::)");
    static const std::string kLabel = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
    static const std::string kHostname = absl::StrCat(kLabel, "(?:\\.", kLabel, ")*");
    // URI characters (RFC 3986 unreserved, reserved and %-escapes); "/" may
    // be escaped in JSON.
    static const std::string kUriChar = "(?:[A-Za-z0-9\\-._~:/?#\\[\\]@!$&'()*+,;=]|%[0-9a-fA-F]{2}|\\\\/)";
    if (f == "date") return kDate;
    if (f == "time") return kTime;
    if (f == "date-time") return absl::StrCat(kDate, "[Tt]", kTime);
    if (f == "duration") {
      return "P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)"
             "(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?"
             "|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)|[0-9]+W)";
    }
    if (f == "uuid") {
      return "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
    }
    if (f == "ipv4") return kIpv4;
    if (f == "ipv6") return kIpv6;
    if (f == "hostname") return kHostname;
    if (f == "email") {
      return absl::StrCat("[A-Za-z0-9!#$%&'*+=?^_`{|}~\\-]+(?:\\.[A-Za-z0-9!#$%&'*+=?^_`{|}~\\-]+)*@(?:",
                          kHostname, "|\\[", kIpv4, "\\])");
    }
    if (f == "uri") return absl::StrCat("[A-Za-z][A-Za-z0-9+\\-.]*:", kUriChar, "*");
    if (f == "uri-reference") return absl::StrCat(kUriChar, "*");
    return "";
  }

  // ---------- arrays
  Re ConvertArray(const json& s, const std::string& ptr) {
    std::vector<Re> prefix;
    Re rest;
    bool rest_set = false;
    auto items = s.find("items");
    auto prefix_items = s.find("prefixItems");
    if (prefix_items != s.end()) {
      if (!prefix_items->is_array()) Invalid(absl::StrCat("prefixItems at ", Where(ptr), " is not an array"));
      for (size_t i = 0; i < prefix_items->size(); ++i)
        prefix.push_back(Convert((*prefix_items)[i], Child(ptr, "prefixItems", i)));
      if (items != s.end()) {
        rest = Convert(*items, Child(ptr, "items"));
        rest_set = true;
      }
    } else if (items != s.end() && items->is_array()) {
      for (size_t i = 0; i < items->size(); ++i)
        prefix.push_back(Convert((*items)[i], Child(ptr, "items", i)));
      if (auto ai = s.find("additionalItems"); ai != s.end()) {
        rest = Convert(*ai, Child(ptr, "additionalItems"));
        rest_set = true;
      }
    } else if (items != s.end()) {
      rest = Convert(*items, Child(ptr, "items"));
      rest_set = true;
    }
    if (!rest_set) rest = AnyValue(o_.any_value_depth);
    if (auto u = s.find("uniqueItems"); u != s.end() && u->is_boolean() && u->get<bool>()) {
      Warn("uniqueItems", ptr, "not enforced");
    }
    int64_t min = IntKw(s, "minItems", ptr).value_or(0);
    std::optional<int64_t> max = IntKw(s, "maxItems", ptr);
    if (max && *max > o_.max_counted_repeat) {
      Warn("maxItems", ptr, absl::StrCat("bound ", *max, " above max_counted_repeat: not enforced"));
      max.reset();
    }
    if (min > o_.max_counted_repeat) {
      Invalid(absl::StrCat("minItems ", min, " at ", Where(ptr), " above max_counted_repeat"));
    }
    // Cut at the first element that cannot exist.
    for (size_t i = 0; i < prefix.size(); ++i) {
      if (!prefix[i]) {
        if (!max || *max > static_cast<int64_t>(i)) max = static_cast<int64_t>(i);
        prefix.resize(i);
        break;
      }
    }
    int64_t k = static_cast<int64_t>(prefix.size());
    if (!rest && (!max || *max > k)) max = k;
    if (max && min > *max) return std::nullopt;
    if (max && *max == 0) return Open('[') + Close(']').substr(ws_.size());

    // tail(i): elements i.. each preceded by a separator, i >= 1 present so far.
    auto elem = [&](int64_t i) -> const std::string& { return i < k ? *prefix[i] : *rest; };
    std::function<std::string(int64_t)> tail = [&](int64_t i) -> std::string {
      if (max && i >= *max) return "";
      if (i >= k) {
        int64_t a = std::max<int64_t>(0, min - i);
        std::optional<int64_t> b;
        if (max) b = *max - i;
        return Repeat("(?:" + item_sep_ + *rest + ")", a, b, ptr, "maxItems");
      }
      std::string one = item_sep_ + elem(i) + tail(i + 1);
      if (i >= min) return "(?:" + one + ")?";
      return one;
    };
    std::string body = elem(0) + tail(1);
    std::string empty = Open('[') + Close(']').substr(ws_.size());
    if (min == 0) return absl::StrCat("(?:", empty, "|", Open('['), body, Close(']'), ")");
    return Open('[') + body + Close(']');
  }

  // ---------- objects
  std::string KeyRegex(const std::string& key) const {
    return RegexEscape(PythonJsonString(key, o_.ensure_ascii));
  }

  struct TrieNode {
    std::map<char, TrieNode> kids;
    bool terminal = false;
  };
  // JSON string content that is not one of `node`'s words.
  std::string Complement(const TrieNode& node) {
    std::string exclude;
    for (auto& [c, _] : node.kids) {
      if (c == '\\' || c == ']' || c == '[' || c == '^' || c == '-') exclude += '\\';
      exclude += c;
    }
    std::vector<std::string> alts;
    alts.push_back(absl::StrCat("(?:[^\"\\\\\\x00-\\x1f", exclude,
                                "]|\\\\[\"\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4})", CharRe(), "*"));
    for (auto& [c, kid] : node.kids) {
      alts.push_back(RegexEscape(std::string(1, c)) + Complement(kid));
    }
    std::string r = "(?:" + absl::StrJoin(alts, "|") + ")";
    if (!node.terminal) r += "?";
    return r;
  }

  std::string OtherKeyRegex(const std::vector<std::string>& known) {
    if (known.empty()) return StringAny();
    TrieNode root;
    for (auto& k : known) {
      std::string enc = PythonJsonString(k, o_.ensure_ascii);
      enc = enc.substr(1, enc.size() - 2);
      if (enc.find('\\') != std::string::npos) continue;  // not excluded (see docs)
      TrieNode* n = &root;
      for (char c : enc) n = &n->kids[c];
      n->terminal = true;
    }
    return "\"" + Complement(root) + "\"";
  }

  Re ConvertObject(const json& s, const std::string& ptr) {
    struct Item {
      std::string kv;
      bool required;
    };
    std::vector<Item> items;
    std::set<std::string> required;
    std::vector<std::string> required_order;
    if (auto r = s.find("required"); r != s.end() && r->is_array()) {
      for (auto& x : *r) {
        if (x.is_string() && required.insert(x.get<std::string>()).second)
          required_order.push_back(x.get<std::string>());
      }
    }
    std::vector<std::string> known;
    if (auto p = s.find("properties"); p != s.end()) {
      if (!p->is_object()) Invalid(absl::StrCat("properties at ", Where(ptr), " is not an object"));
      for (auto it = p->begin(); it != p->end(); ++it) {
        known.push_back(it.key());
        std::string pptr = Child(Child(ptr, "properties"), it.key());
        int cuts_before = cuts_;
        Re v = Convert(it.value(), pptr);
        bool req = required.count(it.key()) > 0;
        if (!v) {
          if (req) {
            if (cuts_ != cuts_before && cut_required_.empty()) {
              cut_required_ = absl::StrCat("required property \"", it.key(), "\" at ", Where(pptr),
                                           " recurses past the limit");
            }
            return std::nullopt;
          }
          continue;
        }
        items.push_back({KeyRegex(it.key()) + key_sep_ + *v, req});
      }
    }
    std::vector<std::string> undeclared;
    for (auto& r : required_order) {
      if (std::find(known.begin(), known.end(), r) == known.end()) undeclared.push_back(r);
    }
    std::vector<std::string> all_keys = known;
    all_keys.insert(all_keys.end(), undeclared.begin(), undeclared.end());
    // Additional properties.
    const json* addl = nullptr;
    std::string addl_ptr = Child(ptr, "additionalProperties");
    if (auto a = s.find("additionalProperties"); a != s.end()) {
      addl = &*a;
    } else if (auto u = s.find("unevaluatedProperties"); u != s.end()) {
      addl = &*u;
      addl_ptr = Child(ptr, "unevaluatedProperties");
    }
    Re addl_value;
    if (!addl) {
      // A schema that declares nothing ("type": "object" alone) is a free-form
      // object whatever the default.
      bool declares = s.contains("properties") || s.contains("patternProperties");
      if (o_.additional_properties_default_open || !declares) {
        addl_value = AnyValue(o_.any_value_depth);
      }
    } else {
      addl_value = Convert(*addl, addl_ptr);
    }
    std::vector<std::string> extra_kvs;
    if (auto pp = s.find("patternProperties"); pp != s.end() && pp->is_object()) {
      for (auto it = pp->begin(); it != pp->end(); ++it) {
        std::string pptr = Child(Child(ptr, "patternProperties"), it.key());
        std::string key = PatternRegex(it.key(), pptr, "patternProperties");
        Re v = Convert(it.value(), pptr);
        if (v) extra_kvs.push_back("\"" + key + "\"" + key_sep_ + *v);
      }
      if (addl_value && !pp->empty()) {
        Warn("patternProperties", ptr,
             "keys matching a pattern may also take the additionalProperties value");
      }
    }
    if (addl_value) {
      std::string key;
      if (auto pn = s.find("propertyNames"); pn != s.end()) {
        json t = json::object();
        MergeInto(t, *pn, Child(ptr, "propertyNames"), 0);
        if (!t.is_boolean()) t["type"] = "string";
        Re k = Convert(t, Child(ptr, "propertyNames"));
        if (!k) addl_value.reset();
        else key = *k;
      } else {
        key = OtherKeyRegex(all_keys);
      }
      if (addl_value) extra_kvs.push_back(key + key_sep_ + *addl_value);
    }
    // Required properties not declared: values from additionalProperties.
    for (auto& r : undeclared) {
      if (!addl_value) {
        if (addl) return std::nullopt;  // additionalProperties: false
        items.push_back({KeyRegex(r) + key_sep_ + AnyValue(o_.any_value_depth), true});
        continue;
      }
      items.push_back({KeyRegex(r) + key_sep_ + *addl_value, true});
    }
    Re extra = extra_kvs.empty() ? Re() : Re(Union(extra_kvs));

    // Counting: state c = properties so far, saturated at cap.
    int64_t min_p = IntKw(s, "minProperties", ptr).value_or(0);
    std::optional<int64_t> max_p = IntKw(s, "maxProperties", ptr);
    int64_t n_req = 0;
    for (auto& it : items) n_req += it.required;
    if (min_p <= n_req) min_p = 0;
    if (max_p && !extra && *max_p >= static_cast<int64_t>(items.size())) max_p.reset();
    if (max_p && *max_p < n_req) return std::nullopt;
    int64_t cap = max_p ? *max_p : std::max<int64_t>(min_p, 1);
    if (cap > 64) Unsupported(max_p ? "maxProperties" : "minProperties", ptr, "bound above 64");
    std::vector<Re> q(cap + 1);
    q[0] = "";
    auto add = [&](Re& dst, const std::string& part) {
      if (!dst) dst = part;
      else dst = "(?:" + *dst + "|" + part + ")";
    };
    for (auto& it : items) {
      std::vector<Re> nq(cap + 1);
      for (int64_t c = 0; c <= cap; ++c) {
        if (!q[c]) continue;
        int64_t nc = c + 1;
        bool sat = !max_p && nc > cap;
        if (sat) nc = cap;
        if (nc > cap) {  // over maxProperties: only skipping is possible
          if (!it.required) add(nq[c], *q[c]);
          continue;
        }
        std::string with = *q[c] + (c == 0 ? "" : item_sep_) + it.kv;
        if (nc == c) {  // saturated: one copy of q[c]
          if (it.required) add(nq[c], with);
          else add(nq[c], *q[c] + "(?:" + item_sep_ + it.kv + ")?");
        } else {
          add(nq[nc], with);
          if (!it.required) add(nq[c], *q[c]);
        }
      }
      q = std::move(nq);
      for (auto& x : q) CheckSize(x);
    }
    // Additional properties after the declared ones.
    std::vector<Re> fin(cap + 1);
    const std::string rep = extra ? "(?:" + item_sep_ + *extra + ")" : "";
    for (int64_t c = 0; c <= cap; ++c) {
      if (!q[c]) continue;
      if (extra && !max_p && c == cap && c > 0) {
        add(fin[c], *q[c] + rep + "*");
      } else {
        add(fin[c], *q[c]);
      }
      if (!extra) continue;
      for (int64_t t = c + 1; t <= cap; ++t) {
        bool last_open = !max_p && t == cap;
        int64_t j = t - c;
        std::optional<int64_t> jmax;
        std::string more;
        if (c == 0) {
          if (!last_open) jmax = j - 1;
          more = *extra + Repeat(rep, j - 1, jmax, ptr, "maxProperties");
        } else {
          if (!last_open) jmax = j;
          more = *q[c] + Repeat(rep, j, jmax, ptr, "maxProperties");
        }
        add(fin[t], more);
      }
    }
    std::vector<std::string> bodies;
    bool empty_ok = false;
    for (int64_t c = 0; c <= cap; ++c) {
      if (!fin[c] || c < min_p) continue;
      if (c == 0) {
        empty_ok = true;
        continue;
      }
      bodies.push_back(*fin[c]);
    }
    std::string empty = Open('{') + Close('}').substr(ws_.size());
    if (bodies.empty()) return empty_ok ? Re(empty) : Re();
    std::string body = bodies.size() == 1 ? bodies[0] : "(?:" + absl::StrJoin(bodies, "|") + ")";
    std::string full = Open('{') + body + Close('}');
    if (empty_ok) return "(?:" + empty + "|" + full + ")";
    return full;
  }

  struct PatternInfo {
    std::string regex;
    bool anchored_instead;
  };
  static constexpr uint32_t kMaxUnanchoredPatternStates = 4000;
  std::map<std::string, PatternInfo> pattern_cache_;
  const json& root_;
  const JsonSchemaOptions& o_;
  std::string ws_, item_sep_, key_sep_;
  std::set<std::string> warnings_;
  std::map<std::string, int> ref_stack_;
  std::map<std::string, Re> ref_cache_;
  std::map<int, std::string> any_cache_;
  std::map<std::string, std::pair<std::string, const json*>> anchors_;
  bool anchors_built_ = false;
  int cuts_ = 0;
  std::string cut_required_;
  int64_t calls_ = 0;
  int depth_ = 0;
};

}  // namespace

absl::StatusOr<JsonSchemaRegex> JsonSchemaToRegex(std::string_view schema_json,
                                                  const JsonSchemaOptions& options) {
  if (schema_json.size() > options.max_schema_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("schema is ", schema_json.size(),
                                                   " bytes, above max_schema_bytes (",
                                                   options.max_schema_bytes, ")"));
  }
  if (options.max_counted_repeat < 1 || options.max_counted_repeat > 1000) {
    return absl::InvalidArgumentError("max_counted_repeat must be in [1, 1000]");
  }
  if (options.max_recursion_depth < 0 || options.any_value_depth < 0 ||
      options.any_value_depth > 8) {
    return absl::InvalidArgumentError("bad recursion or any-value depth");
  }
  json root;
  try {
    root = json::parse(schema_json.begin(), schema_json.end());
  } catch (const json::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("schema is not valid JSON: ", e.what(), " (byte ", e.byte, ")"));
  }
  try {
    Converter c(root, options);
    JsonSchemaRegex out;
    out.regex = c.Run();
    out.warnings = c.warnings();
    if (out.regex.size() > options.max_regex_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "regex is ", out.regex.size(), " bytes, above max_regex_bytes (",
          options.max_regex_bytes, ")"));
    }
    return out;
  } catch (const ConvertError& e) {
    return e.status;
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed schema: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("json schema conversion failed: ", e.what()));
  }
}

std::string JsonSchemaOptionsKey(const JsonSchemaOptions& o) {
  const char* ws = o.whitespace == JsonWhitespace::kPython    ? "python"
                   : o.whitespace == JsonWhitespace::kCompact ? "compact"
                                                              : "flexible";
  return absl::StrCat("jsonschema-v1;ws=", ws,
                      o.whitespace == JsonWhitespace::kFlexible
                          ? absl::StrCat(";wsp=", o.whitespace_pattern.size(), ":",
                                         o.whitespace_pattern)
                          : "",
                      ";rec=", o.max_recursion_depth, ";any=", o.any_value_depth,
                      ";addl=", o.additional_properties_default_open ? 1 : 0,
                      ";ascii=", o.ensure_ascii ? 1 : 0, ";infer=", o.infer_type_from_keywords ? 1 : 0, ";rep=", o.max_counted_repeat,
                      ";maxs=", o.max_schema_bytes, ";maxr=", o.max_regex_bytes);
}

}  // namespace maskd
