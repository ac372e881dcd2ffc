// ParseLark: checks the text, then runs the stages of grammar/lark_internal.h
// (lex, parse to a syntax tree, lower to a Grammar).
#include "grammar/lark_parser.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "automaton/utf8.h"
#include "grammar/lark_internal.h"

namespace maskd::grammar {

namespace lark_internal {

std::string At(SourcePos p) { return absl::StrFormat("line %d, column %d: ", p.line, p.column); }

absl::Status ErrorAt(SourcePos p, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(At(p), std::string(what)));
}

}  // namespace lark_internal

namespace {

// The position of the first byte that is not valid UTF-8, if any.
std::optional<SourcePos> InvalidUtf8(std::string_view s) {
  uint32_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    if (!DecodeUtf8(s, &i)) return SourcePos{line, static_cast<uint32_t>(at - line_start + 1)};
    if (s[at] == '\n') {
      ++line;
      line_start = at + 1;
    }
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<Grammar> ParseLark(std::string_view text, const GrammarLimits& limits,
                                  std::string_view start) {
  if (text.size() > limits.max_text_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("grammar text is ", text.size(),
                                                     " bytes, over max_text_bytes (",
                                                     limits.max_text_bytes, ")"));
  }
  if (auto bad = InvalidUtf8(text)) return lark_internal::ErrorAt(*bad, "invalid UTF-8");
  auto tokens = lark_internal::Lex(text);
  if (!tokens.ok()) return tokens.status();
  auto syntax = lark_internal::ParseSyntax(std::move(*tokens), limits);
  if (!syntax.ok()) return syntax.status();
  return lark_internal::Lower(*syntax, limits, start);
}

}  // namespace maskd::grammar
