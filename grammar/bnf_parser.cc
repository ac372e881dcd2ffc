#include "grammar/bnf_parser.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "automaton/regex.h"
#include "automaton/regex_text.h"
#include "grammar/regex_language.h"

namespace maskd::grammar {
namespace {

enum class Dialect { kGbnf, kEbnf };

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// How GBNF/EBNF terminals spell a code point (regex_text.h): ASCII letters
// and digits as themselves, other printable ASCII backslashed, the rest \x{h}.
constexpr CodepointSpelling kSpelling = CodepointSpelling::kAlnumElseEscaped;

std::string RegexForString(const std::vector<uint32_t>& cps) {
  std::string out;
  for (uint32_t cp : cps) AppendCodepoint(&out, cp, kSpelling);
  return out;
}

std::string RegexForSet(const CodepointSet& set) {
  std::string out;
  AppendCodepointSet(&out, set, kSpelling, kSpelling);
  return out;
}

void AppendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// One parsed element of a sequence, before it is placed in a rule: nothing
// (an empty literal), one symbol, or a group not yet turned into a rule (a
// group of one alternative is inlined unless an operator needs one symbol).
struct Item {
  enum class Kind { kEmpty, kSymbol, kGroup };
  Kind kind = Kind::kEmpty;
  Symbol symbol;
  std::vector<std::vector<Symbol>> alternatives;  // kGroup
  size_t offset = 0;                              // where it starts in the text
};

class BnfParser {
 public:
  BnfParser(std::string_view text, Dialect dialect, const GrammarLimits& limits)
      : text_(text),
        dialect_(dialect),
        limits_(limits),
        max_nesting_(std::min(limits.max_nesting, kMaxBnfNesting)) {}

  absl::StatusOr<Grammar> Parse();

 private:
  // --- Positions and errors.
  SourcePos PosAt(size_t offset) const;
  absl::Status Error(size_t offset, const std::string& what) const {
    SourcePos p = PosAt(offset);
    return absl::InvalidArgumentError(
        absl::StrCat("line ", p.line, ", column ", p.column, ": ", what));
  }
  absl::Status Exhausted(size_t offset, const std::string& what) const {
    SourcePos p = PosAt(offset);
    return absl::ResourceExhaustedError(
        absl::StrCat("line ", p.line, ", column ", p.column, ": ", what));
  }

  // --- Lexical helpers.
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  bool IsNameChar(char c, bool first) const {
    if (dialect_ == Dialect::kGbnf) return IsAlpha(c) || IsDigit(c) || c == '-';
    return IsAlpha(c) || c == '_' || c == '-' || c == '.' || (!first && IsDigit(c));
  }
  // Skips blanks and # comments; newlines too when `newlines` is set. GBNF
  // rules end at a newline outside groups; EBNF always skips them.
  void SkipSpace(bool newlines);
  bool SkipsNewlines(bool nested) const { return dialect_ == Dialect::kEbnf || nested; }
  std::string_view ParseName();
  // At a `name ::=` (EBNF: where the sequence before it ends).
  bool AtRuleDefinition() const;
  absl::StatusOr<uint32_t> ParseCodepoint(bool in_class);
  absl::StatusOr<uint32_t> ParseEscape(bool in_class);
  absl::StatusOr<uint64_t> ParseCount();

  // --- Grammar structure.
  absl::Status ParseRule();
  absl::StatusOr<std::vector<std::vector<Symbol>>> ParseAlternates(bool nested);
  absl::StatusOr<std::vector<Symbol>> ParseSequence(bool nested);
  absl::StatusOr<Item> ParseElement(bool nested);
  absl::StatusOr<Item> ParseLiteral();
  absl::StatusOr<Item> ParseClass();
  absl::StatusOr<Item> ParseRegexMacro(size_t start);
  absl::StatusOr<Item> ApplyQuantifier(Item item, uint64_t min, std::optional<uint64_t> max,
                                       size_t offset);

  // --- Building.
  absl::StatusOr<uint32_t> RuleId(std::string_view name, size_t offset);
  absl::StatusOr<uint32_t> NewHelperRule(std::vector<std::vector<Symbol>> alternatives,
                                         size_t offset);
  absl::StatusOr<Item> TerminalItem(std::string name, std::string regex,
                                    std::optional<std::string> literal, bool repeatable,
                                    size_t offset);
  absl::StatusOr<Item> SetItem(const CodepointSet& set, std::string name, size_t offset);
  // A rule with no alternatives, which Normalize removes with every
  // alternative using it: what a class or Regex matching nothing lowers to.
  absl::StatusOr<Item> NeverItem(size_t offset);
  // The item as one symbol (a group becomes a helper rule); nullopt when it
  // derives only the empty string.
  absl::StatusOr<std::optional<Symbol>> AsSymbol(Item item);
  absl::Status AppendItem(Item item, std::vector<Symbol>* seq);
  // Helper symbols for exactly / at most `k` copies of `x` (k >= 1).
  absl::StatusOr<Symbol> ExactCopies(Symbol x, uint64_t k, size_t offset,
                                     absl::flat_hash_map<uint64_t, Symbol>* memo);
  absl::StatusOr<Symbol> UpToCopies(Symbol x, uint64_t k, size_t offset,
                                    absl::flat_hash_map<uint64_t, Symbol>* memo);

  std::string_view text_;
  Dialect dialect_;
  GrammarLimits limits_;
  uint32_t max_nesting_;
  size_t pos_ = 0;
  size_t last_token_end_ = 0;  // end offset of the last element or operator
  uint32_t depth_ = 0;
  std::vector<size_t> line_starts_;

  Grammar g_;
  absl::flat_hash_map<std::string, uint32_t> rule_ids_;
  std::vector<std::optional<size_t>> defined_at_;  // per rule: offset of its definition
  std::vector<size_t> first_use_;                  // per rule: offset of its first use
  absl::flat_hash_map<std::string, uint32_t> terminal_ids_;  // by regex
  std::vector<bool> repeatable_;  // per terminal: a literal or class (not yet repeated)
  std::string current_rule_;
  absl::flat_hash_map<std::string, uint32_t> helper_counts_;
  std::optional<uint32_t> never_rule_;  // a rule deriving nothing: the empty class
  std::vector<bool> helper_;            // per rule id: made by lowering
};

SourcePos BnfParser::PosAt(size_t offset) const {
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  size_t line = static_cast<size_t>(it - line_starts_.begin());  // >= 1
  size_t col = offset - line_starts_[line - 1] + 1;
  return {static_cast<uint32_t>(line), static_cast<uint32_t>(col)};
}

void BnfParser::SkipSpace(bool newlines) {
  while (!AtEnd()) {
    char c = Peek();
    if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
      ++pos_;
    } else if (c == '#') {
      while (!AtEnd() && Peek() != '\n' && Peek() != '\r') ++pos_;
    } else {
      break;
    }
  }
}

std::string_view BnfParser::ParseName() {
  size_t start = pos_;
  while (!AtEnd() && IsNameChar(Peek(), pos_ == start)) ++pos_;
  return text_.substr(start, pos_ - start);
}

bool BnfParser::AtRuleDefinition() const {
  size_t p = pos_;
  if (p >= text_.size() || !IsNameChar(text_[p], true)) return false;
  size_t start = p;
  while (p < text_.size() && IsNameChar(text_[p], p == start)) ++p;
  while (p < text_.size()) {
    char c = text_[p];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++p;
    } else if (c == '#') {
      while (p < text_.size() && text_[p] != '\n' && text_[p] != '\r') ++p;
    } else {
      break;
    }
  }
  return text_.substr(p, 3) == "::=";
}

absl::StatusOr<uint64_t> BnfParser::ParseCount() {
  if (AtEnd() || !IsDigit(Peek())) return Error(pos_, "expecting an integer");
  uint64_t v = 0;
  while (!AtEnd() && IsDigit(Peek())) {
    v = std::min<uint64_t>(v * 10 + (Peek() - '0'), uint64_t{1} << 40);
    ++pos_;
  }
  return v;
}

absl::StatusOr<uint32_t> BnfParser::ParseEscape(bool in_class) {
  size_t start = pos_;
  ++pos_;  // the backslash
  if (AtEnd()) return Error(start, "unterminated escape");
  char c = Peek();
  ++pos_;
  auto hex = [&](int min_digits, int max_digits) -> absl::StatusOr<uint32_t> {
    uint64_t v = 0;
    int n = 0;
    while (n < max_digits && !AtEnd()) {
      char h = Peek();
      int d = IsDigit(h) ? h - '0'
              : (h >= 'a' && h <= 'f') ? h - 'a' + 10
              : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                       : -1;
      if (d < 0) break;
      v = std::min<uint64_t>(v * 16 + d, uint64_t{1} << 40);
      ++pos_;
      ++n;
    }
    if (n < min_digits) {
      return Error(start, min_digits == max_digits
                              ? absl::StrCat("bad escape: expecting ", min_digits, " hex digits")
                              : std::string("bad escape: expecting hex digits"));
    }
    if (v > kMaxCodepoint || (v >= 0xD800 && v <= 0xDFFF)) {
      return Error(start, absl::StrFormat("bad escape: U+%04X is not a Unicode scalar value", v));
    }
    return static_cast<uint32_t>(v);
  };
  if (dialect_ == Dialect::kGbnf) {
    switch (c) {
      case 'x': return hex(2, 2);
      case 'u': return hex(4, 4);
      case 'U': return hex(8, 8);
      case 't': return '\t';
      case 'r': return '\r';
      case 'n': return '\n';
      case '\\': case '"': case '[': case ']': return static_cast<uint32_t>(c);
      default: break;
    }
  } else {
    switch (c) {
      case 'x': return hex(1, 8);
      case 'u': return hex(4, 4);
      case 'U': return hex(8, 8);
      case '\'': case '"': case '?': case '\\': return static_cast<uint32_t>(c);
      case 'a': return '\a';
      case 'b': return '\b';
      case 'f': return '\f';
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case 'v': return '\v';
      case '0': return 0;
      case 'e': return 0x1B;
      default: break;
    }
    if (in_class) {
      if (std::string_view("^$.*+?()[]{}|/-").find(c) != std::string_view::npos) {
        return static_cast<uint32_t>(c);
      }
      if (std::string_view("dDsSwW").find(c) != std::string_view::npos) {
        return Error(start, absl::StrCat("class escape \\", std::string(1, c),
                                         " is not supported (write the range out)"));
      }
    }
  }
  std::string shown = (static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7F)
                          ? std::string(1, c)
                          : absl::StrCat("\\x", absl::Hex(static_cast<unsigned char>(c)));
  return Error(start, absl::StrCat("bad escape \\", shown));
}

absl::StatusOr<uint32_t> BnfParser::ParseCodepoint(bool in_class) {
  if (Peek() == '\\') return ParseEscape(in_class);
  size_t start = pos_;
  unsigned char b0 = static_cast<unsigned char>(Peek());
  int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || pos_ + len > text_.size()) return Error(start, "invalid UTF-8");
  uint32_t cp = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (int i = 1; i < len; ++i) {
    unsigned char b = static_cast<unsigned char>(text_[pos_ + i]);
    if ((b & 0xC0) != 0x80) return Error(start, "invalid UTF-8");
    cp = (cp << 6) | (b & 0x3F);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > kMaxCodepoint || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return Error(start, "invalid UTF-8");
  }
  pos_ += len;
  return cp;
}

absl::StatusOr<uint32_t> BnfParser::RuleId(std::string_view name, size_t offset) {
  auto it = rule_ids_.find(std::string(name));
  if (it != rule_ids_.end()) return it->second;
  if (g_.rules.size() >= limits_.max_rules) {
    return Exhausted(offset, absl::StrCat("more than ", limits_.max_rules, " rules (max_rules)"));
  }
  uint32_t id = static_cast<uint32_t>(g_.rules.size());
  Rule rule;
  rule.name = std::string(name);
  rule.where = PosAt(offset);
  g_.rules.push_back(std::move(rule));
  defined_at_.push_back(std::nullopt);
  first_use_.push_back(offset);
  rule_ids_.emplace(std::string(name), id);
  return id;
}

absl::StatusOr<uint32_t> BnfParser::NewHelperRule(std::vector<std::vector<Symbol>> alternatives,
                                                  size_t offset) {
  if (g_.rules.size() >= limits_.max_rules) {
    return Exhausted(offset, absl::StrCat("more than ", limits_.max_rules, " rules (max_rules)"));
  }
  uint32_t id = static_cast<uint32_t>(g_.rules.size());
  Rule rule;
  // EBNF names may contain '_': a helper's name may clash with a user rule
  // seen so far (skipped here) or defined later (renamed by Parse).
  uint32_t& n = helper_counts_[current_rule_];
  do {
    rule.name = absl::StrCat(current_rule_, "__", ++n);
  } while (rule_ids_.contains(rule.name));
  helper_.resize(id + 1, false);
  helper_[id] = true;
  rule.alternatives = std::move(alternatives);
  rule.where = PosAt(offset);
  g_.rules.push_back(std::move(rule));
  defined_at_.push_back(offset);
  first_use_.push_back(offset);
  return id;
}

absl::StatusOr<Item> BnfParser::TerminalItem(std::string name, std::string regex,
                                             std::optional<std::string> literal, bool repeatable,
                                             size_t offset) {
  Item item;
  item.kind = Item::Kind::kSymbol;
  item.offset = offset;
  auto it = terminal_ids_.find(regex);
  if (it != terminal_ids_.end()) {
    item.symbol = Symbol::Terminal(it->second);
    return item;
  }
  if (g_.terminals.size() >= limits_.max_terminals) {
    return Exhausted(offset,
                     absl::StrCat("more than ", limits_.max_terminals, " terminals (max_terminals)"));
  }
  uint32_t id = static_cast<uint32_t>(g_.terminals.size());
  Terminal t;
  t.name = std::move(name);
  t.regex = regex;
  t.literal = std::move(literal);
  t.where = PosAt(offset);
  g_.terminals.push_back(std::move(t));
  repeatable_.push_back(repeatable);
  terminal_ids_.emplace(std::move(regex), id);
  item.symbol = Symbol::Terminal(id);
  return item;
}

absl::StatusOr<Item> BnfParser::NeverItem(size_t offset) {
  if (!never_rule_) {
    std::string saved = current_rule_;
    current_rule_ = "__nothing";
    auto id = NewHelperRule({}, offset);
    current_rule_ = saved;
    if (!id.ok()) return id.status();
    never_rule_ = *id;
  }
  Item item;
  item.kind = Item::Kind::kSymbol;
  item.symbol = Symbol::Rule(*never_rule_);
  item.offset = offset;
  return item;
}

absl::StatusOr<Item> BnfParser::SetItem(const CodepointSet& set, std::string name, size_t offset) {
  if (set.empty()) return NeverItem(offset);
  std::optional<std::string> literal;
  const auto& r = set.ranges();
  if (r.size() == 1 && r[0].first == r[0].second) {
    literal.emplace();
    AppendUtf8(&*literal, r[0].first);
  }
  return TerminalItem(std::move(name), RegexForSet(set), std::move(literal), true, offset);
}

absl::StatusOr<std::optional<Symbol>> BnfParser::AsSymbol(Item item) {
  switch (item.kind) {
    case Item::Kind::kEmpty:
      return std::optional<Symbol>();
    case Item::Kind::kSymbol:
      return std::optional<Symbol>(item.symbol);
    case Item::Kind::kGroup:
      break;
  }
  if (item.alternatives.size() == 1) {
    const auto& only = item.alternatives[0];
    if (only.empty()) return std::optional<Symbol>();
    if (only.size() == 1) return std::optional<Symbol>(only[0]);
  }
  auto id = NewHelperRule(std::move(item.alternatives), item.offset);
  if (!id.ok()) return id.status();
  return std::optional<Symbol>(Symbol::Rule(*id));
}

absl::Status BnfParser::AppendItem(Item item, std::vector<Symbol>* seq) {
  if (item.kind == Item::Kind::kGroup && item.alternatives.size() == 1) {
    for (const Symbol& s : item.alternatives[0]) seq->push_back(s);
    return absl::OkStatus();
  }
  auto sym = AsSymbol(std::move(item));
  if (!sym.ok()) return sym.status();
  if (sym->has_value()) seq->push_back(**sym);
  return absl::OkStatus();
}

absl::StatusOr<Symbol> BnfParser::ExactCopies(Symbol x, uint64_t k, size_t offset,
                                              absl::flat_hash_map<uint64_t, Symbol>* memo) {
  if (k == 1) return x;
  if (auto it = memo->find(k); it != memo->end()) return it->second;
  // x{k} ::= x{floor(k/2)} x{ceil(k/2)}: O(log k) distinct helpers.
  auto a = ExactCopies(x, k / 2, offset, memo);
  if (!a.ok()) return a.status();
  auto b = ExactCopies(x, k - k / 2, offset, memo);
  if (!b.ok()) return b.status();
  auto id = NewHelperRule({{*a, *b}}, offset);
  if (!id.ok()) return id.status();
  memo->emplace(k, Symbol::Rule(*id));
  return Symbol::Rule(*id);
}

absl::StatusOr<Symbol> BnfParser::UpToCopies(Symbol x, uint64_t k, size_t offset,
                                             absl::flat_hash_map<uint64_t, Symbol>* memo) {
  if (auto it = memo->find(k); it != memo->end()) return it->second;
  absl::StatusOr<uint32_t> id;
  if (k == 1) {
    id = NewHelperRule({{x}, {}}, offset);
  } else {
    // At most k copies split as at most floor(k/2) then at most ceil(k/2).
    auto a = UpToCopies(x, k / 2, offset, memo);
    if (!a.ok()) return a.status();
    auto b = UpToCopies(x, k - k / 2, offset, memo);
    if (!b.ok()) return b.status();
    id = NewHelperRule({{*a, *b}}, offset);
  }
  if (!id.ok()) return id.status();
  memo->emplace(k, Symbol::Rule(*id));
  return Symbol::Rule(*id);
}

absl::StatusOr<Item> BnfParser::ApplyQuantifier(Item item, uint64_t min,
                                                std::optional<uint64_t> max, size_t offset) {
  uint64_t largest = std::max(min, max.value_or(0));
  if (largest > limits_.max_repeat) {
    return Exhausted(offset, absl::StrCat("repeat count ", largest, " is more than ",
                                          limits_.max_repeat, " (max_repeat)"));
  }
  if (max && *max < min) {
    return Error(offset, absl::StrCat("bad repeat range {", min, ",", *max, "}"));
  }
  size_t item_offset = item.offset;
  auto sym_or = AsSymbol(std::move(item));
  if (!sym_or.ok()) return sym_or.status();
  Item out;
  out.offset = item_offset;
  if (!sym_or->has_value() || (max && *max == 0)) return out;  // empty
  Symbol x = **sym_or;

  // A literal or class repeated: one terminal, the regex engine counts.
  if (x.is_terminal() && repeatable_[x.id] && largest <= RegexLimits{}.max_repeat) {
    const Terminal& t = g_.terminals[x.id];
    uint64_t lo = std::max<uint64_t>(min, 1);
    std::string count = !max ? (lo == 1 ? "+" : absl::StrCat("{", lo, ",}"))
                        : lo == *max ? absl::StrCat("{", lo, "}")
                                     : absl::StrCat("{", lo, ",", *max, "}");
    std::string regex = absl::StrCat("(?:", t.regex, ")", count);
    std::string name = absl::StrCat(t.name, count);
    std::optional<std::string> literal;
    if (t.literal && max && lo == *max) {
      literal.emplace();
      for (uint64_t i = 0; i < lo; ++i) *literal += *t.literal;
    }
    auto rep = TerminalItem(std::move(name), std::move(regex), std::move(literal), false, offset);
    if (!rep.ok()) return rep.status();
    rep->offset = item_offset;
    if (min >= 1) return rep;
    auto id = NewHelperRule({{rep->symbol}, {}}, offset);
    if (!id.ok()) return id.status();
    out.kind = Item::Kind::kSymbol;
    out.symbol = Symbol::Rule(*id);
    return out;
  }

  std::vector<Symbol> seq;
  if (min > 0) {
    if (min <= 4) {
      seq.assign(min, x);
    } else {
      absl::flat_hash_map<uint64_t, Symbol> memo;
      auto e = ExactCopies(x, min, offset, &memo);
      if (!e.ok()) return e.status();
      seq.push_back(*e);
    }
  }
  if (!max) {
    // x* ::= x* x | ""   (left recursion: constant Earley items per byte);
    // the helper's id is the next rule id.
    uint32_t id = static_cast<uint32_t>(g_.rules.size());
    auto made = NewHelperRule({{Symbol::Rule(id), x}, {}}, offset);
    if (!made.ok()) return made.status();
    seq.push_back(Symbol::Rule(id));
  } else if (*max > min) {
    absl::flat_hash_map<uint64_t, Symbol> memo;
    auto u = UpToCopies(x, *max - min, offset, &memo);
    if (!u.ok()) return u.status();
    seq.push_back(*u);
  }
  if (seq.size() == 1) {
    out.kind = Item::Kind::kSymbol;
    out.symbol = seq[0];
  } else {
    out.kind = Item::Kind::kGroup;
    out.alternatives.push_back(std::move(seq));
  }
  return out;
}

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
  std::string literal;
  for (uint32_t cp : cps) AppendUtf8(&literal, cp);
  return TerminalItem(std::string(text_.substr(start, pos_ - start)), RegexForString(cps),
                      std::move(literal), true, start);
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
  size_t start = pos_;
  char c = Peek();
  if (c == '"') return ParseLiteral();
  if (c == '[') return ParseClass();
  if (c == '.' && dialect_ == Dialect::kGbnf) {
    ++pos_;
    CodepointSet any;
    any.AddRange(0, 0xD7FF);
    any.AddRange(0xE000, kMaxCodepoint);
    return SetItem(any, ".", start);
  }
  if (c == '(') {
    if (dialect_ == Dialect::kEbnf && Peek(1) == '=') {
      return Error(start, "lookahead assertions (= ...) are not supported");
    }
    if (depth_ >= max_nesting_) {
      return Exhausted(start, absl::StrCat("groups nested more than ", max_nesting_,
                                           " deep (max_nesting)"));
    }
    ++depth_;
    ++pos_;
    SkipSpace(true);
    auto alts = ParseAlternates(/*nested=*/true);
    if (!alts.ok()) return alts.status();
    if (AtEnd()) return Error(start, "unterminated group: expecting ')'");
    if (Peek() != ')') {
      return Error(pos_, absl::StrCat("expecting ')' to close the group at ", PosAt(start).line,
                                      ":", PosAt(start).column));
    }
    ++pos_;
    --depth_;
    Item item;
    item.kind = Item::Kind::kGroup;
    item.alternatives = std::move(*alts);
    item.offset = start;
    return item;
  }
  if (IsNameChar(c, true)) {
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
  if (dialect_ == Dialect::kGbnf && (c == '<' || c == '!')) {
    return Error(start, "token references (<...>, !<...>) are not supported");
  }
  if (static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7F) {
    return Error(start, absl::StrCat("unexpected '", std::string(1, c), "'"));
  }
  return Error(start, absl::StrCat("unexpected byte 0x", absl::Hex(static_cast<unsigned char>(c))));
}

absl::StatusOr<std::vector<Symbol>> BnfParser::ParseSequence(bool nested) {
  std::vector<Symbol> seq;
  std::optional<Item> last;
  const bool skip_newlines = SkipsNewlines(nested);
  while (!AtEnd()) {
    char c = Peek();
    if (c == '\n' || c == '\r' || c == '|' || c == ')') break;
    if (dialect_ == Dialect::kEbnf && AtRuleDefinition()) {
      if (text_.substr(last_token_end_, pos_ - last_token_end_).find('\n') ==
          std::string_view::npos) {
        return Error(pos_, "a rule definition must start a line");
      }
      break;
    }
    size_t op = pos_;
    if (c == '*' || c == '+' || c == '?' || c == '{') {
      if (!last) {
        return Error(op, absl::StrCat("expecting an item before '", std::string(1, c), "'"));
      }
      uint64_t min = 0;
      std::optional<uint64_t> max;
      ++pos_;
      if (c == '+') {
        min = 1;
      } else if (c == '?') {
        max = 1;
      } else if (c == '{') {
        SkipSpace(skip_newlines);
        auto m = ParseCount();
        if (!m.ok()) return m.status();
        min = *m;
        SkipSpace(skip_newlines);
        if (Peek() == '}') {
          max = min;
        } else if (Peek() == ',') {
          ++pos_;
          SkipSpace(skip_newlines);
          if (IsDigit(Peek())) {
            auto n = ParseCount();
            if (!n.ok()) return n.status();
            max = *n;
            SkipSpace(skip_newlines);
          }
          if (Peek() != '}') return Error(pos_, "expecting '}'");
        } else {
          return Error(pos_, "expecting ',' or '}'");
        }
        ++pos_;
      }
      auto q = ApplyQuantifier(std::move(*last), min, max, op);
      if (!q.ok()) return q.status();
      last = std::move(*q);
      last_token_end_ = pos_;
      SkipSpace(skip_newlines);
      if (dialect_ == Dialect::kEbnf && !AtEnd() &&
          (Peek() == '*' || Peek() == '+' || Peek() == '?' || Peek() == '{')) {
        return Error(pos_, absl::StrCat("unexpected '", std::string(1, Peek()),
                                        "' (one operator per item)"));
      }
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

}  // namespace

absl::StatusOr<Grammar> ParseGbnf(std::string_view text, const GrammarLimits& limits) {
  return BnfParser(text, Dialect::kGbnf, limits).Parse();
}

absl::StatusOr<Grammar> ParseXgrammarEbnf(std::string_view text, const GrammarLimits& limits) {
  return BnfParser(text, Dialect::kEbnf, limits).Parse();
}

}  // namespace maskd::grammar
