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

}  // namespace maskd::json_schema_internal
