// JSON Schema -> regex. See schema/json_schema.h and docs/json-schema.md.
#include "schema/json_schema.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <functional>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "automaton/dfa.h"
#include "json/json_scan.h"
#include "schema/internal/json_schema_internal.h"

namespace maskd {
namespace {

// Limits of the structural pre-scan (json/json_scan.h). The deepest schema
// in MaskBench nests 63 levels of arrays and objects and its largest object
// has 600 members.
// (Nesting: JsonSchemaOptions::max_schema_nesting.)
constexpr size_t kMaxSchemaObjectMembers = 4096;

using json = nlohmann::ordered_json;
using Re = std::optional<std::string>;  // nullopt: the empty language
using namespace json_schema_internal;

struct ConvertError {
  absl::Status status;
};

absl::Status ConversionDeadlineError() {
  return absl::DeadlineExceededError("JSON Schema conversion exceeded its deadline");
}
absl::Status ConversionCancelledError() {
  return absl::CancelledError("JSON Schema conversion cancelled");
}

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
// Error messages and warnings go back to clients: a pointer is shown whole up
// to kMaxShownBytes, else its head and tail (keys can be megabytes long).
// Whole error messages are capped at kMaxMessageBytes the same way.
constexpr size_t kMaxShownBytes = 200;
constexpr size_t kMaxMessageBytes = 1024;
std::string Shown(std::string_view s, size_t max = kMaxShownBytes) {
  return internal::Excerpt(s, max);
}
std::string Where(const std::string& ptr) { return ptr.empty() ? "/" : Shown(ptr); }

// Internal keywords, only in schemas the converter derives (negations): no
// user schema is expected to spell them.
//   kNotStrings: [s1, s2, ...]: a string is none of these (any spelling).
//   kUnsupportedKw: [keyword, pointer, why]: the schema cannot be expressed;
//     an error naming keyword and pointer if any of its types survives.
constexpr char kNotStrings[] = "$maskd.notStrings";
constexpr char kUnsupportedKw[] = "$maskd.unsupported";

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
      "unevaluatedProperties", "not", "if", "dependencies", "dependentRequired",
      "dependentSchemas", "contains", "minContains", "maxContains", kNotStrings, kUnsupportedKw};
  return kSet.count(k) > 0;
}
// Validation keywords no regex built here enforces: an error.
bool IsUnsupported(const std::string& k) {
  static const std::set<std::string> kSet = {"unevaluatedItems", "$dynamicRef", "$recursiveRef",
                                             "contentSchema"};
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
  // rules: the grammar route (JsonSchemaToRules): $ref targets, the any
  // value and large subschemas become rules referenced as `(?&k)`.
  Converter(const json& root, const JsonSchemaOptions& o, bool rules = false)
      : root_(root), o_(o), rules_mode_(rules) {
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
    if (rules_mode_) rules_.push_back({"/", ""});  // rule 0: the root
    Re r = Convert(root_, "");
    if (!r) {
      if (!cut_required_.empty()) {
        Invalid(absl::StrCat("schema has no instance within max_recursion_depth ",
                             o_.max_recursion_depth, ": ", cut_required_));
      }
      Invalid("schema has no valid instance (it is false or contradictory)");
    }
    if (rules_mode_) rules_[0].regex = *r;
    return *r;
  }

  // Rules mode: rules_[0] is the root; each regex may reference rules as (?&k).
  std::vector<JsonSchemaRule> TakeRules() { return std::move(rules_); }
  bool truncated_recursion() const { return cuts_ > 0; }

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
  // Throws Cancelled when the budget's cancel flag is set and, when
  // `check_clock`, DeadlineExceeded past its deadline.
  void CheckBudget(bool check_clock) const {
    const DfaOptions& b = o_.budget;
    if (b.cancel != nullptr && b.cancel->load(std::memory_order_relaxed)) {
      Throw(ConversionCancelledError());
    }
    if (check_clock && b.deadline != absl::InfiniteFuture() && absl::Now() > b.deadline) {
      Throw(ConversionDeadlineError());
    }
  }
  // A DFA for `regex` under the budget, with at most `max_states` states (and
  // the budget's own caps). Throws when the deadline or cancel flag trips;
  // any other failure (a cap) is returned for the caller's fallback.
  absl::StatusOr<std::shared_ptr<const Dfa>> BudgetedDfa(const std::string& regex,
                                                         uint32_t max_states) const {
    DfaOptions dopt = o_.budget;
    dopt.max_states = std::min(max_states, o_.budget.max_states);
    std::string expanded;
    if (rules_mode_) {
      auto e = ExpandRules(regex);
      if (!e.ok()) return e.status();
      expanded = *std::move(e);
    }
    auto d = Dfa::FromPattern(rules_mode_ ? expanded : regex, RegexLimits{}, dopt);
    if (d.status().code() == absl::StatusCode::kDeadlineExceeded) Throw(ConversionDeadlineError());
    if (d.status().code() == absl::StatusCode::kCancelled) Throw(ConversionCancelledError());
    return d;
  }
  static bool IsBudgetError(const absl::Status& s) {
    return s.code() == absl::StatusCode::kDeadlineExceeded ||
           s.code() == absl::StatusCode::kCancelled;
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
        Invalid(absl::StrCat("unknown $ref \"", Shown(ref), "\" at ", Where(ptr)));
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
        Invalid(absl::StrCat("unknown $ref \"", Shown(ref), "\" at ", Where(ptr)));
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
        Invalid(absl::StrCat("unsupported $ref \"", Shown(ref), "\" at ", Where(ptr),
                             ": only local references (#...) are resolved"));
      }
    }
    return ResolvePointer(fragment, ref, ptr, target_ptr);
  }

  Re ConvertRef(const std::string& ref, const std::string& ptr) {
    std::string tptr;
    const json& target = Resolve(ref, ptr, &tptr);
    if (rules_mode_) return RefRule(target, tptr);
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

  // ---------- rules (grammar route)
  static std::string RuleRef(size_t k) { return absl::StrCat("(?&", k, ")"); }
  // A regex matching no string: a rule whose target has no instance.
  static constexpr char kNoString[] = "[^\\x00-\\x{10FFFF}]";

  // The rule for the $ref target at `tptr`, converted once: references from
  // inside its own conversion (recursion) name it before it is complete.
  Re RefRule(const json& target, const std::string& tptr) {
    auto [it, inserted] = rule_of_ptr_.emplace(tptr, rules_.size());
    const size_t k = it->second;
    if (inserted) {
      rules_.push_back({Where(tptr), kNoString});
      // If the conversion throws (a caller may catch and go on), the rule
      // stays matching nothing and the pointer is converted again next time.
      struct Unregister {
        std::map<std::string, size_t>& map;
        const std::string& ptr;
        bool done = false;
        ~Unregister() {
          if (!done) map.erase(ptr);
        }
      } unregister{rule_of_ptr_, tptr};
      in_progress_.insert(k);
      Re r = Convert(target, tptr);
      in_progress_.erase(k);
      unregister.done = true;
      if (!r) {
        empty_rules_.insert(k);
        return std::nullopt;
      }
      rules_[k].regex = *std::move(r);
    }
    if (empty_rules_.count(k)) return std::nullopt;
    return RuleRef(k);
  }

  // Rules mode: `regex` with every (?&k) replaced by rule k's text, so that
  // the converter's own automata (enum values against sibling keywords,
  // excluded strings) see the language the regex route would; the any-value
  // rule becomes the regex route's any value (nested any_value_depth deep).
  // FailedPrecondition for a rule still being converted (recursion): the
  // caller falls back as when a DFA is over its cap.
  absl::StatusOr<std::string> ExpandRules(const std::string& regex, int depth = 0) const {
    if (depth > 64) return absl::FailedPreconditionError("rules nested too deeply to expand");
    std::string out;
    size_t copied = 0;
    for (size_t i = 0; i < regex.size();) {
      const char c = regex[i];
      if (c == '\\') {
        i += 2;
      } else if (c == '[') {
        ++i;
        if (i < regex.size() && regex[i] == '^') ++i;
        if (i < regex.size() && regex[i] == ']') ++i;
        while (i < regex.size() && regex[i] != ']') i += regex[i] == '\\' ? 2 : 1;
        ++i;
      } else if (regex.compare(i, 3, "(?&") == 0) {
        const size_t close = regex.find(')', i);
        const size_t k = std::stoul(regex.substr(i + 3, close - i - 3));
        std::string body;
        if (RuleRef(k) == any_rule_) {
          body = AnyValueRegex(o_.any_value_depth);
        } else if (in_progress_.count(k)) {
          return absl::FailedPreconditionError("a recursive rule has no regex");
        } else {
          auto e = ExpandRules(rules_[k].regex, depth + 1);
          if (!e.ok()) return e;
          body = *std::move(e);
        }
        out.append(regex, copied, i - copied);
        absl::StrAppend(&out, "(?:", body, ")");
        if (out.size() > o_.max_regex_bytes) {
          return absl::ResourceExhaustedError("expanded rules exceed max_regex_bytes");
        }
        i = close + 1;
        copied = i;
      } else {
        ++i;
      }
    }
    out.append(regex, copied, std::string::npos);
    return out;
  }

  // Rules mode: `r`, or a reference to a rule holding it when it is large
  // (a large regex is never copied into another).
  Re SplitLarge(Re r, const std::string& ptr) {
    if (!rules_mode_ || !r || r->size() <= kRuleSplitBytes) return r;
    auto [it, inserted] = rule_of_text_.emplace(*r, rules_.size());
    if (inserted) rules_.push_back({Where(ptr), *r});
    return RuleRef(it->second);
  }
  static constexpr size_t kRuleSplitBytes = 512;

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
    {
      json parts = json::array();
      LowerConditionals(s, ptr, &parts);
      for (auto& part : parts) {
        MergeInto(acc, part, ptr, depth + 1);
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
      } else if (k == kNotStrings) {
        for (auto& x : v)
          if (std::find(a.begin(), a.end(), x) == a.end()) a.push_back(x);
      } else if (k == kUnsupportedKw) {
        // Keep the first: either is an error if reached.
      } else if (k == "format") {
        Warn("format", ptr, absl::StrCat("allOf of two formats: \"", Shown(v.dump()), "\" not enforced"));
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
    CheckBudget(/*check_clock=*/calls_ % 64 == 1);  // the flag each time, the clock less often
    // Each level is a few KiB of stack (Convert, ConvertInner, ConvertPlain,
    // ConvertObject/Array); the deepest schema MaskBench converts needs 29.
    if (++depth_ > o_.max_schema_depth) {
      Invalid(absl::StrCat("schema nesting too deep (more than ", o_.max_schema_depth,
                           " levels of subschemas and $refs: max_schema_depth, maskd "
                           "--max_schema_depth) at ",
                           Where(ptr)));
    }
    struct DepthGuard {
      int& d;
      ~DepthGuard() { --d; }
    } guard{depth_};
    Re r = ConvertInner(s_in, ptr);
    CheckSize(r);
    return SplitLarge(std::move(r), ptr);
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
    if (auto lowered = Lower(*s, ptr)) return Convert(*lowered, ptr);
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
      return UnionRe(parts);
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
    bool non_integer = false;  // numbers must not be integers ("not": integer)
    if (auto n = s.find("not"); n != s.end()) ApplyNot(*n, Child(ptr, "not"), &types, &non_integer);
    if (types.count("number")) types.erase("integer");
    if (auto m = s.find(kUnsupportedKw); m != s.end() && !types.empty()) {
      const json& v = *m;
      Unsupported(v[0].get<std::string>(), v[1].get<std::string>(), v[2].get<std::string>());
    }

    if (s.contains("enum") || s.contains("const")) {
      return ConvertEnum(s, ptr, types, non_integer);
    }

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
      else if (t == "number") r = non_integer ? ConvertNonInteger(s, ptr) : ConvertNumber(s, ptr);
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
        {"exclusiveMaximum", "number"}, {"multipleOf", "number"}, {"contains", "array"},
        {"minContains", "array"}, {"maxContains", "array"}, {"dependencies", "object"},
        {"dependentRequired", "object"}, {"dependentSchemas", "object"}};
    std::set<std::string> found;
    for (auto it = s.begin(); it != s.end(); ++it) {
      auto k = kKeywordType.find(it.key());
      if (k != kKeywordType.end()) found.insert(k->second);
    }
    if (found.size() != 1) return all;
    if (*found.begin() == "number") return {"number"};
    return found;
  }

  // Numbers that are not integers, as Python writes them: a fraction with a
  // nonzero digit, or d[.ddd]e-XX (below 1e-4). Python writes e+XX only from
  // 1e16 up, where every float is an integer.
  Re ConvertNonInteger(const json& s, const std::string& ptr) {
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}) {
      if (s.contains(k)) Unsupported("not", Child(ptr, "not"), absl::StrCat("\"not\": integer beside ", k));
    }
    return std::string(
        "-?(?:(?:0|[1-9][0-9]*)\\.[0-9]*[1-9][0-9]*|[1-9](?:\\.[0-9]*[1-9])?e-0*[1-9][0-9]*)");
  }

  void ApplyNot(const json& n, const std::string& ptr, std::set<std::string>* types,
                bool* non_integer) {
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
        if (types->count("number")) *non_integer = true;
        types->erase("integer");
      } else {
        types->erase(t);
      }
    }
  }

  // ---------- not, if/then/else, dependencies: rewritten as allOf/anyOf
  // The rewrites below produce schemas whose instances are exactly those of
  // the original (spec semantics); a part that has no exact rewrite becomes a
  // kUnsupportedKw marker that is an error only if one of its types survives
  // the merge with its siblings (so {"type": "integer", "not": {"pattern":
  // ...}} converts: no string survives).

  static const std::vector<std::string>& AllTypes() {
    static const std::vector<std::string> kAll = {"null", "boolean", "object", "array",
                                                  "string", "integer", "number"};
    return kAll;
  }
  static json TypeList(const std::set<std::string>& types) {
    json out = json::array();
    for (auto& t : AllTypes())
      if (types.count(t)) out.push_back(t);
    return out;
  }
  static json Marker(const char* type, const std::string& keyword, const std::string& ptr,
                     const std::string& why) {
    json m = json::object();
    if (type) m["type"] = type;
    m[kUnsupportedKw] = json::array({keyword, ptr, why});
    return m;
  }
  static json AnyOfOrSingle(std::vector<json> branches) {
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
  static bool IsTypeOnlyNot(const json& n) {
    if (n.is_boolean()) return true;
    if (!n.is_object()) return false;
    for (auto it = n.begin(); it != n.end(); ++it)
      if (it.key() != "type" && IsValidationKeyword(it.key())) return false;
    return true;
  }

  // The complement of schema `s` (at `ptr`): a schema matching exactly the
  // JSON values `s` rejects. Spec semantics: no type inference inside `not`
  // (`{"not": {"required": ["a"]}}` is "an object without a", not "anything
  // but an object with a").
  json Negate(const json& s_in, const std::string& ptr, int depth) {
    if (depth > 32) Unsupported("not", ptr, "nested too deep (recursive $ref inside not?)");
    if (s_in.is_boolean()) return !s_in.get<bool>();
    if (!s_in.is_object()) Invalid(absl::StrCat("schema at ", Where(ptr), " is not an object"));
    json s = s_in;
    NormalizeBounds(s);
    std::vector<json> out;
    auto type_branch = [&](const char* t, json extra) {
      extra["type"] = t;
      out.push_back(std::move(extra));
    };
    auto int_kw = [&](const char* k) { return IntKw(s, k, ptr); };
    if (auto it = s.find("$ref"); it != s.end() && it->is_string()) {
      std::string tptr;
      const json& target = Resolve(it->get<std::string>(), ptr, &tptr);
      out.push_back(Negate(target, tptr, depth + 1));
    }
    if (auto t = s.find("type"); t != s.end()) {
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
        out.push_back(json{{"type", "number"}, {"not", {{"type", "integer"}}}});
      }
      if (!comp.empty()) out.push_back(json{{"type", TypeList(comp)}});
    }
    if (s.contains("enum") || s.contains("const")) NegateEnum(s, ptr, &out);
    // Objects.
    if (auto r = s.find("required"); r != s.end() && r->is_array()) {
      for (auto& k : *r) {
        if (k.is_string()) type_branch("object", json{{"properties", {{k.get<std::string>(), false}}}});
      }
    }
    if (auto p = s.find("properties"); p != s.end() && p->is_object()) {
      for (auto it = p->begin(); it != p->end(); ++it) {
        json n = Negate(it.value(), Child(Child(ptr, "properties"), it.key()), depth + 1);
        if (n.is_boolean() && !n.get<bool>()) continue;
        type_branch("object", json{{"required", {it.key()}}, {"properties", {{it.key(), n}}}});
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
        type_branch("object", json{{"minProperties", 1}});
      } else {
        out.push_back(Marker("object", "not", ptr, absl::StrCat("negated ", k)));
      }
      break;  // additionalProperties wins (as in ConvertObject)
    }
    if (auto pp = s.find("patternProperties"); pp != s.end() && pp->is_object()) {
      for (auto it = pp->begin(); it != pp->end(); ++it) {
        json n = Negate(it.value(), Child(Child(ptr, "patternProperties"), it.key()), depth + 1);
        if (n.is_boolean() && !n.get<bool>()) continue;
        out.push_back(Marker("object", "not", ptr, "negated patternProperties"));
      }
    }
    if (auto pn = s.find("propertyNames"); pn != s.end()) {
      // Some key outside the names: exact when the names are "anything but
      // these strings" (some key is one of them) or nothing.
      json names = *pn;
      if (names.is_boolean() && !names.get<bool>()) {
        type_branch("object", json{{"minProperties", 1}});
      } else if (names.is_object() && names.size() == 1 && names.contains("not") &&
                 names["not"].is_object() && names["not"].size() == 1 &&
                 (names["not"].contains("const") || names["not"].contains("enum"))) {
        const json& inner = names["not"];
        json vals = inner.contains("const") ? json::array({inner["const"]}) : inner["enum"];
        for (auto& v : vals)
          if (v.is_string()) type_branch("object", json{{"required", {v}}});
      } else if (!(names.is_boolean() || (names.is_object() && !HasValidation(names)))) {
        out.push_back(Marker("object", "not", ptr, "negated propertyNames"));
      }
    }
    if (auto n = int_kw("minProperties"); n && *n > 0) type_branch("object", json{{"maxProperties", *n - 1}});
    if (auto n = int_kw("maxProperties")) type_branch("object", json{{"minProperties", *n + 1}});
    for (const char* k : {"dependencies", "dependentRequired", "dependentSchemas"}) {
      auto d = s.find(k);
      if (d == s.end() || !d->is_object()) continue;
      for (auto it = d->begin(); it != d->end(); ++it) {
        const std::string& a = it.key();
        if (it->is_array()) {
          for (auto& b : *it) {
            if (b.is_string() && b.get<std::string>() != a)
              type_branch("object", json{{"required", {a}}, {"properties", {{b.get<std::string>(), false}}}});
          }
        } else {
          json n = Negate(it.value(), Child(Child(ptr, k), a), depth + 1);
          if (n.is_boolean() && !n.get<bool>()) continue;
          out.push_back(json{{"allOf", {json{{"type", "object"}, {"required", {a}}}, n}}});
        }
      }
    }
    // Arrays.
    auto items = s.find("items");
    auto prefix = s.find("prefixItems");
    const bool use_prefix = prefix != s.end() && prefix->is_array();
    const json* tuple = use_prefix ? &*prefix
                        : items != s.end() && items->is_array() ? &*items : nullptr;
    const char* tuple_kw = use_prefix ? "prefixItems" : "items";
    if (tuple) {
      for (size_t i = 0; i < tuple->size(); ++i) {
        json n = Negate((*tuple)[i], Child(ptr, tuple_kw, i), depth + 1);
        if (n.is_boolean() && !n.get<bool>()) continue;
        json t = json::array();
        for (size_t j = 0; j < i; ++j) t.push_back(true);
        t.push_back(n);
        type_branch("array", json{{"minItems", i + 1}, {tuple_kw, t}});
      }
      // The schema for the elements after the tuple.
      const json* rest = nullptr;
      if (use_prefix && items != s.end()) rest = &*items;
      if (!use_prefix && s.contains("additionalItems")) rest = &s["additionalItems"];
      if (rest) {
        json n = Negate(*rest, ptr, depth + 1);
        if (n.is_boolean() && n.get<bool>()) {
          type_branch("array", json{{"minItems", tuple->size() + 1}});
        } else if (!n.is_boolean()) {
          out.push_back(Marker("array", "not", ptr, "negated items after a tuple"));
        }
      }
    } else if (items != s.end()) {
      json n = Negate(*items, Child(ptr, "items"), depth + 1);
      if (!(n.is_boolean() && !n.get<bool>()))
        type_branch("array", json{{"contains", {{"not", *items}}}});
    }
    if (auto n = int_kw("minItems"); n && *n > 0) type_branch("array", json{{"maxItems", *n - 1}});
    if (auto n = int_kw("maxItems")) type_branch("array", json{{"minItems", *n + 1}});
    if (auto u = s.find("uniqueItems"); u != s.end() && u->is_boolean() && u->get<bool>())
      out.push_back(Marker("array", "not", ptr, "negated uniqueItems"));
    if (auto c = s.find("contains"); c != s.end()) {
      int64_t lo = int_kw("minContains").value_or(1);
      std::optional<int64_t> hi = int_kw("maxContains");
      if (lo > 0) type_branch("array", json{{"contains", *c}, {"minContains", 0}, {"maxContains", lo - 1}});
      if (hi) type_branch("array", json{{"contains", *c}, {"minContains", *hi + 1}});
    }
    // Strings.
    if (auto n = int_kw("minLength"); n && *n > 0) type_branch("string", json{{"maxLength", *n - 1}});
    if (auto n = int_kw("maxLength")) type_branch("string", json{{"minLength", *n + 1}});
    if (s.contains("pattern")) out.push_back(Marker("string", "not", ptr, "negated pattern"));
    if (s.contains("format")) out.push_back(Marker("string", "not", ptr, "negated format"));
    if (auto ns = s.find(kNotStrings); ns != s.end()) type_branch("string", json{{"enum", *ns}});
    // Numbers.
    for (auto [k, nk] : {std::pair<const char*, const char*>{"minimum", "exclusiveMaximum"},
                         {"exclusiveMinimum", "maximum"}, {"maximum", "exclusiveMinimum"},
                         {"exclusiveMaximum", "minimum"}}) {
      if (auto v = s.find(k); v != s.end() && v->is_number()) type_branch("number", json{{nk, *v}});
    }
    if (s.contains("multipleOf")) out.push_back(Marker("number", "not", ptr, "negated multipleOf"));
    // Combinators.
    if (auto a = s.find("allOf"); a != s.end() && a->is_array()) {
      for (size_t i = 0; i < a->size(); ++i) out.push_back(Negate((*a)[i], Child(ptr, "allOf", i), depth + 1));
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
        json n = Negate((*a)[i], Child(ptr, k, i), depth + 1);
        if (n.is_boolean() && !n.get<bool>()) none = true;
        all.push_back(n);
      }
      if (!none) out.push_back(json{{"allOf", all}});
    }
    if (auto n = s.find("not"); n != s.end()) out.push_back(*n);
    if (auto i = s.find("if"); i != s.end()) {
      if (auto t = s.find("then"); t != s.end()) {
        json n = Negate(*t, Child(ptr, "then"), depth + 1);
        out.push_back(json{{"allOf", {*i, n}}});
      }
      if (auto e = s.find("else"); e != s.end()) {
        json n = Negate(*e, Child(ptr, "else"), depth + 1);
        json ni = Negate(*i, Child(ptr, "if"), depth + 1);
        out.push_back(json{{"allOf", {ni, n}}});
      }
    }
    if (auto m = s.find(kUnsupportedKw); m != s.end()) out.push_back(json{{kUnsupportedKw, *m}});
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (IsUnsupported(it.key())) out.push_back(Marker(nullptr, it.key(), ptr, ""));
    }
    return AnyOfOrSingle(std::move(out));
  }

  // Values of each type other than the enum's (or const's).
  void NegateEnum(const json& s, const std::string& ptr, std::vector<json>* out) {
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

  // if/then/else as (if and then) or (not if and else): disjoint branches.
  json Conditional(const json& s, const std::string& ptr) {
    auto t = s.find("then");
    auto e = s.find("else");
    if (t == s.end() && e == s.end()) return true;
    const json& cond = s["if"];
    json a = json{{"allOf", {cond, t == s.end() ? json(true) : *t}}};
    json ni = Negate(cond, Child(ptr, "if"), 0);
    json b = json{{"allOf", {ni, e == s.end() ? json(true) : *e}}};
    return json{{"anyOf", {a, b}}};
  }

  // One dependency "a" -> (required names | schema) as a union of two
  // disjoint branches: "a" absent, or "a" present with what it needs. When
  // the schema already requires "a", only the second branch.
  json Dependency(const std::string& a, const json& dep, const json& s) {
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
  void LowerConditionals(json& s, const std::string& ptr, json* parts) {
    if (s.contains("if")) {
      parts->push_back(Conditional(s, ptr));
      s.erase("if");
      s.erase("then");
      s.erase("else");
    }
    for (const char* k : {"dependencies", "dependentRequired", "dependentSchemas"}) {
      auto d = s.find(k);
      if (d == s.end()) continue;
      if (!d->is_object()) Invalid(absl::StrCat(k, " at ", Where(ptr), " is not an object"));
      for (auto it = d->begin(); it != d->end(); ++it) {
        if (!it->is_array() && !it->is_object() && !it->is_boolean())
          Invalid(absl::StrCat(k, " at ", Where(ptr), ": \"", Shown(it.key()), "\" is not an array or a schema"));
        parts->push_back(Dependency(it.key(), it.value(), s));
      }
      s.erase(k);
    }
  }

  // A flat schema (no $ref/allOf) with a `not` beyond types, `if` or
  // dependencies: the same schema with those keywords moved into allOf, and
  // its types made explicit (what ConvertPlain would infer), so that merged
  // branches carrying their own types cannot change them.
  std::optional<json> Lower(const json& s, const std::string& ptr) {
    auto n = s.find("not");
    bool complex_not = n != s.end() && !IsTypeOnlyNot(*n);
    bool has = complex_not || s.contains("if") || s.contains("dependencies") ||
               s.contains("dependentRequired") || s.contains("dependentSchemas");
    if (!has) return std::nullopt;
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
      json neg = Negate(*n, Child(ptr, "not"), 0);
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
    LowerConditionals(out, ptr, &parts);
    out["allOf"] = parts;
    return out;
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

  Re ConvertEnum(const json& s, const std::string& ptr, const std::set<std::string>& types,
                 bool non_integer) {
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
    // Other validation keywords beside enum/const (e.g. bounds, or the
    // exclusions a `not` leaves): keep the values the rest of the schema
    // accepts, tested on their json.dumps text against the rest's regex. If
    // the rest cannot be converted, the values are kept (as before).
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
      try {
        Re rr = Convert(rest, ptr);
        if (!rr) return std::nullopt;
        auto d = BudgetedDfa(*rr, o_.budget.max_states);
        if (d.ok()) rest_dfa = *d;
      } catch (const ConvertError& e) {
        if (IsBudgetError(e.status)) throw;
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

  static bool HasNestedObject(const json& v) {
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

  // Whether the rest regex accepts `v`. The regex fixes the order of object
  // keys (schema order), so a top-level object is tried in every key order
  // (up to 7 keys; larger objects in their own order).
  bool EnumValueMatches(const Dfa& dfa, const json& v) const {
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
  std::string ConstText(const json& v) const {
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
    if (rules_mode_) return AnyValueRule();
    return AnyValueRegex(depth);
  }
  // Any JSON value, arrays and objects nested at most `depth` deep.
  const std::string& AnyValueRegex(int depth) const {
    if (depth < 0) depth = 0;
    auto it = any_cache_.find(depth);
    if (it != any_cache_.end()) return it->second;
    std::string scalars = absl::StrCat("null|true|false|", *NumberRangeRegex({}, false, {}, false),
                                       "|", StringAny());
    std::string r;
    if (depth == 0) {
      r = "(?:" + scalars + ")";
    } else {
      const std::string v = AnyValueRegex(depth - 1);
      std::string arr = absl::StrCat(Open('['), "(?:", v, "(?:", item_sep_, v, ")*)?", Close(']'));
      std::string kv = absl::StrCat(StringAny(), key_sep_, v);
      std::string obj = absl::StrCat(Open('{'), "(?:", kv, "(?:", item_sep_, kv, ")*)?", Close('}'));
      r = absl::StrCat("(?:", scalars, "|", arr, "|", obj, ")");
    }
    return any_cache_[depth] = r;
  }

  // Rules mode: any JSON value, nested without a bound (one recursive rule).
  const std::string& AnyValueRule() {
    if (!any_rule_.empty()) return any_rule_;
    const size_t k = rules_.size();
    rules_.push_back({"any JSON value", kNoString});
    any_rule_ = RuleRef(k);
    const std::string& v = any_rule_;
    std::string scalars = absl::StrCat("null|true|false|", *NumberRangeRegex({}, false, {}, false),
                                       "|", StringAny());
    std::string arr = absl::StrCat(Open('['), "(?:", v, "(?:", item_sep_, v, ")*)?", Close(']'));
    std::string kv = absl::StrCat(StringAny(), key_sep_, v);
    std::string obj = absl::StrCat(Open('{'), "(?:", kv, "(?:", item_sep_, kv, ")*)?", Close('}'));
    rules_[k].regex = absl::StrCat(scalars, "|", arr, "|", obj);
    return any_rule_;
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
    if (auto ns = s.find(kNotStrings); ns != s.end()) return ConvertExcludedStrings(s, *ns, ptr);
    std::string content;
    bool has_pattern = false;
    if (auto p = s.find("pattern"); p != s.end()) {
      if (!p->is_string()) Invalid(absl::StrCat("pattern at ", Where(ptr), " is not a string"));
      bool length_applied = false;
      if ((min_len && *min_len > 0) || max_len) {
        auto r = PatternToJsonStringRegex(p->get<std::string>(), false, nullptr,
                                          {min_len.value_or(0), max_len.value_or(-1)},
                                          &length_applied, o_.max_pattern_nesting);
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
        Warn("format", ptr, absl::StrCat("\"", Shown(f->get<std::string>()), "\" not enforced"));
      } else if (has_pattern) {
        Warn("format", ptr, absl::StrCat("\"", Shown(f->get<std::string>()),
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

  // Strings of `s` that are none of `excluded` (from a negated enum/const).
  // Exact when `s` has no other string keyword, or when no excluded string
  // satisfies them (the exclusion is then void); otherwise the exclusion is
  // not enforced (warning): a regex cannot subtract from a pattern here.
  Re ConvertExcludedStrings(const json& s, const json& excluded, const std::string& ptr) {
    json rest = s;
    rest.erase(kNotStrings);
    Re base = ConvertString(rest, ptr);
    if (!base) return base;
    std::vector<std::string> words;
    for (auto& w : excluded)
      if (w.is_string()) words.push_back(w.get<std::string>());
    if (words.empty()) return base;
    if (!HasValidation(rest, {"type", "nullable", "enum", "const", "not"})) {
      return "\"" + ExcludedStringsRegex(words) + "\"";
    }
    auto d = BudgetedDfa(*base, o_.budget.max_states);
    bool void_exclusion = d.ok();
    for (size_t i = 0; void_exclusion && i < words.size(); ++i) {
      if ((*d)->Matches(PythonJsonString(words[i], o_.ensure_ascii))) void_exclusion = false;
    }
    if (!void_exclusion) {
      Warn("not", ptr, "excluded strings not enforced together with pattern/format/length");
    }
    return base;
  }

  // A pattern's regex over JSON string content. An unanchored pattern
  // (search semantics) whose automaton would be large is anchored instead,
  // with a warning: ".*p.*" can need exponentially many DFA states.
  std::string PatternRegex(const std::string& pattern, const std::string& ptr,
                           const char* keyword) {
    auto cached = pattern_cache_.find(pattern);
    if (cached == pattern_cache_.end()) {
      bool was_anchored = false;
      auto r = PatternToJsonStringRegex(pattern, false, &was_anchored, {0, -1}, nullptr,
                                        o_.max_pattern_nesting);
      if (!r.ok()) Unsupported(keyword, ptr, std::string(r.status().message()));
      PatternInfo info{*r, false};
      if (!was_anchored) {
        auto dfa = BudgetedDfa(*r, kMaxUnanchoredPatternStates);
        if (!dfa.ok()) {
          auto anchored = PatternToJsonStringRegex(pattern, true, nullptr, {0, -1}, nullptr,
                                                   o_.max_pattern_nesting);
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
  // `contains` C with minContains m (default 1) and maxContains M: every
  // element matches `items` I, and m..M of them also match C. Elements split
  // exactly into P = I and C, and N = I and not C, so the array is
  //   (N,)* P ((, N)* , P){m-1,M-1} (, N)*      (plus all-N arrays when m = 0).
  // Inside contains the spec holds (no type inference), so P and N partition
  // I. Exact with items a schema (or absent) and no minItems above m nor
  // maxItems; otherwise an error (unless every element is P, or every one N).
  Re ConvertContains(const json& s, const std::string& ptr) {
    const std::string cptr = Child(ptr, "contains");
    int64_t lo = IntKw(s, "minContains", ptr).value_or(1);
    std::optional<int64_t> hi = IntKw(s, "maxContains", ptr);
    json plain = s;
    plain.erase("contains");
    plain.erase("minContains");
    plain.erase("maxContains");
    if (hi && lo > *hi) return std::nullopt;
    if (lo == 0 && !hi) return ConvertArray(plain, ptr);
    if (s.contains("prefixItems") || (s.contains("items") && s["items"].is_array())) {
      Unsupported("contains", ptr, "beside prefixItems or tuple items");
    }
    const json any_type = json{{"type", TypeList({AllTypes().begin(), AllTypes().end()})}};
    const json item = s.contains("items") ? s["items"] : json(true);
    const json pos_s = json{{"allOf", {item, any_type, s["contains"]}}};
    const json neg_s = json{{"allOf", {item, any_type, json{{"not", s["contains"]}}}}};
    Re pos = Convert(pos_s, cptr);
    Re neg = Convert(neg_s, cptr);
    if (!pos) {
      if (lo > 0) return std::nullopt;
      plain["items"] = neg_s;
      return ConvertArray(plain, ptr);
    }
    if (!neg || (hi && *hi == 0)) {
      if (!neg) {
        plain["items"] = pos_s;
        plain["minItems"] = std::max(lo, IntKw(s, "minItems", ptr).value_or(0));
        if (hi) plain["maxItems"] = std::min(*hi, IntKw(s, "maxItems", ptr).value_or(*hi));
      } else {
        plain["items"] = neg_s;
      }
      return ConvertArray(plain, ptr);
    }
    if (s.contains("maxItems") || IntKw(s, "minItems", ptr).value_or(0) > lo) {
      Unsupported("contains", ptr, "with maxItems, or minItems above minContains");
    }
    if (auto u = s.find("uniqueItems"); u != s.end() && u->is_boolean() && u->get<bool>()) {
      Warn("uniqueItems", ptr, "not enforced");
    }
    const std::string& sep = item_sep_;
    std::optional<int64_t> more;
    if (hi) more = *hi - 1;
    std::string some = absl::StrCat(
        "(?:", *neg, sep, ")*", *pos,
        Repeat(absl::StrCat("(?:(?:", sep, *neg, ")*", sep, *pos, ")"), std::max<int64_t>(lo - 1, 0),
               more, ptr, "maxContains"),
        "(?:", sep, *neg, ")*");
    std::string empty = Open('[') + Close(']').substr(ws_.size());
    if (lo > 0) return Open('[') + some + Close(']');
    std::string none = absl::StrCat(*neg, "(?:", sep, *neg, ")*");
    return absl::StrCat("(?:", empty, "|", Open('['), "(?:", none, "|", some, ")", Close(']'), ")");
  }

  Re ConvertArray(const json& s, const std::string& ptr) {
    if (s.contains("contains")) return ConvertContains(s, ptr);
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

  // A trie of words by character: each edge is one whole UTF-8 character, so
  // the regex built from it never splits a multi-byte character.
  struct TrieNode {
    std::map<std::string, TrieNode> kids;
    bool terminal = false;
  };
  // JSON string content that is not one of `node`'s words.
  std::string Complement(const TrieNode& node) {
    std::string exclude;
    for (auto& [c, _] : node.kids) {
      if (c == "\\" || c == "]" || c == "[" || c == "^" || c == "-") exclude += '\\';
      exclude += c;
    }
    std::vector<std::string> alts;
    alts.push_back(absl::StrCat("(?:[^\"\\\\\\x00-\\x1f", exclude,
                                "]|\\\\[\"\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4})", CharRe(), "*"));
    for (auto& [c, kid] : node.kids) {
      alts.push_back(RegexEscape(c) + Complement(kid));
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
      for (size_t i = 0; i < enc.size();) {
        // enc is well-formed UTF-8 (from a parsed JSON string).
        const uint8_t lead = static_cast<uint8_t>(enc[i]);
        const size_t len = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        n = &n->kids[enc.substr(i, len)];
        i += len;
      }
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
              cut_required_ = absl::StrCat("required property \"", Shown(it.key()), "\" at ", Where(pptr),
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
  mutable std::map<int, std::string> any_cache_;
  std::map<std::string, std::pair<std::string, const json*>> anchors_;
  bool anchors_built_ = false;
  const bool rules_mode_;
  std::vector<JsonSchemaRule> rules_;
  std::map<std::string, size_t> rule_of_ptr_;   // $ref target pointer -> rule
  std::map<std::string, size_t> rule_of_text_;  // split-off regex -> rule
  std::set<size_t> empty_rules_;                // $ref targets without instances
  std::set<size_t> in_progress_;                // $ref targets being converted
  std::string any_rule_;                        // "(?&k)" once made
  int cuts_ = 0;
  std::string cut_required_;
  int64_t calls_ = 0;
  int depth_ = 0;
};

}  // namespace

namespace {

// Checks the options and the document's size and nesting, then parses it.
absl::StatusOr<json> ParseSchema(std::string_view schema_json, const JsonSchemaOptions& options) {
  if (schema_json.size() > options.max_schema_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("schema is ", schema_json.size(),
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
  for (auto [value, max, name] : {std::tuple{options.max_schema_nesting, kMaxSchemaNesting,
                                             "max_schema_nesting"},
                                  std::tuple{options.max_schema_depth, kMaxSchemaDepth,
                                             "max_schema_depth"},
                                  std::tuple{options.max_pattern_nesting, kMaxPatternNesting,
                                             "max_pattern_nesting"}}) {
    if (value < 1 || value > max) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " ", value, " is outside [1, ", max, "]"));
    }
  }
  // Before any tree is built: nesting (every walk below recurses per level),
  // object size (ordered_json inserts in linear time) and the document's end
  // (nlohmann stops at a NUL byte as if the text ended there).
  if (auto st = internal::CheckJsonStructure(
          schema_json,
          {.max_depth = static_cast<size_t>(options.max_schema_nesting),
           .max_object_members = kMaxSchemaObjectMembers,
           .depth_limit_name = "max_schema_nesting, maskd --max_schema_nesting"},
          "schema");
      !st.ok()) {
    return st;
  }
  json root;
  try {
    root = json::parse(schema_json.begin(), schema_json.end());
  } catch (const json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat("schema is not valid JSON: ", Shown(e.what()),
                                                   " (byte offset ", e.byte, ")"));
  } catch (const json::exception& e) {
    // out_of_range 406: a number beyond double ("1e400"), which the JSON
    // grammar allows but no schema can mean. Not a parse_error: it escaped
    // as an uncaught exception until json_schema_fuzzer found it.
    std::string what = e.what();
    std::string where;
    if (size_t q = what.find('\''); q != std::string::npos) {
      size_t q2 = what.find('\'', q + 1);
      if (q2 != std::string::npos && q2 > q + 1) {
        size_t at = schema_json.find(what.substr(q + 1, q2 - q - 1));
        if (at != std::string_view::npos) where = absl::StrCat(" (byte offset ", at, ")");
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("schema is not valid JSON: ", Shown(what), where));
  }
  // Between parsing and conversion: a large document takes a while to parse.
  if (options.budget.cancel != nullptr && options.budget.cancel->load(std::memory_order_relaxed)) {
    return ConversionCancelledError();
  }
  if (absl::Now() > options.budget.deadline) return ConversionDeadlineError();
  return root;
}

// Runs `fn(converter)` and turns the converter's exceptions into a status.
template <typename Result, typename Fn>
absl::StatusOr<Result> RunConverter(const json& root, const JsonSchemaOptions& options, bool rules,
                                    Fn fn) {
  try {
    Converter c(root, options, rules);
    return fn(c);
  } catch (const ConvertError& e) {
    if (e.status.message().size() <= kMaxMessageBytes) return e.status;
    const auto m = e.status.message();
    return absl::Status(e.status.code(), Shown(std::string_view(m.data(), m.size()), kMaxMessageBytes));
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed schema: ", Shown(e.what())));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("json schema conversion failed: ", Shown(e.what())));
  }
}

}  // namespace

absl::StatusOr<JsonSchemaRegex> JsonSchemaToRegex(std::string_view schema_json,
                                                  const JsonSchemaOptions& options) {
  auto root = ParseSchema(schema_json, options);
  if (!root.ok()) return root.status();
  return RunConverter<JsonSchemaRegex>(*root, options, false, [&](Converter& c) -> absl::StatusOr<JsonSchemaRegex> {
    JsonSchemaRegex out;
    out.regex = c.Run();
    out.warnings = c.warnings();
    out.truncated_recursion = c.truncated_recursion();
    if (out.regex.size() > options.max_regex_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "regex is ", out.regex.size(), " bytes, above max_regex_bytes (",
          options.max_regex_bytes, ")"));
    }
    return out;
  });
}

absl::StatusOr<JsonSchemaRules> JsonSchemaToRules(std::string_view schema_json,
                                                  const JsonSchemaOptions& options) {
  auto root = ParseSchema(schema_json, options);
  if (!root.ok()) return root.status();
  return RunConverter<JsonSchemaRules>(*root, options, true, [&](Converter& c) -> absl::StatusOr<JsonSchemaRules> {
    c.Run();
    JsonSchemaRules out;
    out.rules = c.TakeRules();
    out.warnings = c.warnings();
    size_t bytes = 0;
    for (const JsonSchemaRule& r : out.rules) bytes += r.regex.size();
    if (bytes > options.max_regex_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "rules are ", bytes, " bytes, above max_regex_bytes (", options.max_regex_bytes, ")"));
    }
    return out;
  });
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
                      ";maxs=", o.max_schema_bytes, ";maxr=", o.max_regex_bytes,
                      ";nest=", o.max_schema_nesting, ";depth=", o.max_schema_depth,
                      ";pnest=", o.max_pattern_nesting, ";dfa=", o.budget.max_states, "/",
                      o.budget.max_nfa_states);
}

}  // namespace maskd
