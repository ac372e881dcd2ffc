// The JSON Schema converter flags shared by maskctl's schema commands
// (schema-to-regex, maskbench):
//   --whitespace python|compact|flexible   JsonSchemaOptions::whitespace
//   --recursion-depth N                    max_recursion_depth (at most 64)
//   --any-depth N                          any_value_depth (at most 8)
//   --max-regex-bytes N                    max_regex_bytes (the regex parser's
//                                          max_pattern_bytes follows it)
//   --closed-objects                       additional_properties_default_open = false
//   --raw-unicode                          ensure_ascii = false
//   --any-property-order                   any_property_order = true
#ifndef MASKD_TOOLS_MASKCTL_SCHEMA_OPTIONS_H_
#define MASKD_TOOLS_MASKCTL_SCHEMA_OPTIONS_H_

#include <set>
#include <string>

#include "absl/status/status.h"
#include "schema/json_schema.h"
#include "tools/maskctl/args.h"

// The flags above as the usage lines spell them.
#define MASKCTL_SCHEMA_OPTIONS_USAGE                                                         \
  "[--whitespace python|compact|flexible] [--recursion-depth N] [--any-depth N] "            \
  "[--max-regex-bytes N] [--closed-objects] [--raw-unicode] [--any-property-order]"

namespace maskctl {

// The flags ParseSchemaOptions reads; add them to Args::Parse's sets.
const std::set<std::string>& SchemaValueFlags();
const std::set<std::string>& SchemaBoolFlags();

// --whitespace's value into `*out`; InvalidArgument naming an unknown one.
absl::Status ParseWhitespace(const std::string& name, maskd::JsonWhitespace* out);

// Applies the flags present to `*options`; InvalidArgument naming a bad flag.
absl::Status ParseSchemaOptions(const Args& args, maskd::JsonSchemaOptions* options);

}  // namespace maskctl

#endif  // MASKD_TOOLS_MASKCTL_SCHEMA_OPTIONS_H_
