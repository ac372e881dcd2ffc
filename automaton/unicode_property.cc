#include "automaton/unicode_property.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "automaton/unicode_tables.h"

namespace maskd::unicode {
namespace {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

std::string LooseKey(std::string_view name) {
  std::string key;
  for (char c : name) {
    if (c == ' ' || c == '_' || c == '-' || c == '\t') continue;
    key.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
  }
  return key;
}

const PropertyValue* Find(const PropertyValue* table, size_t size, const std::string& key) {
  const PropertyValue* end = table + size;
  const PropertyValue* it =
      std::lower_bound(table, end, key, [](const PropertyValue& v, const std::string& k) {
        return std::strcmp(v.key, k.c_str()) < 0;
      });
  return it != end && key == it->key ? it : nullptr;
}

CodepointRanges RangesOf(const PropertyValue& v) {
  CodepointRanges out;
  out.reserve(v.size);
  for (uint32_t i = v.begin; i < v.begin + v.size; ++i)
    out.emplace_back(kRanges[i].lo, kRanges[i].hi);
  return out;
}

// Every scalar value not in `in` (sorted, disjoint).
CodepointRanges ScalarComplement(const CodepointRanges& in) {
  CodepointRanges out;
  uint32_t next = 0;
  auto emit = [&](uint32_t lo, uint32_t hi) {
    if (lo < 0xD800) out.emplace_back(lo, std::min<uint32_t>(hi, 0xD7FF));
    if (hi > 0xDFFF) out.emplace_back(std::max<uint32_t>(lo, 0xE000), hi);
  };
  for (const auto& [lo, hi] : in) {
    if (lo > next) emit(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodepoint) emit(next, kMaxCodepoint);
  return out;
}

absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status Unknown(std::string_view what, std::string_view name) {
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ", AbslView(what), " '", AbslView(name), "'"));
}

}  // namespace

std::string_view UcdVersion() { return kUcdVersion; }

absl::StatusOr<CodepointRanges> PropertyRanges(std::string_view expr, bool* negated) {
  *negated = false;
  if (!expr.empty() && expr[0] == '^') {
    *negated = true;
    expr.remove_prefix(1);
  }
  size_t eq = expr.find('=');
  if (eq != std::string_view::npos) {
    std::string_view prop = expr.substr(0, eq), value = expr.substr(eq + 1);
    std::string prop_key = LooseKey(prop), value_key = LooseKey(value);
    if (prop_key == "gc" || prop_key == "generalcategory") {
      const PropertyValue* v = Find(kGeneralCategory, kGeneralCategorySize, value_key);
      if (v == nullptr) return Unknown("General_Category value", value);
      return RangesOf(*v);
    }
    if (prop_key == "sc" || prop_key == "script") {
      const PropertyValue* v = Find(kScript, kScriptSize, value_key);
      if (v == nullptr) return Unknown("Script value", value);
      return RangesOf(*v);
    }
    if (prop_key == "scx" || prop_key == "scriptextensions") {
      return absl::InvalidArgumentError("Unicode property Script_Extensions is not supported");
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unknown Unicode property '", AbslView(prop),
                     "' (General_Category, gc, Script and sc are supported)"));
  }
  std::string key = LooseKey(expr);
  if (const PropertyValue* v = Find(kGeneralCategory, kGeneralCategorySize, key))
    return RangesOf(*v);
  if (const PropertyValue* v = Find(kScript, kScriptSize, key)) return RangesOf(*v);
  if (key == "any") return ScalarComplement({});
  if (key == "ascii") return CodepointRanges{{0, 0x7F}};
  if (key == "assigned") {
    return ScalarComplement(RangesOf(*Find(kGeneralCategory, kGeneralCategorySize, "cn")));
  }
  return Unknown("Unicode property", expr);
}

void AppendCaseVariants(absl::Span<const std::pair<uint32_t, uint32_t>> ranges,
                        CodepointRanges* out) {
  const OrbitLink* begin = kCaseOrbit;
  const OrbitLink* end = kCaseOrbit + kCaseOrbitSize;
  auto find = [&](uint32_t cp) {
    return std::lower_bound(begin, end, cp,
                            [](const OrbitLink& l, uint32_t c) { return l.cp < c; });
  };
  for (const auto& [lo, hi] : ranges) {
    for (const OrbitLink* it = find(lo); it != end && it->cp <= hi; ++it) {
      // Walk the cycle from it->cp back to itself.
      for (uint32_t m = it->next; m != it->cp; m = find(m)->next) out->emplace_back(m, m);
    }
  }
}

}  // namespace maskd::unicode
