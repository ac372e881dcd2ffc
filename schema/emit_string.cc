// Strings: length bounds, `pattern` (through json_schema_pattern.cc), `format`
// (formats.cc), and strings excluded by a negated enum/const.
// See schema/internal/converter.h.
#include "schema/internal/converter.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schema/internal/messages.h"

namespace maskd::json_schema_internal {

absl::StatusOr<Re> Converter::ConvertString(const json& s, const std::string& ptr) {
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> min_len, IntKw(s, "minLength", ptr));
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> max_len, IntKw(s, "maxLength", ptr));
  if (min_len && max_len && *min_len > *max_len) return Re();
  if (auto ns = s.find(kNotStrings); ns != s.end()) return ConvertExcludedStrings(s, *ns, ptr);
  std::string content;
  bool has_pattern = false;
  if (auto p = s.find("pattern"); p != s.end()) {
    if (!p->is_string()) return Invalid(absl::StrCat("pattern at ", Where(ptr), " is not a string"));
    bool length_applied = false;
    if ((min_len && *min_len > 0) || max_len) {
      auto r = PatternToJsonStringRegex(p->get<std::string>(), false, nullptr,
                                        {min_len.value_or(0), max_len.value_or(-1)},
                                        &length_applied, o_.max_pattern_nesting);
      if (r.ok() && length_applied) {
        return "\"" + *r + "\"";
      }
    }
    MASKD_ASSIGN_OR_RETURN(content, PatternRegex(p->get<std::string>(), ptr, "pattern"));
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
  MASKD_ASSIGN_OR_RETURN(std::string chars, Repeat(JsonCharRegex(), min_len.value_or(0), max_len,
                                                   ptr, "maxLength"));
  return "\"" + chars + "\"";
}

// Strings of `s` that are none of `excluded` (from a negated enum/const).
// Exact when `s` has no other string keyword, or when no excluded string
// satisfies them (the exclusion is then void); otherwise the exclusion is
// not enforced (warning): a regex cannot subtract from a pattern here.
absl::StatusOr<Re> Converter::ConvertExcludedStrings(const json& s, const json& excluded,
                                                     const std::string& ptr) {
  json rest = s;
  rest.erase(kNotStrings);
  MASKD_ASSIGN_OR_RETURN(Re base, ConvertString(rest, ptr));
  if (!base) return base;
  std::vector<std::string> words;
  for (auto& w : excluded)
    if (w.is_string()) words.push_back(w.get<std::string>());
  if (words.empty()) return base;
  if (!HasValidation(rest, {"type", "nullable", "enum", "const", "not"})) {
    return "\"" + ExcludedStringsRegex(words) + "\"";
  }
  MASKD_ASSIGN_OR_RETURN(std::shared_ptr<const Dfa> dfa, BudgetedDfa(*base, o_.budget.max_states));
  bool void_exclusion = dfa != nullptr;
  for (size_t i = 0; void_exclusion && i < words.size(); ++i) {
    if (dfa->Matches(PythonJsonString(words[i], o_.ensure_ascii))) void_exclusion = false;
  }
  if (!void_exclusion) {
    Warn("not", ptr, "excluded strings not enforced together with pattern/format/length");
  }
  return base;
}

// A pattern's regex over JSON string content. An unanchored pattern
// (search semantics) whose automaton would be large is anchored instead,
// with a warning: ".*p.*" can need exponentially many DFA states.
absl::StatusOr<std::string> Converter::PatternRegex(const std::string& pattern,
                                                    const std::string& ptr, const char* keyword) {
  auto cached = pattern_cache_.find(pattern);
  if (cached == pattern_cache_.end()) {
    bool was_anchored = false;
    auto r = PatternToJsonStringRegex(pattern, false, &was_anchored, {0, -1}, nullptr,
                                      o_.max_pattern_nesting);
    if (!r.ok()) return Unsupported(keyword, ptr, std::string(r.status().message()));
    PatternInfo info{*r, false};
    if (!was_anchored) {
      MASKD_ASSIGN_OR_RETURN(std::shared_ptr<const Dfa> dfa,
                             BudgetedDfa(*r, kMaxUnanchoredPatternStates));
      if (dfa == nullptr) {
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

}  // namespace maskd::json_schema_internal
