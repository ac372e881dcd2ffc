// Constraint: one request to compile, as one value, from the RPC to the
// cache.
//
// A Constraint says what to compile and nothing of how much work the server
// allows: its kind, its text, the options that choose its language or its
// index (ConstraintOptions), and the tokenizer whose vocabulary its masks are
// over. ConstraintCompiler (constraint_compiler.h) compiles it under the
// server's CompileLimits and a deadline.
//
// Kinds: a regex (automaton/regex.h); a JSON Schema document
// (schema/json_schema.h), converted to a regex or to a grammar (SchemaRoute);
// a context-free grammar in Lark, GBNF or XGrammar EBNF (grammar/,
// docs/grammars.md); a structural tag (constraint/structural_tag.h: free
// text with tagged, schema-constrained segments, compiled as a grammar).
//
// Identity: CacheKey() digests every field, listed once in Fields() (a
// static_assert below refuses a field left out of it), and == compares the
// same bytes. So two constraints that differ in any field, an option added
// later included, never share a cache entry, and two equal ones always do.
// Options that do not apply to a kind (a regex's schema_route) still count:
// whoever builds a Constraint leaves them at their defaults.
#ifndef MASKD_CONSTRAINT_CONSTRAINT_H_
#define MASKD_CONSTRAINT_CONSTRAINT_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "constraint/field_count.h"
#include "grammar/grammar_text.h"
#include "schema/json_schema.h"
#include "tokenizer/tokenizer_context.h"

namespace maskd {

enum class ConstraintKind { kRegex, kJsonSchema, kGrammar, kStructuralTag };
// "regex", "json_schema", "grammar", "structural_tag".
std::string_view ConstraintKindName(ConstraintKind kind);

using grammar::GrammarFormat;
using grammar::GrammarFormatName;

// The engine a JSON Schema compiles on.
enum class SchemaRoute {
  // The regex route when the schema fits it (its masks are the fastest): no
  // recursive $ref cut short, within every regex, DFA and converter limit
  // (the DFA's fit tested by building its lazy DFA out, which it keeps).
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
// The route SchemaRouteName calls `name`; nullopt for any other name.
std::optional<SchemaRoute> SchemaRouteNamed(std::string_view name);

// What a request chooses besides its kind and text. A new option is a field
// here (and in Fields()), read from the request where the service converts
// it (service/constraint_request.cc) and applied by ConstraintCompiler.
struct ConstraintOptions {
  // kGrammar: the grammar's dialect.
  GrammarFormat grammar_format = GrammarFormat::kLark;
  // kJsonSchema: the engine it compiles on; the one taken is the index's
  // route().
  SchemaRoute schema_route = SchemaRoute::kAuto;
  // kJsonSchema, and the schemas of a kStructuralTag: the JSON layout and the
  // converter's choices (whitespace, member order, recursion depth, ...) and
  // its own size limits. ConstraintCompiler replaces its budget's deadline
  // and cancel flag, and lowers its state caps and nesting limits to its
  // CompileLimits'.
  JsonSchemaOptions json_schema;
  // Regex route: compute every reachable state's mask while compiling
  // instead of on first use (no effect on the grammar route, whose masks
  // depend on the parser state).
  bool eager = false;
  // Build the whole DFA (minimized) while compiling instead of its states
  // as walks first reach them (automaton/dfa.h, lazy mode), which is the
  // default: a first mask then costs what its state needs. `eager` implies
  // it. On the regex route, a JSON Schema's DFA is lazy too: kRegex builds
  // its start state only; kAuto builds every state of it at compile (no
  // minimization) to test that it fits max_dfa_states, so its walks are
  // never refused. On the grammar route it is each terminal's DFA
  // (grammar::TerminalMode): lazy past
  // CompileLimits::eager_terminal_dfa_states.
  bool eager_dfa = false;

  auto Fields() const {
    return std::tie(grammar_format, schema_route, json_schema, eager, eager_dfa);
  }
};

struct Constraint {
  ConstraintKind kind = ConstraintKind::kRegex;
  // The regex pattern, the JSON Schema document's text, the grammar's, or
  // the structural tag's JSON document.
  std::string text;
  ConstraintOptions options;
  // The vocabulary the masks are over (required to compile). The key names
  // it by its content hash: tokenizers of equal content share entries.
  std::shared_ptr<const TokenizerContext> tokenizer;

  // Every field, in the order the key writes them.
  auto Fields() const { return std::tie(kind, text, options, tokenizer); }

  // 32 lowercase hex digits: the first 128 bits of the SHA-256 of KeyBytes().
  std::string CacheKey() const;
  // Every field of Fields() (ConstraintOptions' recursively), each
  // length-prefixed, so no two constraints share them unless equal.
  std::string KeyBytes() const;
  friend bool operator==(const Constraint& a, const Constraint& b) {
    return a.KeyBytes() == b.KeyBytes();
  }

  static Constraint Regex(std::string pattern, std::shared_ptr<const TokenizerContext> tokenizer);
  static Constraint JsonSchema(std::string schema, std::shared_ptr<const TokenizerContext> tokenizer,
                               JsonSchemaOptions options = {});
  static Constraint Grammar(std::string text, GrammarFormat format,
                            std::shared_ptr<const TokenizerContext> tokenizer);
  static Constraint StructuralTag(std::string json,
                                  std::shared_ptr<const TokenizerContext> tokenizer);
};

// A field added to either struct but not to its Fields() would be left out of
// the cache key: add it there (and to the cache-key test,
// tests/constraint/constraint_key_test.cc).
static_assert(FieldCount<ConstraintOptions>() ==
                  std::tuple_size_v<decltype(std::declval<const ConstraintOptions&>().Fields())>,
              "ConstraintOptions::Fields() must name every field");
static_assert(FieldCount<Constraint>() ==
                  std::tuple_size_v<decltype(std::declval<const Constraint&>().Fields())>,
              "Constraint::Fields() must name every field");

}  // namespace maskd

#endif  // MASKD_CONSTRAINT_CONSTRAINT_H_
