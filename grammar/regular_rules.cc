#include "grammar/regular_rules.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

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

// Whether the DFA of `regex` compiles and matches a non-empty string (every
// live state reaches acceptance, so any live successor of the start will do).
bool UsableTerminal(const std::string& regex, const InlineOptions& options) {
  auto dfa = Dfa::FromPattern(regex, options.regex_limits, options.dfa_options);
  if (!dfa.ok()) return false;
  for (int b = 0; b < 256; ++b) {
    if ((*dfa)->Next((*dfa)->start(), static_cast<uint8_t>(b)) != Dfa::kDead) return true;
  }
  return false;
}

}  // namespace

Grammar InlineRegularRules(const Grammar& g, const InlineOptions& options) {
  if (!g.ignore.empty()) return g;
  const size_t n = g.rules.size();

  // Rules in dependency order (Kahn's algorithm over references to other
  // rules); a rule never reached is in or above a cycle: not regular.
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
  std::vector<bool> regular(n, false);
  std::vector<std::string> regex(n);
  auto piece = [&](const Symbol& s) {
    return s.is_terminal() ? Group(g.terminals[s.id].regex) : Group(regex[s.id]);
  };
  while (!ready.empty()) {
    const uint32_t r = ready.front();
    ready.pop_front();
    for (uint32_t u : users[r]) {
      if (--pending[u] == 0) ready.push_back(u);
    }
    bool ok = true;
    std::vector<std::string> heads, bases, tails;  // a R | b | R c
    for (const auto& alt : g.rules[r].alternatives) {
      size_t begin = 0, end = alt.size();
      std::vector<std::string>* into = &bases;
      const Symbol self = Symbol::Rule(r);
      if (alt.size() == 1 && alt[0] == self) continue;  // R ::= R adds nothing
      if (!alt.empty() && alt.back() == self) {
        into = &heads;
        --end;
      } else if (!alt.empty() && alt.front() == self) {
        into = &tails;
        ++begin;
      }
      std::string seq;
      for (size_t i = begin; i < end && ok; ++i) {
        if (alt[i] == self || (!alt[i].is_terminal() && !regular[alt[i].id])) ok = false;
        else seq += piece(alt[i]);
      }
      if (!ok) break;
      into->push_back(seq.empty() ? "(?:)" : std::move(seq));
    }
    if (!ok || bases.empty()) continue;
    std::string out = Alternation(bases);
    if (!heads.empty()) out = absl::StrCat(Alternation(heads), "*", out);
    if (!tails.empty()) absl::StrAppend(&out, Alternation(tails), "*");
    if (out.size() > options.max_regex_bytes) continue;
    regular[r] = true;
    regex[r] = std::move(out);
  }

  // Regular rules referenced from a non-regular rule (or the start) become
  // terminals; one that cannot stays a rule, which exposes its own children.
  std::vector<bool> is_terminal(n, false);
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
      if (UsableTerminal(regex[r], options)) {
        is_terminal[r] = true;
      } else {
        regular[r] = false;
        changed = true;
      }
    }
    if (changed) std::fill(is_terminal.begin(), is_terminal.end(), false);
  }

  Grammar out;
  out.terminals = g.terminals;
  std::vector<uint32_t> terminal_of(n, 0), rule_of(n, 0);
  for (uint32_t r = 0; r < n; ++r) {
    if (is_terminal[r]) {
      terminal_of[r] = static_cast<uint32_t>(out.terminals.size());
      Terminal t;
      t.name = g.rules[r].name;
      t.regex = regex[r];
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

}  // namespace maskd::grammar
