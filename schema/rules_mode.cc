// Rules mode (JsonSchemaToRules): $ref targets, the any value and large
// subschemas as rules referenced by `(?&k)`, and their expansion back into one
// regex for the converter's own automata.
// See schema/internal/converter.h.
#include "schema/internal/converter.h"

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "schema/internal/json_access.h"
#include "schema/internal/messages.h"

namespace maskd::json_schema_internal {

std::string Converter::RuleRef(size_t k) { return absl::StrCat("(?&", k, ")"); }

// The rule for the $ref target at `tptr`, converted once: references from
// inside its own conversion (recursion) name it before it is complete.
absl::StatusOr<Re> Converter::RefRule(const json& target, const std::string& tptr) {
  auto [it, inserted] = rule_of_ptr_.emplace(tptr, rules_.size());
  const size_t k = it->second;
  if (inserted) {
    rules_.push_back({Where(tptr), kNoString});
    in_progress_.insert(k);
    absl::StatusOr<Re> r = Convert(target, tptr);
    if (!r.ok()) {
      // A caller may go on after the error (ConvertEnum): the rule stays
      // matching nothing (and in progress, so no expansion reads it), and
      // the pointer is converted again next time.
      rule_of_ptr_.erase(tptr);
      return r.status();
    }
    in_progress_.erase(k);
    if (!*r) {
      empty_rules_.insert(k);
      return Re();
    }
    rules_[k].regex = **std::move(r);
  }
  if (empty_rules_.count(k)) return Re();
  return Re(RuleRef(k));
}

// Rules mode: `regex` with every (?&k) replaced by rule k's text, so that
// the converter's own automata (enum values against sibling keywords,
// excluded strings) see the language the regex route would; the any-value
// rule becomes the regex route's any value (nested any_value_depth deep).
// FailedPrecondition for a rule still being converted (recursion): the
// caller falls back as when a DFA is over its cap.
absl::StatusOr<std::string> Converter::ExpandRules(const std::string& regex, int depth) const {
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
      MASKD_ASSIGN_OR_RETURN(const size_t k, ParseIndex(regex.substr(i + 3, close - i - 3)));
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
Re Converter::SplitLarge(Re r, const std::string& ptr) {
  if (!rules_mode_ || !r || r->size() <= kRuleSplitBytes) return r;
  auto [it, inserted] = rule_of_text_.emplace(*r, rules_.size());
  if (inserted) rules_.push_back({Where(ptr), *r});
  return RuleRef(it->second);
}

// Rules mode: any JSON value, nested without a bound (one recursive rule).
const std::string& Converter::AnyValueRule() {
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

}  // namespace maskd::json_schema_internal
