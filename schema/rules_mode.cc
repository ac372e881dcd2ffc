// Rules mode (JsonSchemaToRules): $ref targets, the any value and large
// subschemas as rules referenced by `(?&k)`, and their expansion back into one
// regex for the converter's own automata.
// See schema/internal/converter.h.
#include "schema/internal/converter.h"

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "automaton/regex_scan.h"
#include "schema/internal/json_access.h"
#include "schema/internal/messages.h"

namespace maskd::json_schema_internal {

std::string Converter::RuleRef(size_t k) { return absl::StrCat("(?&", k, ")"); }

// The rule `key` names in `rules_by_key`, made by `convert` the first time
// (named for `ptr`): references from inside its own conversion (recursion)
// name it before it is complete.
absl::StatusOr<Re> Converter::KeyedRule(std::map<std::string, size_t>& rules_by_key,
                                        const std::string& key, const std::string& ptr,
                                        absl::FunctionRef<absl::StatusOr<Re>()> convert) {
  auto [it, inserted] = rules_by_key.emplace(key, rules_.size());
  const size_t k = it->second;
  if (inserted) {
    rules_.push_back({Where(ptr), kNoString});
    in_progress_.insert(k);
    absl::StatusOr<Re> r = convert();
    if (!r.ok()) {
      // A caller may go on after the error (ConvertEnum): the rule stays
      // matching nothing (and in progress, so no expansion reads it), and
      // the key is converted again next time.
      rules_by_key.erase(key);
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

absl::StatusOr<Re> Converter::RefRule(const json& target, const std::string& tptr) {
  return KeyedRule(rule_of_ptr_, tptr, tptr, [&] { return Convert(target, tptr); });
}

// A merge can recurse only through a $ref that MergeInto inlines: its own
// or an allOf branch's. Only those merges are keyed.
namespace {
bool InlinesRef(const json& s) {
  if (s.contains("$ref")) return true;
  auto all = s.find("allOf");
  if (all == s.end() || !all->is_array()) return false;
  for (const json& b : *all)
    if (b.is_object() && InlinesRef(b)) return true;
  return false;
}
}  // namespace

absl::StatusOr<Re> Converter::ConvertMerged(
    std::initializer_list<std::pair<const json*, const std::string*>> parts,
    const std::string& ptr) {
  auto merged = [&]() -> absl::StatusOr<Re> {
    json acc = json::object();
    for (const auto& [p, pptr] : parts) MASKD_RETURN_IF_ERROR(MergeInto(acc, *p, *pptr, 0));
    return Convert(acc, ptr);
  };
  bool keyed = false;
  for (const auto& [p, pptr] : parts) keyed = keyed || (p->is_object() && InlinesRef(*p));
  if (!rules_mode_ || !keyed) return merged();
  // Annotations (title, description, default, ...) do not change the
  // language: left out of the key, so that {"$ref": "#", "description": ...}
  // written in many places is one rule.
  std::string key;
  for (const auto& [p, pptr] : parts) {
    json validation = json::object();
    if (p->is_object()) {
      for (auto it = p->begin(); it != p->end(); ++it)
        if (IsValidationKeyword(it.key())) validation[it.key()] = it.value();
    } else {
      validation = *p;
    }
    absl::StrAppend(&key, validation.dump(), "\n");
  }
  return KeyedRule(rule_of_merge_, key, ptr, merged);
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
    if (c == '\\' || c == '[') {
      i = RegexEscapeOrClassEnd(regex, i);  // npos (past the end) when unterminated
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
  rules_[k].regex = AnyValueAround(any_rule_);
  return any_rule_;
}

// One rule per set S of declared members already written (2^n rules, n <=
// kMaxAnyOrderProperties): Rest(S) := "" when S holds every required member
// | sep kv_p Rest(S + p) for each p not in S | sep extra Rest(S). Each member
// appears at most once, every required one exactly once, in any order.
std::optional<std::string> Converter::AnyOrderObject(const std::vector<std::string>& kvs,
                                                     const std::vector<bool>& required,
                                                     const Re& extra, const std::string& ptr) {
  const size_t n = kvs.size();
  if (n > kMaxAnyOrderProperties) return std::nullopt;
  // Members as rules, so each Rest(S) stays a few references long.
  std::vector<std::string> kv(n);
  for (size_t p = 0; p < n; ++p) {
    kv[p] = RuleRef(rules_.size());
    rules_.push_back({absl::StrCat(Where(ptr), " member ", p), kvs[p]});
  }
  std::string other;
  if (extra) {
    other = RuleRef(rules_.size());
    rules_.push_back({absl::StrCat(Where(ptr), " other members"), *extra});
  }
  uint32_t required_set = 0;
  for (size_t p = 0; p < n; ++p) required_set |= required[p] ? 1u << p : 0;
  const size_t base = rules_.size();
  const uint32_t sets = 1u << n;
  for (uint32_t set = 0; set < sets; ++set) {
    rules_.push_back({absl::StrCat(Where(ptr), " members ", set), ""});
  }
  for (uint32_t set = 0; set < sets; ++set) {
    std::vector<std::string> alts;
    if ((set & required_set) == required_set) alts.push_back("");
    for (size_t p = 0; p < n; ++p) {
      if (set & (1u << p)) continue;
      alts.push_back(absl::StrCat(item_sep_, kv[p], RuleRef(base + (set | (1u << p)))));
    }
    if (extra) alts.push_back(absl::StrCat(item_sep_, other, RuleRef(base + set)));
    rules_[base + set].regex = alts.empty() ? kNoString : absl::StrCat("(?:", absl::StrJoin(alts, "|"), ")");
  }
  // The first member has no separator before it.
  std::vector<std::string> first;
  for (size_t p = 0; p < n; ++p) first.push_back(kv[p] + RuleRef(base + (1u << p)));
  if (extra) first.push_back(other + RuleRef(base));
  const std::string empty = Open('{') + Close('}').substr(ws_.size());
  std::string out;
  if (required_set == 0) out = empty;
  if (!first.empty()) {
    const std::string full = absl::StrCat(Open('{'), "(?:", absl::StrJoin(first, "|"), ")", Close('}'));
    out = out.empty() ? full : absl::StrCat("(?:", out, "|", full, ")");
  }
  return out.empty() ? std::string(kNoString) : out;
}

}  // namespace maskd::json_schema_internal
