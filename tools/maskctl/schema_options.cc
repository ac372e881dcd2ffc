#include "tools/maskctl/schema_options.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace maskctl {

const std::set<std::string>& SchemaValueFlags() {
  static const auto* flags =
      new std::set<std::string>{"whitespace", "recursion-depth", "any-depth", "max-regex-bytes"};
  return *flags;
}

const std::set<std::string>& SchemaBoolFlags() {
  static const auto* flags = new std::set<std::string>{"closed-objects", "raw-unicode",
                                                       "any-property-order"};
  return *flags;
}

absl::Status ParseWhitespace(const std::string& name, maskd::JsonWhitespace* out) {
  if (name == "python") *out = maskd::JsonWhitespace::kPython;
  else if (name == "compact") *out = maskd::JsonWhitespace::kCompact;
  else if (name == "flexible") *out = maskd::JsonWhitespace::kFlexible;
  else return absl::InvalidArgumentError(absl::StrCat("--whitespace: unknown value ", name));
  return absl::OkStatus();
}

absl::Status ParseSchemaOptions(const Args& args, maskd::JsonSchemaOptions* o) {
  if (auto ws = args.Get("whitespace")) {
    if (absl::Status s = ParseWhitespace(*ws, &o->whitespace); !s.ok()) return s;
  }
  auto depth = args.GetUint("recursion-depth", o->max_recursion_depth);
  if (!depth.ok()) return depth.status();
  o->max_recursion_depth = static_cast<int>(std::min<uint64_t>(*depth, 64));
  auto any = args.GetUint("any-depth", o->any_value_depth);
  if (!any.ok()) return any.status();
  o->any_value_depth = static_cast<int>(std::min<uint64_t>(*any, 8));
  auto regex_bytes = args.GetUint("max-regex-bytes", o->max_regex_bytes);
  if (!regex_bytes.ok()) return regex_bytes.status();
  if (*regex_bytes == 0) return absl::InvalidArgumentError("--max-regex-bytes: must be positive");
  o->max_regex_bytes = static_cast<size_t>(*regex_bytes);
  if (args.Has("closed-objects")) o->additional_properties_default_open = false;
  if (args.Has("raw-unicode")) o->ensure_ascii = false;
  if (args.Has("any-property-order")) o->any_property_order = true;
  return absl::OkStatus();
}

}  // namespace maskctl
