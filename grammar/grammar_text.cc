#include "grammar/grammar_text.h"

#include "grammar/bnf_parser.h"
#include "grammar/lark_parser.h"

namespace maskd::grammar {

std::string_view GrammarFormatName(GrammarFormat format) {
  switch (format) {
    case GrammarFormat::kLark: return "lark";
    case GrammarFormat::kGbnf: return "gbnf";
    case GrammarFormat::kEbnf: return "ebnf";
  }
  return "unknown";
}

std::optional<GrammarFormat> GrammarFormatNamed(std::string_view name) {
  for (GrammarFormat f : {GrammarFormat::kLark, GrammarFormat::kGbnf, GrammarFormat::kEbnf}) {
    if (GrammarFormatName(f) == name) return f;
  }
  return std::nullopt;
}

absl::StatusOr<Grammar> ParseGrammarText(std::string_view text, GrammarFormat format,
                                         const GrammarLimits& limits) {
  switch (format) {
    case GrammarFormat::kLark: return ParseLark(text, limits);
    case GrammarFormat::kGbnf: return ParseGbnf(text, limits);
    case GrammarFormat::kEbnf: return ParseXgrammarEbnf(text, limits);
  }
  return absl::InvalidArgumentError("unknown grammar format");
}

}  // namespace maskd::grammar
