// The converter's recursion over subschemas: $ref, allOf, not/if lowering
// and anyOf/oneOf dispatched, then one regex per allowed type; and the
// helpers every emitter shares (warnings, errors, the budget, repeats).
// See schema/internal/converter.h.
#include "schema/internal/converter.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "schema/internal/json_access.h"
#include "schema/internal/messages.h"

namespace maskd::json_schema_internal {
namespace {

// The [keyword, pointer, why] of a kUnsupportedKw marker. A user schema may
// spell the keyword itself: its value's shape is checked as nlohmann's
// accessors did (a missing element reads as null).
struct UnsupportedMarker {
  std::string keyword, ptr, why;
};
absl::StatusOr<UnsupportedMarker> ReadUnsupportedMarker(const json& v) {
  MASKD_RETURN_IF_ERROR(CheckIndexable(v));
  const json null_value;
  auto element = [&](size_t i) -> const json& { return i < v.size() ? v[i] : null_value; };
  UnsupportedMarker m;
  MASKD_ASSIGN_OR_RETURN(m.keyword, StringValue(element(0)));
  MASKD_ASSIGN_OR_RETURN(m.ptr, StringValue(element(1)));
  MASKD_ASSIGN_OR_RETURN(m.why, StringValue(element(2)));
  return m;
}

}  // namespace

Converter::Converter(const json& root, const JsonSchemaOptions& o, bool rules)
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

absl::StatusOr<std::string> Converter::Run() {
  if (rules_mode_) rules_.push_back({"/", ""});  // rule 0: the root
  MASKD_ASSIGN_OR_RETURN(Re r, Convert(root_, ""));
  if (!r) {
    if (!cut_required_.empty()) {
      return Invalid(absl::StrCat("schema has no instance within max_recursion_depth ",
                                  o_.max_recursion_depth, ": ", cut_required_));
    }
    return Invalid("schema has no valid instance (it is false or contradictory)");
  }
  if (rules_mode_) rules_[0].regex = *r;
  return *r;
}

void Converter::Warn(const std::string& keyword, const std::string& ptr, const std::string& what) {
  warnings_.insert(absl::StrCat(keyword, " at ", Where(ptr), ": ", what));
}

absl::Status Converter::Unsupported(const std::string& keyword, const std::string& ptr,
                                    const std::string& why) {
  return Invalid(absl::StrCat("unsupported keyword \"", keyword, "\" at ", Where(ptr),
                              why.empty() ? "" : ": ", why));
}

absl::Status Converter::CheckBudget(bool check_clock) const {
  const DfaOptions& b = o_.budget;
  if (b.cancel != nullptr && b.cancel->load(std::memory_order_relaxed)) {
    return ConversionCancelledError();
  }
  if (check_clock && b.deadline != absl::InfiniteFuture() && absl::Now() > b.deadline) {
    return ConversionDeadlineError();
  }
  return absl::OkStatus();
}

absl::Status Converter::CountStep() {
  if (++steps_ > kMaxSteps) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "schema too complex: more than ", kMaxSteps, " subschema conversions and value checks"));
  }
  // The flag each time, the clock less often.
  return CheckBudget(/*check_clock=*/steps_ % 64 == 1);
}

absl::StatusOr<std::shared_ptr<const Dfa>> Converter::BudgetedDfa(const std::string& regex,
                                                                  uint32_t max_states) const {
  DfaOptions dopt = o_.budget;
  dopt.max_states = std::min(max_states, o_.budget.max_states);
  std::string expanded;
  if (rules_mode_) {
    auto e = ExpandRules(regex);
    if (!e.ok()) {
      // A rule still being converted, or expanded rules over the byte
      // limit: fall back. Anything else (a reference ExpandRules cannot
      // read) ends the conversion.
      if (e.status().code() == absl::StatusCode::kFailedPrecondition ||
          e.status().code() == absl::StatusCode::kResourceExhausted) {
        return nullptr;
      }
      return e.status();
    }
    expanded = *std::move(e);
  }
  auto d = Dfa::FromPattern(rules_mode_ ? expanded : regex, RegexLimits{}, dopt);
  if (d.status().code() == absl::StatusCode::kDeadlineExceeded) return ConversionDeadlineError();
  if (d.status().code() == absl::StatusCode::kCancelled) return ConversionCancelledError();
  if (!d.ok()) return nullptr;
  return *std::move(d);
}

bool Converter::IsBudgetError(const absl::Status& s) {
  return s.code() == absl::StatusCode::kDeadlineExceeded ||
         s.code() == absl::StatusCode::kCancelled;
}

absl::Status Converter::CheckSize(const Re& r) const {
  if (r && r->size() > o_.max_regex_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("regex exceeds max_regex_bytes (", o_.max_regex_bytes, ")"));
  }
  return absl::OkStatus();
}

std::string Converter::Open(char c) const {
  return absl::StrCat("\\", std::string(1, c), ws_);
}
std::string Converter::Close(char c) const { return absl::StrCat(ws_, "\\", std::string(1, c)); }

absl::StatusOr<Re> Converter::Convert(const json& s_in, const std::string& ptr) {
  MASKD_RETURN_IF_ERROR(CountStep());
  // Each level is a few KiB of stack (Convert, ConvertInner, ConvertPlain,
  // ConvertObject/Array); the deepest schema MaskBench converts needs 29.
  // Past the limit depth_ stays raised (the error ends the conversion).
  if (++depth_ > o_.max_schema_depth) {
    return Invalid(absl::StrCat("schema nesting too deep (more than ", o_.max_schema_depth,
                         " levels of subschemas and $refs: max_schema_depth, maskd "
                         "--max_schema_depth) at ",
                         Where(ptr)));
  }
  struct DepthGuard {
    int& d;
    ~DepthGuard() { --d; }
  } guard{depth_};
  MASKD_ASSIGN_OR_RETURN(Re r, ConvertInner(s_in, ptr));
  MASKD_RETURN_IF_ERROR(CheckSize(r));
  return SplitLarge(std::move(r), ptr);
}

absl::StatusOr<Re> Converter::ConvertInner(const json& s_in, const std::string& ptr) {
  if (s_in.is_boolean()) return s_in.get<bool>() ? Re(AnyValue(o_.any_value_depth)) : Re();
  if (!s_in.is_object()) {
    return Invalid(absl::StrCat("schema at ", Where(ptr), " is not an object or a boolean"));
  }
  for (auto it = s_in.begin(); it != s_in.end(); ++it) {
    if (IsUnsupported(it.key())) return Unsupported(it.key(), ptr);
  }
  // A finite set of values (enum/const): each checked against the whole
  // schema, exactly; the keyword-by-keyword conversion below otherwise.
  MASKD_ASSIGN_OR_RETURN(std::optional<Re> finite, ConvertFinite(s_in, ptr));
  if (finite) return *std::move(finite);
  const json* s = &s_in;
  json normalized;
  if (s->contains("exclusiveMinimum") || s->contains("exclusiveMaximum")) {
    normalized = *s;
    NormalizeBounds(normalized);
    s = &normalized;
  }
  if (auto it = s->find("$ref"); it != s->end()) {
    if (!it->is_string()) return Invalid(absl::StrCat("$ref at ", Where(ptr), " is not a string"));
    if (!HasValidation(*s, {"$ref"})) return ConvertRef(it->get<std::string>(), ptr);
    return ConvertMerged({{s, &ptr}}, ptr);
  }
  if (auto it = s->find("allOf"); it != s->end()) {
    if (!it->is_array()) return Invalid(absl::StrCat("allOf at ", Where(ptr), " is not an array"));
    return ConvertMerged({{s, &ptr}}, ptr);
  }
  MASKD_ASSIGN_OR_RETURN(std::optional<json> lowered, Lower(*s, ptr));
  if (lowered) return Convert(*lowered, ptr);
  for (const char* key : {"anyOf", "oneOf"}) {
    auto it = s->find(key);
    if (it == s->end()) continue;
    if (!it->is_array() || it->empty()) {
      return Invalid(absl::StrCat(key, " at ", Where(ptr), " is not a non-empty array"));
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
        MASKD_ASSIGN_OR_RETURN(r, Convert((*it)[i], bptr));
      } else {
        MASKD_ASSIGN_OR_RETURN(r, ConvertMerged({{&base, &ptr}, {&(*it)[i], &bptr}}, bptr));
      }
      if (r) parts.push_back(*r);
    }
    return UnionRe(parts);
  }
  return ConvertPlain(*s, ptr);
}

// oneOf whose branches are consts/enums of distinct values or distinct
// single types cannot overlap.
bool Converter::DisjointBranches(const json& branches) {
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

std::string Union(const std::vector<std::string>& parts_in) {
  std::vector<std::string> parts;
  std::set<std::string> seen;
  for (auto& p : parts_in)
    if (seen.insert(p).second) parts.push_back(p);
  if (parts.empty()) return std::string();  // caller checks emptiness through Re
  if (parts.size() == 1) return parts[0];
  return "(?:" + absl::StrJoin(parts, "|") + ")";
}

Re UnionRe(const std::vector<std::string>& parts) {
  if (parts.empty()) return std::nullopt;
  return Union(parts);
}

absl::StatusOr<Re> Converter::ConvertPlain(const json& s, const std::string& ptr) {
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
      return Invalid(absl::StrCat("type at ", Where(ptr), " is not a string or array"));
    }
    for (auto& x : types)
      if (std::find(kAll.begin(), kAll.end(), x) == kAll.end())
        return Invalid(absl::StrCat("unknown type \"", x, "\" at ", Where(ptr)));
  } else {
    types = InferTypes(s);
  }
  if (auto n = s.find("nullable"); n != s.end() && n->is_boolean() && n->get<bool>())
    types.insert("null");
  bool non_integer = false;  // numbers must not be integers ("not": integer)
  if (auto n = s.find("not"); n != s.end()) {
    MASKD_RETURN_IF_ERROR(ApplyNot(*n, Child(ptr, "not"), &types, &non_integer));
  }
  if (types.count("number")) types.erase("integer");
  if (auto m = s.find(kUnsupportedKw); m != s.end() && !types.empty()) {
    MASKD_ASSIGN_OR_RETURN(UnsupportedMarker marker, ReadUnsupportedMarker(*m));
    return Unsupported(marker.keyword, marker.ptr, marker.why);
  }

  if (s.contains("enum") || s.contains("const")) {
    return ConvertEnum(s, ptr, types, non_integer);
  }

  std::vector<std::string> parts;
  for (const std::string& t : kAll) {
    if (!types.count(t)) continue;
    absl::StatusOr<Re> r;
    if (t == "null") r = Re("null");
    else if (t == "boolean") r = Re("(?:true|false)");
    else if (t == "object") r = ConvertObject(s, ptr);
    else if (t == "array") r = ConvertArray(s, ptr);
    else if (t == "string") r = ConvertString(s, ptr);
    else if (t == "integer") r = ConvertInteger(s, ptr);
    else if (t == "number") r = non_integer ? ConvertNonInteger(s, ptr) : ConvertNumber(s, ptr);
    if (!r.ok()) return r.status();
    if (*r) parts.push_back(**r);
  }
  return UnionRe(parts);
}

std::set<std::string> Converter::InferTypes(const json& s) const {
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
absl::StatusOr<Re> Converter::ConvertNonInteger(const json& s, const std::string& ptr) {
  for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}) {
    if (s.contains(k)) return Unsupported("not", Child(ptr, "not"), absl::StrCat("\"not\": integer beside ", k));
  }
  return std::string(
      "-?(?:(?:0|[1-9][0-9]*)\\.[0-9]*[1-9][0-9]*|[1-9](?:\\.[0-9]*[1-9])?e-0*[1-9][0-9]*)");
}

absl::Status Converter::ApplyNot(const json& n, const std::string& ptr,
                                 std::set<std::string>* types, bool* non_integer) {
  if (n.is_boolean()) {
    if (n.get<bool>()) types->clear();
    return absl::OkStatus();
  }
  if (!n.is_object()) return Unsupported("not", ptr);
  if (n.empty()) {
    types->clear();
    return absl::OkStatus();
  }
  bool only_type = true;
  for (auto it = n.begin(); it != n.end(); ++it)
    if (it.key() != "type" && IsValidationKeyword(it.key())) only_type = false;
  if (!only_type || !n.contains("type")) {
    return Unsupported("not", ptr, "only \"not\": {\"type\": ...} is enforced");
  }
  std::vector<std::string> ts;
  if (n["type"].is_string()) {
    ts.push_back(n["type"].get<std::string>());
  } else if (n["type"].is_array()) {
    for (auto& x : n["type"]) {
      MASKD_ASSIGN_OR_RETURN(std::string t, StringValue(x));
      ts.push_back(std::move(t));
    }
  }
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
  return absl::OkStatus();
}

absl::StatusOr<std::string> Converter::Repeat(const std::string& unit, int64_t min,
                                              std::optional<int64_t> max,
                                              const std::string& keyword_ptr, const char* max_kw) {
  if (min < 0) min = 0;
  if (max && *max > o_.max_counted_repeat) {
    Warn(max_kw, keyword_ptr, absl::StrCat("bound ", *max, " above max_counted_repeat (",
                                           o_.max_counted_repeat, "): not enforced"));
    max.reset();
  }
  if (min > o_.max_counted_repeat) {
    return Invalid(absl::StrCat("lower bound ", min, " at ", Where(keyword_ptr),
                                " above max_counted_repeat"));
  }
  if (max && *max == 0) return std::string();
  if (!max) {
    if (min == 0) return unit + "*";
    if (min == 1) return unit + "+";
    return absl::StrCat(unit, "{", min, ",}");
  }
  if (min == *max) return min == 1 ? unit : absl::StrCat(unit, "{", min, "}");
  if (min == 0 && *max == 1) return unit + "?";
  return absl::StrCat(unit, "{", min, ",", *max, "}");
}

absl::StatusOr<std::optional<int64_t>> Converter::IntKw(const json& s, const char* k,
                                                        const std::string& ptr) {
  auto it = s.find(k);
  if (it == s.end()) return std::optional<int64_t>();
  if (!it->is_number() || it->get<double>() < 0) {
    return Invalid(absl::StrCat(k, " at ", Where(ptr), " is not a non-negative number"));
  }
  double d = it->get<double>();
  if (d > 1e15) return std::optional<int64_t>(static_cast<int64_t>(1e15));
  return std::optional<int64_t>(static_cast<int64_t>(std::ceil(d)));
}

}  // namespace maskd::json_schema_internal
