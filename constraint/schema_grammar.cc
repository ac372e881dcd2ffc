#include "constraint/schema_grammar.h"

#include <algorithm>
#include <utility>

namespace maskd {

absl::StatusOr<grammar::Grammar> JsonSchemaGrammar(std::string_view schema,
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
  auto g = grammar::GrammarFromRegexRules(regex_rules, 0, lowering, terminal);
  if (g.ok() && warnings != nullptr) *warnings = std::move(rules->warnings);
  return g;
}

}  // namespace maskd
