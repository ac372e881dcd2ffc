// JSON Schema -> regex: compiles a JSON Schema into a regular expression whose
// full matches are JSON texts valid against the schema, laid out as the
// options say (by default exactly as Python's json.dumps writes them).
//
// A constraint is a language: every text the regex matches is a valid
// instance, and every valid instance in the expected layout matches (within
// the documented limits: recursion unrolled to a depth, counted repeats capped,
// keywords listed in docs/json-schema.md as not enforced). Keywords that only
// describe are ignored; a validation keyword the converter cannot enforce is an
// InvalidArgument error naming the keyword and its JSON pointer; a keyword
// ignored because no regex can enforce it (e.g. uniqueItems) is reported in
// JsonSchemaRegex::warnings.
//
// Conversion takes bounded time: it stops with DeadlineExceeded or Cancelled
// when JsonSchemaOptions::budget's deadline passes or its cancel flag is set
// (checked at each subschema and inside the converter's own DFA builds).
//
// The regex syntax is the common subset of Python's `re`, RE2 and maskd's
// parser (automaton/regex.h): escaped literals, classes, (?:...), |, * + ? {n,m};
// non-ASCII characters appear as raw UTF-8; control characters as \xHH.
#ifndef MASKD_SCHEMA_JSON_SCHEMA_H_
#define MASKD_SCHEMA_JSON_SCHEMA_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "automaton/dfa.h"

namespace maskd {

// How JSON tokens are separated in the generated text.
enum class JsonWhitespace {
  // Python's json.dumps default: ", " between items, ": " after keys, nothing
  // else ("{}" and "[]" when empty). MaskBench's layout.
  kPython,
  // json.dumps(separators=(",", ":")): no whitespace at all.
  kCompact,
  // Any whitespace matching `whitespace_pattern` around every structural
  // token ("{", "}", "[", "]", ",", ":").
  kFlexible,
};

// Parser limits that bound stack depth (every walk over a schema, its JSON
// tree and a `pattern`'s tree recurses once per level): JsonSchemaOptions may
// lower them, never raise them.
// Arrays and objects open at once in the schema's JSON text.
inline constexpr int kMaxSchemaNesting = 256;
// Subschemas (each $ref expansion included) the converter is inside of at once.
inline constexpr int kMaxSchemaDepth = 128;
// Groups open at once in a `pattern` or a patternProperties key.
inline constexpr int kMaxPatternNesting = 256;

struct JsonSchemaOptions {
  JsonWhitespace whitespace = JsonWhitespace::kPython;
  // Used with kFlexible only: a regex matching the allowed whitespace run.
  std::string whitespace_pattern = "[ \\t\\n\\r]{0,8}";

  // A $ref that reaches itself is expanded at most this many times along one
  // path; deeper, the branch is cut (optional properties, array items and
  // union branches disappear). A cut that leaves the root without instances is
  // an error naming the required property or item.
  int max_recursion_depth = 3;
  // Nesting depth of arrays/objects allowed where the schema allows any JSON
  // value (`{}`, `true`, an absent `items`, open additionalProperties).
  int any_value_depth = 2;

  // additionalProperties when a schema says nothing: true follows the JSON
  // Schema spec (extra properties allowed, after the declared ones); false
  // closes objects (what most generation setups want).
  bool additional_properties_default_open = true;

  // A schema without "type" allows every type (the spec). When true, a
  // schema without "type" whose validation keywords all belong to one type
  // (e.g. only "properties"/"required": object; "items": array; "pattern":
  // string; "minimum": number) allows that type only. Schemas with no
  // type-specific keyword (e.g. {} or only "enum") still allow any value.
  bool infer_type_from_keywords = true;

  // Whether strings in const/enum are written as json.dumps(ensure_ascii=True)
  // does (non-ASCII as \uXXXX) or raw UTF-8. Free-form strings always accept
  // both raw UTF-8 and any \uXXXX escape.
  bool ensure_ascii = true;

  // Object members in any order (each declared one at most once, every
  // required one present, other members anywhere), instead of the schema's
  // order. Grammar route only (JsonSchemaToRules): JsonSchemaToRegex refuses
  // it (InvalidArgument). Objects with more than 8 declared properties, or
  // with minProperties/maxProperties, keep the schema order (warning).
  bool any_property_order = false;

  // Counted repeats (maxLength, maxItems, ...) above this bound are not
  // enforced (warning); the lower bound stays. At most 1000.
  int max_counted_repeat = 1000;

  // The converter's own automata (it builds DFAs to test enum values against
  // sibling keywords, excluded strings against a pattern, and to size an
  // unanchored pattern's search automaton) and the conversion as a whole:
  //  - max_states, max_nfa_states: per internal DFA. A DFA over the cap is
  //    not used and the converter falls back as each use documents (enum
  //    values kept, exclusion not enforced, pattern anchored; the last
  //    with its own lower cap of 4000 states). ConstraintCompiler lowers them
  //    to its CompileLimits' max_dfa_states and max_nfa_states.
  //  - deadline, cancel: past the deadline the conversion fails with
  //    DeadlineExceeded; with the flag set, Cancelled. Checked at each
  //    subschema and inside each internal DFA build. Not part of
  //    JsonSchemaOptionsKey (they end a conversion, never change its output).
  DfaOptions budget = {.max_states = 50000};

  // Input and output limits.
  size_t max_schema_bytes = 8 << 20;  // ResourceExhausted above
  // ResourceExhausted above. Generated regexes are large (every open object
  // carries an any-value automaton) but share their repeats when compiled;
  // callers raise the regex parser's max_pattern_bytes to this.
  size_t max_regex_bytes = 8 << 20;
  // Nesting limits, each in [1, its constant above]; deeper input is
  // InvalidArgument naming the limit. maskd: --max_schema_nesting,
  // --max_schema_depth, --max_pattern_nesting.
  int max_schema_nesting = kMaxSchemaNesting;
  int max_schema_depth = kMaxSchemaDepth;
  int max_pattern_nesting = kMaxPatternNesting;
};

struct JsonSchemaRegex {
  std::string regex;
  // Keywords not enforced, one line each with the schema location, e.g.
  // "uniqueItems at /properties/tags: not enforced". Sorted, no duplicates.
  std::vector<std::string> warnings;
  // Whether a recursive $ref was cut at max_recursion_depth somewhere: the
  // regex then holds only the instances recursing less deeply (the grammar
  // route, JsonSchemaToRules, holds them all).
  bool truncated_recursion = false;
};

namespace json_schema_internal {
struct ParsedSchema;  // the document's tree (internal/keywords.h)
}

// A JSON Schema document parsed once and checked against the document limits
// of the options it was parsed under (max_schema_bytes, max_schema_nesting,
// the budget), for several conversions under options with the same limits:
// the automatic route converts a schema for the regex route and, where that
// does not fit, for the grammar route (constraint/constraint_compiler.cc).
// Immutable; a copy shares the tree.
class JsonSchemaDocument {
 public:
  // The errors JsonSchemaToRegex gives for the options and the document
  // itself: InvalidArgument (bad options, bad JSON with the parse error's
  // byte offset, nesting past max_schema_nesting), ResourceExhausted (over
  // max_schema_bytes, an object of too many members), DeadlineExceeded and
  // Cancelled (the budget).
  static absl::StatusOr<JsonSchemaDocument> Parse(std::string_view schema_json,
                                                  const JsonSchemaOptions& options);
  const json_schema_internal::ParsedSchema& parsed() const { return *parsed_; }

 private:
  explicit JsonSchemaDocument(std::shared_ptr<const json_schema_internal::ParsedSchema> parsed)
      : parsed_(std::move(parsed)) {}
  std::shared_ptr<const json_schema_internal::ParsedSchema> parsed_;
};

// InvalidArgument: bad JSON (with the parse error position), unsupported
// keyword or $ref, schema without instances, nesting past a limit.
// ResourceExhausted: schema or regex over its byte limit, schema too complex.
// DeadlineExceeded, Cancelled: options.budget's deadline or cancel flag.
absl::StatusOr<JsonSchemaRegex> JsonSchemaToRegex(std::string_view schema_json,
                                                  const JsonSchemaOptions& options = {});
// The same for a document parsed already, under options with its document
// limits (JsonSchemaDocument).
absl::StatusOr<JsonSchemaRegex> JsonSchemaToRegex(const JsonSchemaDocument& schema,
                                                  const JsonSchemaOptions& options = {});

// JSON Schema -> regex rules: the grammar route. rules[0] is the root; each
// rule's regex is in the syntax above, plus `(?&k)` standing for rules[k]'s
// language (grammar/regex_rules.h lowers them into a grammar). Same keywords,
// layout and errors as JsonSchemaToRegex, except:
//  - each $ref target is one rule: recursion is exact, at any depth
//    (max_recursion_depth is not used);
//  - any JSON value (`{}`, `true`, open additionalProperties, absent items)
//    is one recursive rule, nested without a bound (any_value_depth is not
//    used);
//  - a subschema whose regex is over 512 bytes becomes its own rule, so no
//    large regex is copied into another (open objects and repeated
//    subschemas stay small); max_regex_bytes bounds all rules together.
// A rule whose target has no instance matches no string.
struct JsonSchemaRule {
  std::string name;   // the subschema's JSON pointer, or "any JSON value"
  std::string regex;
};
struct JsonSchemaRules {
  std::vector<JsonSchemaRule> rules;
  std::vector<std::string> warnings;  // as JsonSchemaRegex::warnings
};
absl::StatusOr<JsonSchemaRules> JsonSchemaToRules(std::string_view schema_json,
                                                  const JsonSchemaOptions& options = {});
absl::StatusOr<JsonSchemaRules> JsonSchemaToRules(const JsonSchemaDocument& schema,
                                                  const JsonSchemaOptions& options = {});

// A stable text of the options for cache keys (every field, fixed order).
std::string JsonSchemaOptionsKey(const JsonSchemaOptions& options);

}  // namespace maskd

#endif  // MASKD_SCHEMA_JSON_SCHEMA_H_
