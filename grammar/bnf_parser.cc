#include "grammar/bnf_parser.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "automaton/codepoint_set.h"
#include "automaton/regex.h"
#include "automaton/utf8.h"
#include "grammar/bnf_internal.h"
#include "grammar/regex_language.h"

namespace maskd::grammar {
namespace bnf_internal {

absl::StatusOr<Item> BnfParser::ParseLiteral() {
  size_t start = pos_;
  ++pos_;  // opening quote
  std::vector<uint32_t> cps;
  while (true) {
    if (AtEnd() || (dialect_ == Dialect::kEbnf && (Peek() == '\n' || Peek() == '\r'))) {
      return Error(start, "unterminated literal");
    }
    if (Peek() == '"') break;
    auto cp = ParseCodepoint(/*in_class=*/false);
    if (!cp.ok()) return cp.status();
    cps.push_back(*cp);
  }
  ++pos_;  // closing quote
  if (cps.empty()) {
    Item empty;
    empty.offset = start;
    return empty;
  }
  return LiteralItem(cps, std::string(text_.substr(start, pos_ - start)), start);
}

absl::StatusOr<Item> BnfParser::ParseClass() {
  size_t start = pos_;
  ++pos_;  // '['
  bool negate = false;
  if (Peek() == '^') {
    negate = true;
    ++pos_;
  }
  CodepointSet set;
  while (true) {
    if (AtEnd()) return Error(start, "unterminated character class");
    if (Peek() == ']') break;
    if (dialect_ == Dialect::kEbnf && (Peek() == '\n' || Peek() == '\r')) {
      return Error(start, "unterminated character class (a class cannot hold a raw newline)");
    }
    size_t item_start = pos_;
    auto lo = ParseCodepoint(/*in_class=*/true);
    if (!lo.ok()) return lo.status();
    uint32_t hi = *lo;
    if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < text_.size()) {
      ++pos_;
      auto h = ParseCodepoint(/*in_class=*/true);
      if (!h.ok()) return h.status();
      hi = *h;
      if (hi < *lo) {
        return Error(item_start, absl::StrCat("bad range ",
                                              std::string(text_.substr(item_start, pos_ - item_start)),
                                              " (end before start)"));
      }
    }
    // Ranges may span the surrogates, which UTF-8 text never holds.
    if (*lo < 0xD800) set.AddRange(*lo, std::min<uint32_t>(hi, 0xD7FF));
    if (hi > 0xDFFF) set.AddRange(std::max<uint32_t>(*lo, 0xE000), hi);
  }
  ++pos_;  // ']'
  if (negate) set = set.Complement();
  return SetItem(set, std::string(text_.substr(start, pos_ - start)), start);
}

absl::StatusOr<Item> BnfParser::ParseRegexMacro(size_t start) {
  SkipSpace(true);
  if (Peek() != '(') return Error(pos_, "expecting '(' after Regex");
  ++pos_;
  SkipSpace(true);
  if (Peek() != '"') return Error(pos_, "Regex(...) takes one string literal");
  size_t lit_start = pos_;
  ++pos_;
  std::string pattern;
  while (true) {
    if (AtEnd() || Peek() == '\n' || Peek() == '\r') return Error(lit_start, "unterminated literal");
    if (Peek() == '"') break;
    auto cp = ParseCodepoint(/*in_class=*/false);
    if (!cp.ok()) return cp.status();
    AppendUtf8(&pattern, *cp);
  }
  ++pos_;
  SkipSpace(true);
  if (Peek() == ',') return Error(pos_, "Regex(...) options (json_string=...) are not supported");
  if (Peek() != ')') return Error(pos_, "expecting ')' after the Regex pattern");
  ++pos_;
  auto re = Regex::Parse(pattern);
  if (!re.ok()) return Error(lit_start, std::string(re.status().message()));
  // A terminal must match a non-empty string (grammar.h); one that may also
  // match the empty string stays a terminal.
  RegexLanguage language = AnalyzeRegex(re->root());
  if (!language.non_empty) {
    if (!language.any) return NeverItem(start);
    Item empty;
    empty.offset = start;
    return empty;
  }
  return TerminalItem(std::string(text_.substr(start, pos_ - start)), pattern, std::nullopt,
                      false, start);
}

absl::StatusOr<Item> BnfParser::ParseElement(bool nested) {
  const size_t start = pos_;
  const char c = Peek();
  if (c == '"') return ParseLiteral();
  if (c == '[') return ParseClass();
  if (c == '.' && dialect_ == Dialect::kGbnf) return ParseAnyCharacter(start);
  if (c == '(') return ParseGroup(start);
  if (IsNameChar(c, true)) return ParseNamed(start);
  return Unexpected(start, c);
}

absl::StatusOr<Item> BnfParser::ParseAnyCharacter(size_t start) {
  ++pos_;
  CodepointSet any;
  any.AddRange(0, 0xD7FF);
  any.AddRange(0xE000, kMaxCodepoint);
  return SetItem(any, ".", start);
}

absl::StatusOr<Item> BnfParser::ParseGroup(size_t start) {
  if (absl::Status s = CheckGroupOpens(start); !s.ok()) return s;
  ++depth_;
  ++pos_;
  SkipSpace(true);
  auto alts = ParseAlternates(/*nested=*/true);
  if (!alts.ok()) return alts.status();
  if (absl::Status s = CheckGroupCloses(start); !s.ok()) return s;
  ++pos_;
  --depth_;
  Item item;
  item.kind = Item::Kind::kGroup;
  item.alternatives = std::move(*alts);
  item.offset = start;
  return item;
}

absl::Status BnfParser::CheckGroupOpens(size_t start) const {
  if (dialect_ == Dialect::kEbnf && Peek(1) == '=') {
    return Error(start, "lookahead assertions (= ...) are not supported");
  }
  if (depth_ >= max_nesting_) {
    return Exhausted(start, absl::StrCat("groups nested more than ", max_nesting_,
                                         " deep (max_nesting)"));
  }
  return absl::OkStatus();
}

absl::Status BnfParser::CheckGroupCloses(size_t start) const {
  if (AtEnd()) return Error(start, "unterminated group: expecting ')'");
  if (Peek() != ')') {
    return Error(pos_, absl::StrCat("expecting ')' to close the group at ", PosAt(start).line,
                                    ":", PosAt(start).column));
  }
  return absl::OkStatus();
}

absl::StatusOr<Item> BnfParser::ParseNamed(size_t start) {
  std::string_view name = ParseName();
  if (dialect_ == Dialect::kEbnf) {
    if (name == "Regex") return ParseRegexMacro(start);
    if (name == "TagDispatch" || name == "Token" || name == "ExcludeToken" ||
        name == "TokenTagDispatch") {
      return Error(start, absl::StrCat("XGrammar's ", std::string(name), "(...) is not supported"));
    }
  }
  auto id = RuleId(name, start);
  if (!id.ok()) return id.status();
  Item item;
  item.kind = Item::Kind::kSymbol;
  item.symbol = Symbol::Rule(*id);
  item.offset = start;
  return item;
}

absl::Status BnfParser::Unexpected(size_t start, char c) const {
  if (dialect_ == Dialect::kGbnf && (c == '<' || c == '!')) {
    return Error(start, "token references (<...>, !<...>) are not supported");
  }
  if (static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7F) {
    return Error(start, absl::StrCat("unexpected '", std::string(1, c), "'"));
  }
  return Error(start, absl::StrCat("unexpected byte 0x", absl::Hex(static_cast<unsigned char>(c))));
}

absl::StatusOr<Quantifier> BnfParser::ParseQuantifier(bool skip_newlines) {
  Quantifier q;
  char c = Peek();
  ++pos_;
  if (c == '+') {
    q.min = 1;
  } else if (c == '?') {
    q.max = 1;
  } else if (c == '{') {
    SkipSpace(skip_newlines);
    auto m = ParseCount();
    if (!m.ok()) return m.status();
    q.min = *m;
    SkipSpace(skip_newlines);
    if (Peek() == '}') {
      q.max = q.min;
    } else if (Peek() == ',') {
      ++pos_;
      SkipSpace(skip_newlines);
      if (IsDigit(Peek())) {
        auto n = ParseCount();
        if (!n.ok()) return n.status();
        q.max = *n;
        SkipSpace(skip_newlines);
      }
      if (Peek() != '}') return Error(pos_, "expecting '}'");
    } else {
      return Error(pos_, "expecting ',' or '}'");
    }
    ++pos_;
  }
  return q;
}

absl::StatusOr<std::vector<Symbol>> BnfParser::ParseSequence(bool nested) {
  std::vector<Symbol> seq;
  std::optional<Item> last;
  const bool skip_newlines = SkipsNewlines(nested);
  while (!AtEnd()) {
    char c = Peek();
    if (c == '\n' || c == '\r' || c == '|' || c == ')') break;
    if (dialect_ == Dialect::kEbnf && AtRuleDefinition()) {
      if (absl::Status s = CheckRuleStartsLine(); !s.ok()) return s;
      break;
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') {
      if (absl::Status s = ParseOperatorOn(&last, skip_newlines); !s.ok()) return s;
      continue;
    }
    if (last) {
      auto s = AppendItem(std::move(*last), &seq);
      if (!s.ok()) return s;
      last.reset();
    }
    auto item = ParseElement(nested);
    if (!item.ok()) return item.status();
    last = std::move(*item);
    last_token_end_ = pos_;
    SkipSpace(skip_newlines);
  }
  if (last) {
    auto s = AppendItem(std::move(*last), &seq);
    if (!s.ok()) return s;
  }
  return seq;
}

absl::Status BnfParser::CheckRuleStartsLine() const {
  if (text_.substr(last_token_end_, pos_ - last_token_end_).find('\n') == std::string_view::npos) {
    return Error(pos_, "a rule definition must start a line");
  }
  return absl::OkStatus();
}

absl::Status BnfParser::ParseOperatorOn(std::optional<Item>* last, bool skip_newlines) {
  const size_t op = pos_;
  const char c = Peek();
  if (!*last) return Error(op, absl::StrCat("expecting an item before '", std::string(1, c), "'"));
  auto quantifier = ParseQuantifier(skip_newlines);
  if (!quantifier.ok()) return quantifier.status();
  auto q = ApplyQuantifier(std::move(**last), *quantifier, op);
  if (!q.ok()) return q.status();
  *last = std::move(*q);
  last_token_end_ = pos_;
  SkipSpace(skip_newlines);
  if (dialect_ == Dialect::kEbnf && !AtEnd() &&
      (Peek() == '*' || Peek() == '+' || Peek() == '?' || Peek() == '{')) {
    return Error(pos_, absl::StrCat("unexpected '", std::string(1, Peek()),
                                    "' (one operator per item)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<Symbol>>> BnfParser::ParseAlternates(bool nested) {
  std::vector<std::vector<Symbol>> alts;
  while (true) {
    auto seq = ParseSequence(nested);
    if (!seq.ok()) return seq.status();
    alts.push_back(std::move(*seq));
    if (Peek() != '|') break;
    ++pos_;
    SkipSpace(true);
  }
  return alts;
}

absl::Status BnfParser::ParseRule() {
  size_t start = pos_;
  if (!IsNameChar(Peek(), true)) {
    if (Peek() == '|') return Error(pos_, "expecting a rule name ('|' continues a rule only after a rule)");
    return Error(pos_, "expecting a rule name");
  }
  std::string_view name = ParseName();
  if (dialect_ == Dialect::kEbnf && Peek() == '[') {
    return Error(pos_, "rule attributes ([...] before ::=) are not supported");
  }
  SkipSpace(dialect_ == Dialect::kEbnf);
  if (text_.substr(pos_, 3) != "::=") return Error(pos_, "expecting '::='");
  pos_ += 3;
  last_token_end_ = pos_;
  SkipSpace(true);
  auto id = RuleId(name, start);
  if (!id.ok()) return id.status();
  if (defined_at_[*id]) {
    SourcePos first = PosAt(*defined_at_[*id]);
    return Error(start, absl::StrCat("rule '", std::string(name), "' is defined twice (first at line ",
                                     first.line, ", column ", first.column, ")"));
  }
  defined_at_[*id] = start;
  g_.rules[*id].where = PosAt(start);
  current_rule_ = std::string(name);
  std::vector<std::vector<Symbol>> alts;
  while (true) {
    auto more = ParseAlternates(/*nested=*/false);
    if (!more.ok()) return more.status();
    for (auto& a : *more) alts.push_back(std::move(a));
    if (AtEnd()) break;
    if (Peek() == ')') return Error(pos_, "unexpected ')'");
    if (dialect_ == Dialect::kEbnf) break;  // at the next rule definition
    // GBNF: the rule ends at this newline, unless the next line goes on
    // with '|' (an extension: llama.cpp wants the '|' before the newline).
    if (Peek() != '\n' && Peek() != '\r') return Error(pos_, "expecting newline or end");
    SkipSpace(true);
    if (Peek() != '|') break;
    ++pos_;
    SkipSpace(true);
  }
  g_.rules[*id].alternatives = std::move(alts);
  SkipSpace(true);
  return absl::OkStatus();
}

absl::StatusOr<Grammar> BnfParser::Parse() {
  if (text_.size() > limits_.max_text_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("grammar text of ", text_.size(),
                                                     " bytes is more than ",
                                                     limits_.max_text_bytes, " (max_text_bytes)"));
  }
  line_starts_.push_back(0);
  for (size_t i = 0; i < text_.size(); ++i) {
    if (text_[i] == '\n') line_starts_.push_back(i + 1);
  }
  SkipSpace(true);
  while (!AtEnd()) {
    absl::Status s = ParseRule();
    if (!s.ok()) return s;
  }
  // Undefined rules, the first use in the text first.
  std::optional<size_t> undefined;
  for (size_t r = 0; r < g_.rules.size(); ++r) {
    if (!defined_at_[r] && (!undefined || first_use_[r] < first_use_[*undefined])) undefined = r;
  }
  if (undefined) {
    return Error(first_use_[*undefined],
                 absl::StrCat("undefined rule '", g_.rules[*undefined].name, "'"));
  }
  // Helper names stay distinct from user rules defined after them.
  helper_.resize(g_.rules.size(), false);
  for (size_t r = 0; r < g_.rules.size(); ++r) {
    if (!helper_[r]) continue;
    while (rule_ids_.contains(g_.rules[r].name)) g_.rules[r].name += "_";
  }
  auto root = rule_ids_.find("root");
  if (root == rule_ids_.end()) return Error(0, "no rule named 'root' (the start rule)");
  g_.start = root->second;
  size_t symbols = 0;
  for (const Rule& rule : g_.rules) {
    for (const auto& alt : rule.alternatives) symbols += alt.size();
  }
  if (symbols > limits_.max_symbols) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "grammar has ", symbols, " symbols, more than ", limits_.max_symbols, " (max_symbols)"));
  }
  absl::Status s = Normalize(&g_);
  if (!s.ok()) return s;
  return std::move(g_);
}

}  // namespace bnf_internal

using bnf_internal::BnfParser;
using bnf_internal::Dialect;

absl::StatusOr<Grammar> ParseGbnf(std::string_view text, const GrammarLimits& limits) {
  return BnfParser(text, Dialect::kGbnf, limits).Parse();
}

absl::StatusOr<Grammar> ParseXgrammarEbnf(std::string_view text, const GrammarLimits& limits) {
  return BnfParser(text, Dialect::kEbnf, limits).Parse();
}

}  // namespace maskd::grammar
