// Any JSON value on the regex route: arrays and objects nested to a depth.
// See schema/internal/converter.h.
#include "schema/internal/converter.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace maskd::json_schema_internal {

std::string Converter::StringAny() const { return "\"" + JsonCharRegex() + "*\""; }

const std::string& Converter::AnyValue(int depth) {
  if (rules_mode_) return AnyValueRule();
  return AnyValueRegex(depth);
}

// Any JSON value, arrays and objects nested at most `depth` deep.
const std::string& Converter::AnyValueRegex(int depth) const {
  if (depth < 0) depth = 0;
  auto it = any_cache_.find(depth);
  if (it != any_cache_.end()) return it->second;
  const std::string r = depth == 0 ? "(?:" + AnyScalar() + ")"
                                   : "(?:" + AnyValueAround(AnyValueRegex(depth - 1)) + ")";
  return any_cache_[depth] = r;
}

std::string Converter::AnyScalar() const {
  return absl::StrCat("null|true|false|", *NumberRangeRegex({}, false, {}, false), "|", StringAny());
}

std::string Converter::AnyValueAround(const std::string& v) const {
  const std::string arr = absl::StrCat(Open('['), "(?:", v, "(?:", item_sep_, v, ")*)?", Close(']'));
  const std::string kv = absl::StrCat(StringAny(), key_sep_, v);
  const std::string obj =
      absl::StrCat(Open('{'), "(?:", kv, "(?:", item_sep_, kv, ")*)?", Close('}'));
  return absl::StrCat(AnyScalar(), "|", arr, "|", obj);
}

}  // namespace maskd::json_schema_internal
