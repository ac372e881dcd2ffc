// CompileConstraint: the one way a constraint becomes a ConstraintIndex.
//
// A Constraint is a regex (automaton/regex.h), a JSON Schema document
// (schema/json_schema.h, converted to a regex first), a context-free grammar
// in Lark, GBNF or XGrammar EBNF (grammar/, docs/grammars.md), or a
// structural tag (constraint/structural_tag.h: free text with tagged,
// schema-constrained segments, compiled as a grammar). Regexes and
// schemas end in the same Regex::Parse -> Dfa::Compile -> TokenIndex::Create
// (+ Precompute when eager) as CompileRegex, so a schema and the regex it
// converts to give the same index (route kRegex). A grammar is parsed by its
// front end and compiled into a GrammarIndex (route kGrammar); `eager` has no
// effect on it (its masks are computed per parser state, at each step).
//
// Budget: CompileOptions bounds every stage, the conversion included.
//  - Time: options.dfa.deadline and options.dfa.cancel are checked before
//    each stage, inside the schema conversion (at each subschema and inside
//    its own DFA builds), inside every DFA build (a grammar's terminals
//    included) and inside the eager precompute; past the deadline the result
//    is DeadlineExceeded, with the flag set Cancelled.
//  - Size, in the order applied: a schema's bytes
//    (JsonSchemaOptions::max_schema_bytes), the converted regex's bytes
//    (JsonSchemaOptions::max_regex_bytes); a regex's bytes
//    (options.regex.max_pattern_bytes, which a converted regex may exceed up
//    to max_regex_bytes), its nodes and repeats (RegexLimits), the DFA's and
//    NFA's states (options.dfa, which also cap the converter's own DFAs); a
//    grammar's text, rules, terminals, symbols, nesting and repeats
//    (GrammarLimits), each terminal's regex (options.regex) and DFA
//    (options.dfa). Each is ResourceExhausted naming the limit.
// Other errors are InvalidArgument naming the problem (bad regex syntax, a
// schema keyword that cannot be enforced, a grammar error with its line and
// column, a constraint matching no text).
// Thread-safe: concurrent calls share only the tokenizer context (whose
// loop-mask memo is thread-safe).
#ifndef MASKD_CONSTRAINT_COMPILE_H_
#define MASKD_CONSTRAINT_COMPILE_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "constraint/constraint_index.h"
#include "constraint/structural_tag.h"
#include "grammar/grammar.h"
#include "grammar/grammar_index.h"
#include "grammar/grammar_text.h"
#include "index/token_index.h"
#include "index/tokenizer_context.h"
#include "schema/json_schema.h"

namespace maskd {

enum class ConstraintKind { kRegex, kJsonSchema, kGrammar, kStructuralTag };
// "regex", "json_schema", "grammar", "structural_tag".
std::string_view ConstraintKindName(ConstraintKind kind);

using grammar::GrammarFormat;
using grammar::GrammarFormatName;

// How a grammar is read and run (kGrammar only).
struct GrammarCompileOptions {
  GrammarFormat format = GrammarFormat::kLark;
  grammar::GrammarLimits limits;
  // Its earley.regex_limits and earley.dfa_options are replaced by
  // CompileOptions' regex and dfa.
  grammar::GrammarIndex::Options index;
};

// The engine a JSON Schema compiles on.
enum class SchemaRoute {
  // The regex route when the schema fits it (its masks are the fastest): no
  // recursive $ref cut short, within every regex, DFA and converter limit.
  // Otherwise the grammar route; when that fails too, its error (with the
  // regex route's, when they differ), except that a schema whose recursion
  // the regex route cut and the grammar route cannot compile takes the
  // regex route after all.
  kAuto,
  // JsonSchemaToRegex: recursion unrolled to max_recursion_depth, any value
  // nested to any_value_depth.
  kRegex,
  // JsonSchemaToRules (schema/json_schema.h): recursion and any-value
  // nesting exact; masks from the grammar engine.
  kGrammar,
};
// "auto", "regex", "grammar".
std::string_view SchemaRouteName(SchemaRoute route);

struct Constraint {
  ConstraintKind kind = ConstraintKind::kRegex;
  // The regex pattern, the JSON Schema document's text, the grammar's, or
  // the structural tag's JSON document.
  std::string text;
  // kJsonSchema, and the schemas of a kStructuralTag. Its budget's deadline
  // and cancel flag are replaced by CompileOptions::dfa's, its state caps
  // lowered to CompileOptions::dfa's.
  JsonSchemaOptions json_schema;
  // kJsonSchema only. The route taken is the index's route().
  SchemaRoute schema_route = SchemaRoute::kAuto;
  // kGrammar and kStructuralTag (whose format is ignored), and a JSON
  // Schema on the grammar route (its limits and index options).
  GrammarCompileOptions grammar;
  // kStructuralTag only (its json_schema is the field above).
  StructuralTagOptions structural_tag;

  static Constraint Regex(std::string pattern) {
    Constraint c;
    c.text = std::move(pattern);
    return c;
  }
  static Constraint JsonSchema(std::string schema, JsonSchemaOptions options = {}) {
    Constraint c;
    c.kind = ConstraintKind::kJsonSchema;
    c.text = std::move(schema);
    c.json_schema = std::move(options);
    return c;
  }
  static Constraint StructuralTag(std::string json) {
    Constraint c;
    c.kind = ConstraintKind::kStructuralTag;
    c.text = std::move(json);
    return c;
  }
  static Constraint Grammar(std::string text, GrammarFormat format,
                            GrammarCompileOptions options = {}) {
    Constraint c;
    c.kind = ConstraintKind::kGrammar;
    c.text = std::move(text);
    c.grammar = std::move(options);
    c.grammar.format = format;
    return c;
  }
};

struct CompiledConstraint {
  std::shared_ptr<const ConstraintIndex> index;  // never null
  // The schema keywords not enforced (JsonSchemaRegex::warnings); empty for
  // a regex or a grammar.
  std::vector<std::string> warnings;
};

absl::StatusOr<CompiledConstraint> CompileConstraint(const Constraint& constraint,
                                                     std::shared_ptr<const TokenizerContext> context,
                                                     const CompileOptions& options = {});

// Where a CompileConstraint error arose: kConvert for the JSON Schema
// conversion (the schema is not expressible, or over a converter limit, or
// its budget ran out while converting) and for a grammar's front end (syntax
// errors, GrammarLimits), kIndex for every other stage.
enum class CompileStage { kConvert, kIndex };
CompileStage FailedStage(const absl::Status& error);

}  // namespace maskd

#endif  // MASKD_CONSTRAINT_COMPILE_H_
