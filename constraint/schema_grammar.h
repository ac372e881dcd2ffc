// JsonSchemaGrammar: a JSON Schema as a Grammar, the grammar route's front
// end — JsonSchemaToRules (schema/json_schema.h) lowered by
// GrammarFromRegexRules (grammar/regex_rules.h). ConstraintCompiler uses it for
// a schema on the grammar route (docs/json-schema.md, "Routes").
#ifndef MASKD_CONSTRAINT_SCHEMA_GRAMMAR_H_
#define MASKD_CONSTRAINT_SCHEMA_GRAMMAR_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/grammar.h"
#include "grammar/regex_rules.h"
#include "schema/json_schema.h"

namespace maskd {

// Group nesting the lowering allows in a schema's rules, at least (the
// regex rule parser's recursion; a few KiB of stack per 10 levels).
inline constexpr uint32_t kMaxSchemaRuleNesting = 1024;

// The converter's errors (JsonSchemaToRules) and the lowering's (`limits`,
// whose max_text_bytes is raised to options.max_regex_bytes and max_nesting
// to kMaxSchemaRuleNesting: converted schemas are large and deep by
// construction; `terminal`, the limits the terminals will be compiled under). The schema keywords not enforced go to *warnings
// when it is not null.
absl::StatusOr<grammar::Grammar> JsonSchemaGrammar(const JsonSchemaDocument& schema,
                                                   const JsonSchemaOptions& options,
                                                   const grammar::GrammarLimits& limits,
                                                   const grammar::TerminalLimits& terminal,
                                                   std::vector<std::string>* warnings = nullptr);
// The same for a schema's text: JsonSchemaDocument::Parse's errors besides.
absl::StatusOr<grammar::Grammar> JsonSchemaGrammar(std::string_view schema,
                                                   const JsonSchemaOptions& options,
                                                   const grammar::GrammarLimits& limits,
                                                   const grammar::TerminalLimits& terminal,
                                                   std::vector<std::string>* warnings = nullptr);

}  // namespace maskd

#endif  // MASKD_CONSTRAINT_SCHEMA_GRAMMAR_H_
