// ConstraintFromRequest: the one place a CompileRequest (the wire) becomes a
// Constraint (constraint/constraint.h): its kind and text, every option it
// chooses, and its tokenizer. An option added to CompileOptions is read here
// and nowhere else in the service; the cache keys on the Constraint it
// yields, so the option is part of the index id by construction.
//
// Options that do not apply to the request's kind keep their defaults (a
// regex's schema_route), so that they do not split the cache.
#ifndef MASKD_SERVICE_CONSTRAINT_REQUEST_H_
#define MASKD_SERVICE_CONSTRAINT_REQUEST_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "constraint/constraint.h"
#include "maskd/v1/maskd.pb.h"
#include "service/tokenizer_registry.h"

namespace maskd {

// The sizes a request's text may have, checked before anything is parsed.
struct RequestTextLimits {
  uint64_t max_constraint_bytes = 1 << 20;  // --max-regex-bytes: regex, schema
  uint64_t max_grammar_bytes = 1 << 20;     // --max-grammar-bytes: grammar text
  // --max-structural-tag-bytes: a structural tag's document (a tool list).
  uint64_t max_structural_tag_bytes = uint64_t{16} << 20;
};

// Checks, in this order: the constraint (INVALID_ARGUMENT when none, or for
// an unknown grammar format), its text's size (RESOURCE_EXHAUSTED naming the
// flag), the tokenizer (NOT_FOUND when unknown), the options
// (INVALID_ARGUMENT for an unknown enum value, naming the field and the
// values expected).
absl::StatusOr<Constraint> ConstraintFromRequest(const v1::CompileRequest& req,
                                                 const TokenizerRegistry& tokenizers,
                                                 const RequestTextLimits& limits);

}  // namespace maskd

#endif  // MASKD_SERVICE_CONSTRAINT_REQUEST_H_
