// The JSON Schema options a fuzz input's first byte picks (json_schema_fuzzer),
// shared with tests/schema/schema_golden so its fingerprints cover the same
// option sets the fuzzer explores. Small limits: fuzz inputs are small.
#ifndef MASKD_FUZZ_JSON_SCHEMA_KNOBS_H_
#define MASKD_FUZZ_JSON_SCHEMA_KNOBS_H_

#include <cstdint>

#include "schema/json_schema.h"

namespace maskd::fuzz {

// Bits: 0-1 layout (mod 3), 2-3 recursion depth, 4 any-value depth 1 or 2,
// 5 objects open by default, 6 ensure_ascii, 7 type inference.
inline JsonSchemaOptions JsonSchemaKnobs(uint8_t knobs) {
  JsonSchemaOptions o;
  o.whitespace = knobs % 3 == 0   ? JsonWhitespace::kPython
                 : knobs % 3 == 1 ? JsonWhitespace::kCompact
                                  : JsonWhitespace::kFlexible;
  o.max_recursion_depth = (knobs >> 2) & 3;
  o.any_value_depth = 1 + ((knobs >> 4) & 1);
  o.additional_properties_default_open = (knobs >> 5) & 1;
  o.ensure_ascii = (knobs >> 6) & 1;
  o.infer_type_from_keywords = (knobs >> 7) & 1;
  o.max_counted_repeat = 16;
  o.max_schema_bytes = 1 << 16;
  o.max_regex_bytes = 1 << 18;
  return o;
}

}  // namespace maskd::fuzz

#endif  // MASKD_FUZZ_JSON_SCHEMA_KNOBS_H_
