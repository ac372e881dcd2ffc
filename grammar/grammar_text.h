// The grammar text formats maskd reads, and one entry point that parses a
// text in any of them (lark_parser.h, bnf_parser.h) into a Grammar.
#ifndef MASKD_GRAMMAR_GRAMMAR_TEXT_H_
#define MASKD_GRAMMAR_GRAMMAR_TEXT_H_

#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "grammar/grammar.h"

namespace maskd::grammar {

enum class GrammarFormat { kLark, kGbnf, kEbnf };

// "lark", "gbnf", "ebnf".
std::string_view GrammarFormatName(GrammarFormat format);
// The format named `name` (as GrammarFormatName gives it); nullopt if none.
std::optional<GrammarFormat> GrammarFormatNamed(std::string_view name);

// ParseLark (start rule `start`), ParseGbnf or ParseXgrammarEbnf (start
// rule `root`); their errors (INVALID_ARGUMENT with line and column,
// RESOURCE_EXHAUSTED naming a GrammarLimits field).
absl::StatusOr<Grammar> ParseGrammarText(std::string_view text, GrammarFormat format,
                                         const GrammarLimits& limits = {});

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_GRAMMAR_TEXT_H_
