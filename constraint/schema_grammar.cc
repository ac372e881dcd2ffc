#include "constraint/schema_grammar.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace maskd {

absl::StatusOr<grammar::Grammar> JsonSchemaGrammar(std::string_view schema,
                                                   const JsonSchemaOptions& options,
                                                   const grammar::GrammarLimits& limits,
                                                   const grammar::TerminalLimits& terminal,
                                                   std::vector<std::string>* warnings) {
  auto document = JsonSchemaDocument::Parse(schema, options);
  if (!document.ok()) return document.status();
  return JsonSchemaGrammar(*document, options, limits, terminal, warnings);
}

absl::StatusOr<grammar::Grammar> JsonSchemaGrammar(const JsonSchemaDocument& schema,
                                                   const JsonSchemaOptions& options,
                                                   const grammar::GrammarLimits& limits,
                                                   const grammar::TerminalLimits& terminal,
                                                   std::vector<std::string>* warnings) {
  auto rules = JsonSchemaToRules(schema, options);
  if (!rules.ok()) return rules.status();
  std::vector<grammar::RegexRule> regex_rules;
  regex_rules.reserve(rules->rules.size());
  for (JsonSchemaRule& r : rules->rules) {
    regex_rules.push_back({std::move(r.name), std::move(r.regex)});
  }
  grammar::GrammarLimits lowering = limits;
  lowering.max_text_bytes = std::max(limits.max_text_bytes, options.max_regex_bytes);
  // A schema's rules nest groups as deep as its subschemas do (an object, its
  // members' alternation and optional groups: a few per level), so a schema
  // within max_schema_depth may pass a grammar text's max_nesting; the
  // converter's own depth limit bounds them instead.
  lowering.max_nesting = std::max(limits.max_nesting, kMaxSchemaRuleNesting);
  auto g = grammar::GrammarFromRegexRules(regex_rules, 0, lowering, terminal);
  if (!g.ok()) {
    // A rule that derives no string is a subschema whose every instance
    // would be infinitely deep: say so in the schema's terms. Rule names
    // are the subschemas' JSON pointers.
    const std::string m(g.status().message());
    const size_t name_end = m.find('\'', 6);
    if (absl::StartsWith(m, "rule '") && name_end != std::string::npos &&
        absl::StrContains(m, "derives no string")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "schema has no valid instance: every instance of the subschema at ",
          m.substr(6, name_end - 6),
          " would be infinitely deep (a $ref cycle each instance must follow)"));
    }
    return g.status();
  }
  if (warnings != nullptr) *warnings = std::move(rules->warnings);
  return g;
}

}  // namespace maskd
