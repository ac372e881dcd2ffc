// Arrays: items, prefixItems/tuple items, additionalItems, min/maxItems,
// contains with min/maxContains.
// See schema/internal/converter.h.
#include "schema/internal/converter.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schema/internal/messages.h"

namespace maskd::json_schema_internal {

// `contains` C with minContains m (default 1) and maxContains M: every
// element matches `items` I, and m..M of them also match C. Elements split
// exactly into P = I and C, and N = I and not C, so the array is
//   (N,)* P ((, N)* , P){m-1,M-1} (, N)*      (plus all-N arrays when m = 0).
// Inside contains the spec holds (no type inference), so P and N partition
// I. Exact with items a schema (or absent) and no minItems above m nor
// maxItems; otherwise an error (unless every element is P, or every one N).
absl::StatusOr<Re> Converter::ConvertContains(const json& s, const std::string& ptr) {
  const std::string cptr = Child(ptr, "contains");
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> min_contains, IntKw(s, "minContains", ptr));
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> hi, IntKw(s, "maxContains", ptr));
  const int64_t lo = min_contains.value_or(1);
  json plain = s;
  plain.erase("contains");
  plain.erase("minContains");
  plain.erase("maxContains");
  if (hi && lo > *hi) return Re();
  if (lo == 0 && !hi) return ConvertArray(plain, ptr);
  if (s.contains("prefixItems") || (s.contains("items") && s["items"].is_array())) {
    return Unsupported("contains", ptr, "beside prefixItems or tuple items");
  }
  const json any_type = json{{"type", TypeList({AllTypes().begin(), AllTypes().end()})}};
  const json item = s.contains("items") ? s["items"] : json(true);
  const json pos_s = json{{"allOf", {item, any_type, s["contains"]}}};
  const json neg_s = json{{"allOf", {item, any_type, json{{"not", s["contains"]}}}}};
  MASKD_ASSIGN_OR_RETURN(Re pos, Convert(pos_s, cptr));
  MASKD_ASSIGN_OR_RETURN(Re neg, Convert(neg_s, cptr));
  if (!pos) {
    if (lo > 0) return Re();
    plain["items"] = neg_s;
    return ConvertArray(plain, ptr);
  }
  if (!neg || (hi && *hi == 0)) {
    if (!neg) {
      plain["items"] = pos_s;
      MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> min_items, IntKw(s, "minItems", ptr));
      plain["minItems"] = std::max(lo, min_items.value_or(0));
      if (hi) {
        MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> max_items, IntKw(s, "maxItems", ptr));
        plain["maxItems"] = std::min(*hi, max_items.value_or(*hi));
      }
    } else {
      plain["items"] = neg_s;
    }
    return ConvertArray(plain, ptr);
  }
  bool unsupported = s.contains("maxItems");
  if (!unsupported) {  // minItems is read only without maxItems
    MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> min_items, IntKw(s, "minItems", ptr));
    unsupported = min_items.value_or(0) > lo;
  }
  if (unsupported) {
    return Unsupported("contains", ptr, "with maxItems, or minItems above minContains");
  }
  if (auto u = s.find("uniqueItems"); u != s.end() && u->is_boolean() && u->get<bool>()) {
    Warn("uniqueItems", ptr, "not enforced");
  }
  const std::string& sep = item_sep_;
  std::optional<int64_t> more;
  if (hi) more = *hi - 1;
  MASKD_ASSIGN_OR_RETURN(std::string more_pos,
                         Repeat(absl::StrCat("(?:(?:", sep, *neg, ")*", sep, *pos, ")"),
                                std::max<int64_t>(lo - 1, 0), more, ptr, "maxContains"));
  std::string some =
      absl::StrCat("(?:", *neg, sep, ")*", *pos, more_pos, "(?:", sep, *neg, ")*");
  std::string empty = Open('[') + Close(']').substr(ws_.size());
  if (lo > 0) return Open('[') + some + Close(']');
  std::string none = absl::StrCat(*neg, "(?:", sep, *neg, ")*");
  return absl::StrCat("(?:", empty, "|", Open('['), "(?:", none, "|", some, ")", Close(']'), ")");
}

absl::StatusOr<Re> Converter::ConvertArray(const json& s, const std::string& ptr) {
  if (s.contains("contains")) return ConvertContains(s, ptr);
  std::vector<Re> prefix;
  Re rest;
  bool rest_set = false;
  auto items = s.find("items");
  auto prefix_items = s.find("prefixItems");
  if (prefix_items != s.end()) {
    if (!prefix_items->is_array()) {
      return Invalid(absl::StrCat("prefixItems at ", Where(ptr), " is not an array"));
    }
    for (size_t i = 0; i < prefix_items->size(); ++i) {
      MASKD_ASSIGN_OR_RETURN(Re r, Convert((*prefix_items)[i], Child(ptr, "prefixItems", i)));
      prefix.push_back(std::move(r));
    }
    if (items != s.end()) {
      MASKD_ASSIGN_OR_RETURN(rest, Convert(*items, Child(ptr, "items")));
      rest_set = true;
    }
  } else if (items != s.end() && items->is_array()) {
    for (size_t i = 0; i < items->size(); ++i) {
      MASKD_ASSIGN_OR_RETURN(Re r, Convert((*items)[i], Child(ptr, "items", i)));
      prefix.push_back(std::move(r));
    }
    if (auto ai = s.find("additionalItems"); ai != s.end()) {
      MASKD_ASSIGN_OR_RETURN(rest, Convert(*ai, Child(ptr, "additionalItems")));
      rest_set = true;
    }
  } else if (items != s.end()) {
    MASKD_ASSIGN_OR_RETURN(rest, Convert(*items, Child(ptr, "items")));
    rest_set = true;
  }
  if (!rest_set) rest = AnyValue(o_.any_value_depth);
  if (auto u = s.find("uniqueItems"); u != s.end() && u->is_boolean() && u->get<bool>()) {
    Warn("uniqueItems", ptr, "not enforced");
  }
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> min_items, IntKw(s, "minItems", ptr));
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> max, IntKw(s, "maxItems", ptr));
  const int64_t min = min_items.value_or(0);
  if (max && *max > o_.max_counted_repeat) {
    Warn("maxItems", ptr, absl::StrCat("bound ", *max, " above max_counted_repeat: not enforced"));
    max.reset();
  }
  if (min > o_.max_counted_repeat) {
    return Invalid(absl::StrCat("minItems ", min, " at ", Where(ptr), " above max_counted_repeat"));
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
  if (max && min > *max) return Re();
  if (max && *max == 0) return Open('[') + Close(']').substr(ws_.size());

  // tail(i): elements i.. each preceded by a separator, i >= 1 present so far.
  auto elem = [&](int64_t i) -> const std::string& { return i < k ? *prefix[i] : *rest; };
  std::function<absl::StatusOr<std::string>(int64_t)> tail =
      [&](int64_t i) -> absl::StatusOr<std::string> {
    if (max && i >= *max) return std::string();
    if (i >= k) {
      int64_t a = std::max<int64_t>(0, min - i);
      std::optional<int64_t> b;
      if (max) b = *max - i;
      return Repeat("(?:" + item_sep_ + *rest + ")", a, b, ptr, "maxItems");
    }
    MASKD_ASSIGN_OR_RETURN(std::string after, tail(i + 1));
    std::string one = item_sep_ + elem(i) + after;
    if (i >= min) return "(?:" + one + ")?";
    return one;
  };
  MASKD_ASSIGN_OR_RETURN(std::string after_first, tail(1));
  std::string body = elem(0) + after_first;
  std::string empty = Open('[') + Close(']').substr(ws_.size());
  if (min == 0) return absl::StrCat("(?:", empty, "|", Open('['), body, Close(']'), ")");
  return Open('[') + body + Close(']');
}

}  // namespace maskd::json_schema_internal
