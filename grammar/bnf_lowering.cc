// The building half of the BNF front ends: terminals (one per distinct
// regex), helper rules for groups and operators, and the regex text of
// literals and classes.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "automaton/regex.h"
#include "automaton/regex_text.h"
#include "automaton/utf8.h"
#include "grammar/bnf_internal.h"

namespace maskd::grammar::bnf_internal {
namespace {

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

}  // namespace

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

absl::StatusOr<Item> BnfParser::LiteralItem(const std::vector<uint32_t>& cps, std::string name,
                                            size_t offset) {
  std::string literal;
  for (uint32_t cp : cps) AppendUtf8(&literal, cp);
  return TerminalItem(std::move(name), RegexForString(cps), std::move(literal), true, offset);
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


absl::StatusOr<Item> BnfParser::ApplyQuantifier(Item item, Quantifier q, size_t offset) {
  uint64_t largest = std::max(q.min, q.max.value_or(0));
  if (largest > limits_.max_repeat) {
    return Exhausted(offset, absl::StrCat("repeat count ", largest, " is more than ",
                                          limits_.max_repeat, " (max_repeat)"));
  }
  if (q.max && *q.max < q.min) {
    return Error(offset, absl::StrCat("bad repeat range {", q.min, ",", *q.max, "}"));
  }
  size_t item_offset = item.offset;
  auto sym_or = AsSymbol(std::move(item));
  if (!sym_or.ok()) return sym_or.status();
  if (!sym_or->has_value() || (q.max && *q.max == 0)) {
    Item empty;
    empty.offset = item_offset;
    return empty;
  }
  Symbol x = **sym_or;
  // A literal or class repeated: one terminal, the regex engine counts.
  if (x.is_terminal() && repeatable_[x.id] && largest <= RegexLimits{}.max_repeat) {
    return RepeatedTerminal(x, q, item_offset, offset);
  }
  return RepeatedSymbol(x, q, item_offset, offset);
}

absl::StatusOr<Item> BnfParser::RepeatedTerminal(Symbol x, Quantifier q, size_t item_offset,
                                                 size_t offset) {
  const Terminal& t = g_.terminals[x.id];
  uint64_t lo = std::max<uint64_t>(q.min, 1);
  std::string count = !q.max      ? (lo == 1 ? "+" : absl::StrCat("{", lo, ",}"))
                      : lo == *q.max ? absl::StrCat("{", lo, "}")
                                     : absl::StrCat("{", lo, ",", *q.max, "}");
  std::string regex = absl::StrCat("(?:", t.regex, ")", count);
  std::string name = absl::StrCat(t.name, count);
  std::optional<std::string> literal;
  if (t.literal && q.max && lo == *q.max) {
    literal.emplace();
    for (uint64_t i = 0; i < lo; ++i) *literal += *t.literal;
  }
  auto rep = TerminalItem(std::move(name), std::move(regex), std::move(literal), false, offset);
  if (!rep.ok()) return rep.status();
  rep->offset = item_offset;
  if (q.min >= 1) return rep;
  auto id = NewHelperRule({{rep->symbol}, {}}, offset);
  if (!id.ok()) return id.status();
  Item out;
  out.offset = item_offset;
  out.kind = Item::Kind::kSymbol;
  out.symbol = Symbol::Rule(*id);
  return out;
}

absl::StatusOr<Item> BnfParser::RepeatedSymbol(Symbol x, Quantifier q, size_t item_offset,
                                               size_t offset) {
  std::vector<Symbol> seq;
  if (q.min > 0) {
    if (q.min <= 4) {
      seq.assign(q.min, x);
    } else {
      absl::flat_hash_map<uint64_t, Symbol> memo;
      auto e = ExactCopies(x, q.min, offset, &memo);
      if (!e.ok()) return e.status();
      seq.push_back(*e);
    }
  }
  if (!q.max) {
    // x* ::= x* x | ""   (left recursion: constant Earley items per byte);
    // the helper's id is the next rule id.
    uint32_t id = static_cast<uint32_t>(g_.rules.size());
    auto made = NewHelperRule({{Symbol::Rule(id), x}, {}}, offset);
    if (!made.ok()) return made.status();
    seq.push_back(Symbol::Rule(id));
  } else if (*q.max > q.min) {
    absl::flat_hash_map<uint64_t, Symbol> memo;
    auto u = UpToCopies(x, *q.max - q.min, offset, &memo);
    if (!u.ok()) return u.status();
    seq.push_back(*u);
  }
  Item out;
  out.offset = item_offset;
  if (seq.size() == 1) {
    out.kind = Item::Kind::kSymbol;
    out.symbol = seq[0];
  } else {
    out.kind = Item::Kind::kGroup;
    out.alternatives.push_back(std::move(seq));
  }
  return out;
}

}  // namespace maskd::grammar::bnf_internal
