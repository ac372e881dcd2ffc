// ConstraintVariants: one change per field of a Constraint (ConstraintOptions
// and JsonSchemaOptions field by field), for the cache-key tests
// (constraint_key_test.cc, and through the IndexCache in
// tests/service/constraint_request_test.cc).
#ifndef MASKD_TESTS_CONSTRAINT_CONSTRAINT_VARIANTS_H_
#define MASKD_TESTS_CONSTRAINT_CONSTRAINT_VARIANTS_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "constraint/constraint.h"
#include "constraint/field_count.h"

namespace maskd::testing {

// A field and a change of it: `prepare` (may be null) makes the field matter
// (whitespace_pattern counts only with kFlexible whitespace), `change` then
// changes that field alone.
struct ConstraintVariant {
  std::string field;
  std::function<void(Constraint&)> prepare;
  std::function<void(Constraint&)> change;
};

// The base every variant changes: a small JSON Schema over `tokenizer`.
inline Constraint VariantBase(std::shared_ptr<const TokenizerContext> tokenizer) {
  return Constraint::JsonSchema(
      R"({"type":"object","properties":{"a":{"type":"string","maxLength":4},)"
      R"("b":{"type":"array","items":{"type":"integer"}}},"required":["a"]})",
      std::move(tokenizer));
}

// The number of variants ConstraintVariants must have: one per field,
// ConstraintOptions and JsonSchemaOptions expanded into theirs, the schema
// budget into its two state caps (its deadline and cancel flag are the
// compiler's, not the constraint's). A new field changes it: add a variant.
inline constexpr size_t kExpectedVariants = (FieldCount<Constraint>() - 1) +
                                            (FieldCount<ConstraintOptions>() - 1) +
                                            (FieldCount<JsonSchemaOptions>() - 1) + 2;

// `other` must be a tokenizer whose vocabulary differs from VariantBase's.
inline std::vector<ConstraintVariant> ConstraintVariants(
    std::shared_ptr<const TokenizerContext> other) {
  using V = ConstraintVariant;
  auto schema = [](auto f) {
    return [f](Constraint& c) { f(c.options.json_schema); };
  };
  return {
      V{"kind", nullptr, [](Constraint& c) { c.kind = ConstraintKind::kStructuralTag; }},
      V{"text", nullptr, [](Constraint& c) { c.text += " "; }},
      V{"tokenizer", nullptr, [other](Constraint& c) { c.tokenizer = other; }},
      V{"options.grammar_format", nullptr,
        [](Constraint& c) { c.options.grammar_format = GrammarFormat::kGbnf; }},
      V{"options.schema_route", nullptr,
        [](Constraint& c) { c.options.schema_route = SchemaRoute::kGrammar; }},
      V{"options.eager", nullptr, [](Constraint& c) { c.options.eager = true; }},
      V{"options.eager_dfa", nullptr, [](Constraint& c) { c.options.eager_dfa = true; }},
      V{"json_schema.whitespace", nullptr,
        schema([](JsonSchemaOptions& o) { o.whitespace = JsonWhitespace::kCompact; })},
      V{"json_schema.whitespace_pattern",
        schema([](JsonSchemaOptions& o) { o.whitespace = JsonWhitespace::kFlexible; }),
        schema([](JsonSchemaOptions& o) { o.whitespace_pattern = "[ ]?"; })},
      V{"json_schema.max_recursion_depth", nullptr,
        schema([](JsonSchemaOptions& o) { o.max_recursion_depth = 2; })},
      V{"json_schema.any_value_depth", nullptr,
        schema([](JsonSchemaOptions& o) { o.any_value_depth = 1; })},
      V{"json_schema.additional_properties_default_open", nullptr,
        schema([](JsonSchemaOptions& o) { o.additional_properties_default_open = false; })},
      V{"json_schema.infer_type_from_keywords", nullptr,
        schema([](JsonSchemaOptions& o) { o.infer_type_from_keywords = false; })},
      V{"json_schema.ensure_ascii", nullptr,
        schema([](JsonSchemaOptions& o) { o.ensure_ascii = false; })},
      V{"json_schema.any_property_order", nullptr,
        schema([](JsonSchemaOptions& o) { o.any_property_order = true; })},
      V{"json_schema.max_counted_repeat", nullptr,
        schema([](JsonSchemaOptions& o) { o.max_counted_repeat = 3; })},
      V{"json_schema.budget.max_states", nullptr,
        schema([](JsonSchemaOptions& o) { o.budget.max_states = 4000; })},
      V{"json_schema.budget.max_nfa_states", nullptr,
        schema([](JsonSchemaOptions& o) { o.budget.max_nfa_states = 100000; })},
      V{"json_schema.max_schema_bytes", nullptr,
        schema([](JsonSchemaOptions& o) { o.max_schema_bytes = 1 << 20; })},
      V{"json_schema.max_regex_bytes", nullptr,
        schema([](JsonSchemaOptions& o) { o.max_regex_bytes = 1 << 20; })},
      V{"json_schema.max_schema_nesting", nullptr,
        schema([](JsonSchemaOptions& o) { o.max_schema_nesting = 64; })},
      V{"json_schema.max_schema_depth", nullptr,
        schema([](JsonSchemaOptions& o) { o.max_schema_depth = 64; })},
      V{"json_schema.max_pattern_nesting", nullptr,
        schema([](JsonSchemaOptions& o) { o.max_pattern_nesting = 64; })},
  };
}

}  // namespace maskd::testing

#endif  // MASKD_TESTS_CONSTRAINT_CONSTRAINT_VARIANTS_H_
