// enum/const against the whole schema: a schema whose instances are among
// finitely many listed values (an enum or const, possibly in an allOf branch
// or behind a $ref) converts to the values that satisfy every keyword,
// decided value by value with the specification's semantics. Exact where the
// keyword-by-keyword conversion is not (a `not` of a pattern, oneOf
// exclusivity, negated objects and arrays).
// See schema/internal/converter.h.
#include "schema/internal/converter.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schema/internal/messages.h"

namespace maskd::json_schema_internal {
namespace {

// Candidate sets and the recursion of the check are bounded: a schema past
// these takes the keyword-by-keyword conversion.
constexpr size_t kMaxCandidates = 4096;
constexpr int kMaxCheckDepth = 64;

// Unicode scalar values in UTF-8 text (JSON Schema string length).
int64_t CodepointCount(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Whether decimal `v` is an integer multiple of decimal `m` (m > 0); nullopt
// when m's scaled digits pass 18 (the remainder would not fit).
std::optional<bool> DecimalMultiple(const Decimal& v, const Decimal& m) {
  size_t scale = std::max(v.fp.size(), m.fp.size());
  auto scaled = [scale](const Decimal& d) {
    std::string s = d.ip + d.fp + std::string(scale - d.fp.size(), '0');
    size_t nz = s.find_first_not_of('0');
    return nz == std::string::npos ? std::string("0") : s.substr(nz);
  };
  std::string md = scaled(m), vd = scaled(v);
  if (md == "0" || md.size() > 18) return std::nullopt;
  unsigned __int128 mod = 0;
  for (char c : md) mod = mod * 10 + static_cast<unsigned>(c - '0');
  unsigned __int128 r = 0;
  for (char c : vd) r = (r * 10 + static_cast<unsigned>(c - '0')) % mod;
  return r == 0;
}

absl::Status NotChecked(const std::string& keyword, const std::string& ptr) {
  return absl::UnimplementedError(
      absl::StrCat("instance check: ", keyword, " at ", Where(ptr)));
}

// type, const, enum and the negations' excluded strings.
absl::StatusOr<bool> AcceptsValue(const json& s, const std::string& ptr, const json& v) {
  if (auto t = s.find("type"); t != s.end()) {
    std::set<std::string> types;
    for (const json& x : t->is_array() ? *t : json::array({*t})) {
      if (!x.is_string() || std::find(AllTypes().begin(), AllTypes().end(),
                                      x.get<std::string>()) == AllTypes().end()) {
        return NotChecked("type", ptr);
      }
      types.insert(x.get<std::string>());
    }
    if (auto n = s.find("nullable"); n != s.end() && n->is_boolean() && n->get<bool>())
      types.insert("null");
    if (!TypeMatches(v, types)) return false;
  }
  if (auto c = s.find("const"); c != s.end() && *c != v) return false;
  if (auto e = s.find("enum"); e != s.end()) {
    if (!e->is_array()) return NotChecked("enum", ptr);
    if (std::find(e->begin(), e->end(), v) == e->end()) return false;
  }
  if (auto ns = s.find(kNotStrings); ns != s.end() && v.is_string()) {
    if (!ns->is_array()) return NotChecked(kNotStrings, ptr);
    if (std::find(ns->begin(), ns->end(), v) != ns->end()) return false;
  }
  return true;
}

// The bounds and multipleOf, for a number `v` (bounds already in the numeric
// form, NormalizeBounds).
absl::StatusOr<bool> AcceptsNumber(const json& s, const std::string& ptr, const json& v) {
  auto number = [&](const char* k) -> absl::StatusOr<std::optional<Decimal>> {
    auto it = s.find(k);
    if (it == s.end()) return std::optional<Decimal>();
    std::optional<Decimal> d = DecimalOf(*it);
    if (!d) return NotChecked(k, ptr);
    return d;
  };
  std::optional<Decimal> x = DecimalOf(v);
  if (!x) return NotChecked("a number", ptr);
  MASKD_ASSIGN_OR_RETURN(std::optional<Decimal> lo, number("minimum"));
  MASKD_ASSIGN_OR_RETURN(std::optional<Decimal> hi, number("maximum"));
  MASKD_ASSIGN_OR_RETURN(std::optional<Decimal> xlo, number("exclusiveMinimum"));
  MASKD_ASSIGN_OR_RETURN(std::optional<Decimal> xhi, number("exclusiveMaximum"));
  MASKD_ASSIGN_OR_RETURN(std::optional<Decimal> mul, number("multipleOf"));
  if (lo && CompareDecimal(*x, *lo) < 0) return false;
  if (hi && CompareDecimal(*x, *hi) > 0) return false;
  if (xlo && CompareDecimal(*x, *xlo) <= 0) return false;
  if (xhi && CompareDecimal(*x, *xhi) >= 0) return false;
  if (mul) {
    if (mul->neg || (mul->ip == "0" && mul->fp.empty())) return NotChecked("multipleOf", ptr);
    std::optional<bool> multiple = DecimalMultiple(*x, *mul);
    if (!multiple) return NotChecked("multipleOf", ptr);
    if (!*multiple) return false;
  }
  return true;
}

}  // namespace

std::optional<std::vector<json>> Converter::FiniteCandidates(const json& s, const std::string& ptr,
                                                             int depth) {
  if (depth > kMaxCheckDepth || !s.is_object()) return std::nullopt;
  if (auto c = s.find("const"); c != s.end()) return std::vector<json>{*c};
  if (auto e = s.find("enum"); e != s.end()) {
    if (!e->is_array() || e->size() > kMaxCandidates) return std::nullopt;
    return std::vector<json>(e->begin(), e->end());
  }
  if (auto a = s.find("allOf"); a != s.end() && a->is_array()) {
    for (size_t i = 0; i < a->size(); ++i) {
      auto c = FiniteCandidates((*a)[i], Child(ptr, "allOf", i), depth + 1);
      if (c) return c;
    }
  }
  if (auto r = s.find("$ref"); r != s.end() && r->is_string()) {
    std::string tptr;
    auto target = Resolve(r->get<std::string>(), ptr, &tptr);
    if (target.ok()) {
      auto c = FiniteCandidates(**target, tptr, depth + 1);
      if (c) return c;
    }
  }
  for (const char* k : {"anyOf", "oneOf"}) {
    auto a = s.find(k);
    if (a == s.end() || !a->is_array() || a->empty()) continue;
    std::vector<json> all;
    for (size_t i = 0; i < a->size(); ++i) {
      auto c = FiniteCandidates((*a)[i], Child(ptr, k, i), depth + 1);
      if (!c || all.size() + c->size() > kMaxCandidates) {
        all.clear();
        break;
      }
      for (auto& v : *c)
        if (std::find(all.begin(), all.end(), v) == all.end()) all.push_back(std::move(v));
    }
    if (!all.empty()) return all;
  }
  return std::nullopt;
}

absl::StatusOr<std::optional<Re>> Converter::ConvertFinite(const json& s, const std::string& ptr) {
  // A bare $ref stays a reference (a rule on the grammar route, a cached
  // regex on the regex route): its target takes this path itself.
  if (s.is_object() && s.contains("$ref") && !HasValidation(s, {"$ref"})) {
    return std::optional<Re>();
  }
  std::optional<std::vector<json>> candidates = FiniteCandidates(s, ptr, 0);
  if (!candidates) return std::optional<Re>();
  std::vector<std::string> parts;
  for (const json& v : *candidates) {
    absl::StatusOr<bool> ok = Accepts(s, ptr, v, 0);
    if (!ok.ok()) {
      if (ok.status().code() == absl::StatusCode::kUnimplemented) return std::optional<Re>();
      return ok.status();
    }
    if (*ok) parts.push_back(ConstRegex(v));
  }
  return std::optional<Re>(UnionRe(parts));
}

absl::StatusOr<bool> Converter::PatternAccepts(const std::string& pattern, const std::string& ptr,
                                               const std::string& text) {
  auto it = pattern_regex_cache_.find(pattern);
  if (it == pattern_regex_cache_.end()) {
    auto r = PatternToJsonStringRegex(pattern, false, nullptr, {0, -1}, nullptr,
                                      o_.max_pattern_nesting);
    it = pattern_regex_cache_
             .emplace(pattern, r.ok() ? std::optional<std::string>(*std::move(r)) : std::nullopt)
             .first;
  }
  if (!it->second) return NotChecked("pattern", ptr);
  return ContentAccepts(*it->second, ptr, text);
}

absl::StatusOr<bool> Converter::ContentAccepts(const std::string& content_regex,
                                               const std::string& ptr, const std::string& text) {
  auto it = check_dfa_cache_.find(content_regex);
  if (it == check_dfa_cache_.end()) {
    MASKD_ASSIGN_OR_RETURN(std::shared_ptr<const Dfa> dfa,
                           BudgetedDfa(content_regex, o_.budget.max_states));
    if (dfa == nullptr) return NotChecked("a pattern or format", ptr);
    it = check_dfa_cache_.emplace(content_regex, std::move(dfa)).first;
  }
  std::string quoted = PythonJsonString(text, o_.ensure_ascii);
  return it->second->Matches(std::string_view(quoted).substr(1, quoted.size() - 2));
}

absl::StatusOr<bool> Converter::Accepts(const json& s_in, const std::string& ptr, const json& v,
                                        int depth, bool shallow) {
  if (depth > kMaxCheckDepth) return NotChecked("nesting", ptr);
  MASKD_RETURN_IF_ERROR(CountStep());
  if (s_in.is_boolean()) return s_in.get<bool>();
  if (!s_in.is_object()) return NotChecked("a non-object schema", ptr);
  json normalized;
  const json* sp = &s_in;
  if (s_in.contains("exclusiveMinimum") || s_in.contains("exclusiveMaximum")) {
    normalized = s_in;
    NormalizeBounds(normalized);
    sp = &normalized;
  }
  const json& s = *sp;
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    if (IsUnsupported(k) || k == kUnsupportedKw || k == "unevaluatedProperties") {
      return NotChecked(k, ptr);
    }
  }
  // The families in this order: the first that fails (or errs) decides.
  MASKD_ASSIGN_OR_RETURN(bool ok, AcceptsValue(s, ptr, v));
  if (!ok) return false;
  if (!shallow) {
    MASKD_ASSIGN_OR_RETURN(ok, AcceptsApplicators(s, ptr, v, depth));
    if (!ok) return false;
  }
  if (v.is_number()) {
    MASKD_ASSIGN_OR_RETURN(ok, AcceptsNumber(s, ptr, v));
  } else if (v.is_string()) {
    MASKD_ASSIGN_OR_RETURN(ok, AcceptsString(s, ptr, v.get_ref<const std::string&>()));
  } else if (shallow) {
    return true;  // arrays' and objects' keywords recurse: left to the full check
  } else if (v.is_array()) {
    MASKD_ASSIGN_OR_RETURN(ok, AcceptsArray(s, ptr, v, depth));
  } else if (v.is_object()) {
    MASKD_ASSIGN_OR_RETURN(ok, AcceptsObject(s, ptr, v, depth));
  }
  return ok;
}

absl::StatusOr<std::optional<int64_t>> Converter::CheckedCount(const json& s, const char* k,
                                                               const std::string& ptr) {
  absl::StatusOr<std::optional<int64_t>> n = IntKw(s, k, ptr);
  if (!n.ok()) return NotChecked(k, ptr);
  return n;
}

absl::StatusOr<bool> Converter::AcceptsApplicators(const json& s, const std::string& ptr,
                                                   const json& v, int depth) {
  if (auto r = s.find("$ref"); r != s.end()) {
    if (!r->is_string()) return NotChecked("$ref", ptr);
    std::string tptr;
    auto target = Resolve(r->get<std::string>(), ptr, &tptr);
    if (!target.ok()) return NotChecked("$ref", ptr);
    MASKD_ASSIGN_OR_RETURN(bool ok, Accepts(**target, tptr, v, depth + 1));
    if (!ok) return false;
  }
  if (auto a = s.find("allOf"); a != s.end()) {
    if (!a->is_array()) return NotChecked("allOf", ptr);
    // Each member shallowly first: a false there is final and cheap where
    // another member's applicators are dear (a merged schema is
    // allOf[{anyOf of n enums}, {a const or pattern picking one}], checked
    // for each of the n values: n^2 branch checks, n^3 over the n merges,
    // where the pattern alone rejects n - 1 values). Errors are left for
    // the full check below to meet in order.
    for (size_t i = 0; i < a->size(); ++i) {
      absl::StatusOr<bool> shallow = Accepts((*a)[i], Child(ptr, "allOf", i), v, depth + 1,
                                             /*shallow=*/true);
      if (shallow.ok() && !*shallow) return false;
    }
    for (size_t i = 0; i < a->size(); ++i) {
      MASKD_ASSIGN_OR_RETURN(bool ok, Accepts((*a)[i], Child(ptr, "allOf", i), v, depth + 1));
      if (!ok) return false;
    }
  }
  for (const char* k : {"anyOf", "oneOf"}) {
    auto a = s.find(k);
    if (a == s.end()) continue;
    if (!a->is_array() || a->empty()) return NotChecked(k, ptr);
    int matched = 0;
    for (size_t i = 0; i < a->size(); ++i) {
      MASKD_ASSIGN_OR_RETURN(bool ok, Accepts((*a)[i], Child(ptr, k, i), v, depth + 1));
      matched += ok;
    }
    if (std::string(k) == "anyOf" ? matched == 0 : matched != 1) return false;
  }
  if (auto n = s.find("not"); n != s.end()) {
    MASKD_ASSIGN_OR_RETURN(bool ok, Accepts(*n, Child(ptr, "not"), v, depth + 1));
    if (ok) return false;
  }
  if (auto i = s.find("if"); i != s.end()) {
    MASKD_ASSIGN_OR_RETURN(bool cond, Accepts(*i, Child(ptr, "if"), v, depth + 1));
    const char* branch = cond ? "then" : "else";
    if (auto b = s.find(branch); b != s.end()) {
      MASKD_ASSIGN_OR_RETURN(bool ok, Accepts(*b, Child(ptr, branch), v, depth + 1));
      if (!ok) return false;
    }
  }
  return true;
}

absl::StatusOr<bool> Converter::AcceptsString(const json& s, const std::string& ptr,
                                              const std::string& text) {
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> min_len, CheckedCount(s, "minLength", ptr));
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> max_len, CheckedCount(s, "maxLength", ptr));
  int64_t n = CodepointCount(text);
  if ((min_len && n < *min_len) || (max_len && n > *max_len)) return false;
  if (auto p = s.find("pattern"); p != s.end()) {
    if (!p->is_string()) return NotChecked("pattern", ptr);
    MASKD_ASSIGN_OR_RETURN(bool ok, PatternAccepts(p->get<std::string>(), ptr, text));
    if (!ok) return false;
  }
  if (auto f = s.find("format"); f != s.end() && f->is_string()) {
    // Formats maskd enforces (FormatRegex), as the conversion enforces them.
    std::string fr = FormatRegex(f->get<std::string>());
    if (!fr.empty()) {
      MASKD_ASSIGN_OR_RETURN(bool ok, ContentAccepts(fr, Child(ptr, "format"), text));
      if (!ok) return false;
    }
  }
  return true;
}

absl::StatusOr<bool> Converter::AcceptsArray(const json& s, const std::string& ptr, const json& v,
                                             int depth) {
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> min_items, CheckedCount(s, "minItems", ptr));
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> max_items, CheckedCount(s, "maxItems", ptr));
  int64_t n = static_cast<int64_t>(v.size());
  if ((min_items && n < *min_items) || (max_items && n > *max_items)) return false;
  // Items at positions [0, tuple) follow the tuple's schemas; the rest `rest`.
  const json* tuple = nullptr;
  const char* tuple_kw = "prefixItems";
  const json* rest = nullptr;
  const char* rest_kw = "items";
  auto items = s.find("items");
  if (items != s.end() && items->is_array()) {
    tuple = &*items;
    tuple_kw = "items";
    if (auto ai = s.find("additionalItems"); ai != s.end()) {
      rest = &*ai;
      rest_kw = "additionalItems";
    }
  } else {
    if (auto pi = s.find("prefixItems"); pi != s.end()) {
      if (!pi->is_array()) return NotChecked("prefixItems", ptr);
      tuple = &*pi;
    }
    if (items != s.end()) rest = &*items;
  }
  size_t tn = tuple ? tuple->size() : 0;
  for (size_t i = 0; i < v.size(); ++i) {
    bool ok = true;
    if (i < tn) {
      MASKD_ASSIGN_OR_RETURN(ok, Accepts((*tuple)[i], Child(ptr, tuple_kw, i), v[i], depth + 1));
    } else if (rest) {
      MASKD_ASSIGN_OR_RETURN(ok, Accepts(*rest, Child(ptr, rest_kw), v[i], depth + 1));
    }
    if (!ok) return false;
  }
  if (auto u = s.find("uniqueItems"); u != s.end() && u->is_boolean() && u->get<bool>()) {
    for (size_t i = 0; i < v.size(); ++i)
      for (size_t j = i + 1; j < v.size(); ++j)
        if (v[i] == v[j]) return false;
  }
  if (auto c = s.find("contains"); c != s.end()) {
    MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> min_c, CheckedCount(s, "minContains", ptr));
    MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> max_c, CheckedCount(s, "maxContains", ptr));
    int64_t hits = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      MASKD_ASSIGN_OR_RETURN(bool ok, Accepts(*c, Child(ptr, "contains"), v[i], depth + 1));
      hits += ok;
    }
    if (hits < min_c.value_or(1) || (max_c && hits > *max_c)) return false;
  }
  return true;
}

absl::StatusOr<bool> Converter::AcceptsObject(const json& s, const std::string& ptr, const json& v,
                                              int depth) {
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> min_props, CheckedCount(s, "minProperties", ptr));
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> max_props, CheckedCount(s, "maxProperties", ptr));
  int64_t n = static_cast<int64_t>(v.size());
  if ((min_props && n < *min_props) || (max_props && n > *max_props)) return false;
  if (auto r = s.find("required"); r != s.end()) {
    if (!r->is_array()) return NotChecked("required", ptr);
    for (auto& k : *r) {
      if (!k.is_string()) return NotChecked("required", ptr);
      if (!v.contains(k.get<std::string>())) return false;
    }
  }
  MASKD_ASSIGN_OR_RETURN(bool ok, AcceptsMembers(s, ptr, v, depth));
  if (!ok) return false;
  // dependentRequired / dependentSchemas, and draft 7's dependencies (either).
  for (const char* k : {"dependencies", "dependentRequired", "dependentSchemas"}) {
    auto d = s.find(k);
    if (d == s.end()) continue;
    if (!d->is_object()) return NotChecked(k, ptr);
    for (auto dep = d->begin(); dep != d->end(); ++dep) {
      if (!v.contains(dep.key())) continue;
      if (dep.value().is_array()) {
        for (auto& r : dep.value()) {
          if (!r.is_string()) return NotChecked(k, ptr);
          if (!v.contains(r.get<std::string>())) return false;
        }
      } else {
        MASKD_ASSIGN_OR_RETURN(ok, Accepts(dep.value(), Child(Child(ptr, k), dep.key()), v, depth + 1));
        if (!ok) return false;
      }
    }
  }
  return true;
}

absl::StatusOr<bool> Converter::AcceptsMembers(const json& s, const std::string& ptr,
                                               const json& v, int depth) {
  const json* props = nullptr;
  if (auto p = s.find("properties"); p != s.end()) {
    if (!p->is_object()) return NotChecked("properties", ptr);
    props = &*p;
  }
  const json* pattern_props = nullptr;
  if (auto p = s.find("patternProperties"); p != s.end()) {
    if (!p->is_object()) return NotChecked("patternProperties", ptr);
    pattern_props = &*p;
  }
  auto additional = s.find("additionalProperties");
  auto names = s.find("propertyNames");
  for (auto m = v.begin(); m != v.end(); ++m) {
    const std::string& key = m.key();
    bool evaluated = false;
    if (props) {
      if (auto p = props->find(key); p != props->end()) {
        evaluated = true;
        MASKD_ASSIGN_OR_RETURN(
            bool ok, Accepts(*p, Child(Child(ptr, "properties"), key), m.value(), depth + 1));
        if (!ok) return false;
      }
    }
    if (pattern_props) {
      for (auto p = pattern_props->begin(); p != pattern_props->end(); ++p) {
        std::string pptr = Child(Child(ptr, "patternProperties"), p.key());
        MASKD_ASSIGN_OR_RETURN(bool hit, PatternAccepts(p.key(), pptr, key));
        if (!hit) continue;
        evaluated = true;
        MASKD_ASSIGN_OR_RETURN(bool ok, Accepts(p.value(), pptr, m.value(), depth + 1));
        if (!ok) return false;
      }
    }
    if (!evaluated && additional != s.end()) {
      MASKD_ASSIGN_OR_RETURN(
          bool ok, Accepts(*additional, Child(ptr, "additionalProperties"), m.value(), depth + 1));
      if (!ok) return false;
    }
    if (names != s.end()) {
      MASKD_ASSIGN_OR_RETURN(bool ok,
                             Accepts(*names, Child(ptr, "propertyNames"), json(key), depth + 1));
      if (!ok) return false;
    }
  }
  return true;
}

}  // namespace maskd::json_schema_internal
