#include "grammar/regular_rules.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "automaton/regex.h"
#include "grammar/deferred_dfa.h"
#include "grammar/regex_language.h"

namespace maskd::grammar {
namespace {

std::string Group(const std::string& regex) { return absl::StrCat("(?:", regex, ")"); }

// "(?:a|b|c)" over the alternatives' regexes; "" when there are none.
std::string Alternation(const std::vector<std::string>& alts) {
  if (alts.empty()) return "";
  std::string out = "(?:";
  for (size_t i = 0; i < alts.size(); ++i) {
    if (i > 0) out += "|";
    out += alts[i];
  }
  out += ")";
  return out;
}

// Lazy mode: whether `regex` is within max_terminal_nodes and not
// PresumedOverStateLimit, matches a non-empty string, and is a terminal
// CompiledGrammar defers (DeferrableTerminal: no limit can refuse its DFA),
// decided on its tree without building the DFA.
bool DeferrableWithinCaps(const std::string& regex, const InlineOptions& options) {
  auto re = Regex::Parse(regex, options.regex_limits);
  if (!re.ok()) return false;
  const size_t nodes = re->expanded_size();
  if (options.max_terminal_nodes != 0 && nodes > options.max_terminal_nodes) return false;
  if (PresumedOverStateLimit(nodes, options.dfa_options)) return false;
  const RegexLanguage language = AnalyzeRegex(re->root());
  return language.non_empty && DeferrableTerminal(language, options.dfa_options);
}

// Whether `regex` is within max_terminal_nodes, and its DFA compiles and
// matches a non-empty string (every live state reaches acceptance, so any
// live successor of the start will do). A regex PresumedOverStateLimit is
// not tried: a merged terminal is only an optimization, and the rules
// around a large one would each fail too. In lazy mode a terminal whose
// DFA CompiledGrammar builds late is not built here either.
bool UsableTerminal(const std::string& regex, const InlineOptions& options) {
  if (options.mode == TerminalMode::kLazy && DeferrableWithinCaps(regex, options)) return true;
  auto dfa = TerminalDfa(options.dfas, regex, options.regex_limits, options.dfa_options,
                         options.mode, /*presume=*/true, options.max_terminal_nodes);
  if (!dfa.ok()) return false;
  const RefusalWatch watch;  // a lazy DFA over its limit already: keep the rule
  return MatchesNonEmptyString(**dfa) && !watch.refused();
}

// Rules in dependency order (Kahn's algorithm over references to other
// rules, self-references aside); a rule in or above a cycle is left out.
std::vector<uint32_t> DependencyOrder(const Grammar& g) {
  const size_t n = g.rules.size();
  std::vector<std::vector<uint32_t>> users(n);
  std::vector<uint32_t> pending(n, 0);
  for (uint32_t r = 0; r < n; ++r) {
    std::vector<uint32_t> deps;
    for (const auto& alt : g.rules[r].alternatives) {
      for (const Symbol& s : alt) {
        if (!s.is_terminal() && s.id != r) deps.push_back(s.id);
      }
    }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    pending[r] = static_cast<uint32_t>(deps.size());
    for (uint32_t d : deps) users[d].push_back(r);
  }
  std::deque<uint32_t> ready;
  for (uint32_t r = 0; r < n; ++r) {
    if (pending[r] == 0) ready.push_back(r);
  }
  std::vector<uint32_t> order;
  while (!ready.empty()) {
    const uint32_t r = ready.front();
    ready.pop_front();
    order.push_back(r);
    for (uint32_t u : users[r]) {
      if (--pending[u] == 0) ready.push_back(u);
    }
  }
  return order;
}

// Per rule of a grammar: whether it is regular, and if so its language as a
// regex (within max_regex_bytes).
struct RegularRules {
  std::vector<bool> regular;
  std::vector<std::string> regex;
};

// The regex of rule r when each alternative uses only terminals, rules
// already known regular, and r itself first or last (a R | b | R c is
// a* b c*); nullopt when r is not regular so.
std::optional<std::string> RuleRegex(const Grammar& g, uint32_t r, const RegularRules& known) {
  auto piece = [&](const Symbol& s) {
    return s.is_terminal() ? Group(g.terminals[s.id].regex) : Group(known.regex[s.id]);
  };
  const Symbol self = Symbol::Rule(r);
  std::vector<std::string> heads, bases, tails;  // a R | b | R c
  for (const auto& alt : g.rules[r].alternatives) {
    size_t begin = 0, end = alt.size();
    std::vector<std::string>* into = &bases;
    if (alt.size() == 1 && alt[0] == self) continue;  // R ::= R adds nothing
    if (!alt.empty() && alt.back() == self) {
      into = &heads;
      --end;
    } else if (!alt.empty() && alt.front() == self) {
      into = &tails;
      ++begin;
    }
    std::string seq;
    for (size_t i = begin; i < end; ++i) {
      if (alt[i] == self || (!alt[i].is_terminal() && !known.regular[alt[i].id])) {
        return std::nullopt;
      }
      seq += piece(alt[i]);
    }
    into->push_back(seq.empty() ? "(?:)" : std::move(seq));
  }
  if (bases.empty()) return std::nullopt;
  std::string out = Alternation(bases);
  if (!heads.empty()) out = absl::StrCat(Alternation(heads), "*", out);
  if (!tails.empty()) absl::StrAppend(&out, Alternation(tails), "*");
  return out;
}

RegularRules FindRegularRules(const Grammar& g, const InlineOptions& options) {
  RegularRules rules;
  rules.regular.assign(g.rules.size(), false);
  rules.regex.resize(g.rules.size());
  for (uint32_t r : DependencyOrder(g)) {
    std::optional<std::string> regex = RuleRegex(g, r, rules);
    if (!regex || regex->size() > options.max_regex_bytes) continue;
    rules.regular[r] = true;
    rules.regex[r] = std::move(*regex);
  }
  return rules;
}

// Which regular rules become terminals: those referenced from a non-regular
// rule (or the start). One whose regex is not a usable terminal stops being
// regular (it stays a rule, which exposes its own children), and the choice
// starts over.
std::vector<bool> ChooseTerminals(const Grammar& g, const InlineOptions& options,
                                  RegularRules* rules) {
  const size_t n = g.rules.size();
  std::vector<bool>& regular = rules->regular;
  std::vector<bool> is_terminal(n, false);
  // A rule's regex is fixed, so is its verdict: tried once however often
  // the choice starts over.
  std::vector<int8_t> usable(n, -1);
  for (bool changed = true; changed;) {
    changed = false;
    std::vector<bool> wanted(n, false);
    if (regular[g.start]) wanted[g.start] = true;
    for (uint32_t r = 0; r < n; ++r) {
      if (regular[r]) continue;
      for (const auto& alt : g.rules[r].alternatives) {
        for (const Symbol& s : alt) {
          if (!s.is_terminal() && regular[s.id]) wanted[s.id] = true;
        }
      }
    }
    for (uint32_t r = 0; r < n; ++r) {
      if (!wanted[r] || is_terminal[r]) continue;
      if (usable[r] < 0) usable[r] = UsableTerminal(rules->regex[r], options);
      if (usable[r]) {
        is_terminal[r] = true;
      } else {
        regular[r] = false;
        changed = true;
      }
    }
    if (changed) std::fill(is_terminal.begin(), is_terminal.end(), false);
  }
  return is_terminal;
}

// `g` with the chosen regular rules as terminals (appended after g's) and
// the other regular rules gone; the rest keep their order.
Grammar Rewrite(const Grammar& g, const RegularRules& rules, const std::vector<bool>& is_terminal) {
  const size_t n = g.rules.size();
  const std::vector<bool>& regular = rules.regular;
  Grammar out;
  out.terminals = g.terminals;
  std::vector<uint32_t> terminal_of(n, 0), rule_of(n, 0);
  for (uint32_t r = 0; r < n; ++r) {
    if (is_terminal[r]) {
      terminal_of[r] = static_cast<uint32_t>(out.terminals.size());
      Terminal t;
      t.name = g.rules[r].name;
      t.regex = rules.regex[r];
      t.where = g.rules[r].where;
      out.terminals.push_back(std::move(t));
    }
    if (!regular[r]) {
      rule_of[r] = static_cast<uint32_t>(out.rules.size());
      out.rules.push_back(Rule{g.rules[r].name, {}, g.rules[r].where});
    }
  }
  auto map = [&](const Symbol& s) {
    if (s.is_terminal()) return s;
    return regular[s.id] ? Symbol::Terminal(terminal_of[s.id]) : Symbol::Rule(rule_of[s.id]);
  };
  for (uint32_t r = 0; r < n; ++r) {
    if (regular[r]) continue;
    for (const auto& alt : g.rules[r].alternatives) {
      std::vector<Symbol> mapped;
      for (const Symbol& s : alt) mapped.push_back(map(s));
      out.rules[rule_of[r]].alternatives.push_back(std::move(mapped));
    }
  }
  if (regular[g.start]) {
    out.start = static_cast<uint32_t>(out.rules.size());
    out.rules.push_back(Rule{g.rules[g.start].name, {{Symbol::Terminal(terminal_of[g.start])}},
                             g.rules[g.start].where});
  } else {
    out.start = rule_of[g.start];
  }
  return out;
}

}  // namespace

Grammar InlineRegularRules(const Grammar& g, const InlineOptions& options) {
  if (!g.ignore.empty()) return g;
  RegularRules rules = FindRegularRules(g, options);
  const std::vector<bool> is_terminal = ChooseTerminals(g, options, &rules);
  return Rewrite(g, rules, is_terminal);
}

}  // namespace maskd::grammar
