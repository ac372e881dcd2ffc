// CompileConstraint: the one way a constraint becomes a TokenIndex.
//
// A Constraint is a regex (index/regex.h) or a JSON Schema document
// (index/json_schema.h, converted to a regex first). Both routes end in the
// same Regex::Parse -> Dfa::Compile -> TokenIndex::Create (+ Precompute when
// eager) as CompileRegex, so a schema and the regex it converts to give the
// same index.
//
// Budget: CompileOptions bounds every stage, the conversion included.
//  - Time: options.dfa.deadline and options.dfa.cancel are checked before
//    each stage, inside the schema conversion (at each subschema and inside
//    its own DFA builds) and inside the DFA build and eager precompute; past
//    the deadline the result is DeadlineExceeded, with the flag set Cancelled.
//  - Size, in the order applied: a schema's bytes
//    (JsonSchemaOptions::max_schema_bytes), the converted regex's bytes
//    (JsonSchemaOptions::max_regex_bytes); a regex's bytes
//    (options.regex.max_pattern_bytes, which a converted regex may exceed up
//    to max_regex_bytes), its nodes and repeats (RegexLimits), the DFA's and
//    NFA's states (options.dfa, which also cap the converter's own DFAs).
//    Each is ResourceExhausted naming the limit.
// Other errors are InvalidArgument naming the problem (bad regex syntax, a
// schema keyword that cannot be enforced, a constraint matching no text).
// Thread-safe: concurrent calls share only the vocabulary.
#ifndef MASKD_INDEX_COMPILE_H_
#define MASKD_INDEX_COMPILE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "index/json_schema.h"
#include "index/token_index.h"
#include "index/vocabulary.h"

namespace maskd {

enum class ConstraintKind { kRegex, kJsonSchema };

struct Constraint {
  ConstraintKind kind = ConstraintKind::kRegex;
  // The regex pattern, or the JSON Schema document's text.
  std::string text;
  // kJsonSchema only. Its budget's deadline and cancel flag are replaced by
  // CompileOptions::dfa's, its state caps lowered to CompileOptions::dfa's.
  JsonSchemaOptions json_schema;

  static Constraint Regex(std::string pattern) {
    return {ConstraintKind::kRegex, std::move(pattern), {}};
  }
  static Constraint JsonSchema(std::string schema, JsonSchemaOptions options = {}) {
    return {ConstraintKind::kJsonSchema, std::move(schema), std::move(options)};
  }
};

struct CompiledConstraint {
  std::shared_ptr<const TokenIndex> index;  // never null
  // The schema keywords not enforced (JsonSchemaRegex::warnings); empty for
  // a regex.
  std::vector<std::string> warnings;
};

absl::StatusOr<CompiledConstraint> CompileConstraint(const Constraint& constraint,
                                                     std::shared_ptr<const Vocabulary> vocab,
                                                     const CompileOptions& options = {});

// Where a CompileConstraint error arose: kConvert for the JSON Schema
// conversion (the schema is not expressible, or over a converter limit, or
// its budget ran out while converting), kIndex for every other stage.
enum class CompileStage { kConvert, kIndex };
CompileStage FailedStage(const absl::Status& error);

}  // namespace maskd

#endif  // MASKD_INDEX_COMPILE_H_
