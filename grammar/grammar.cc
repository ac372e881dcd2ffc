#include "grammar/grammar.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "automaton/regex.h"
#include "grammar/regex_language.h"

namespace maskd::grammar {
namespace {

std::string Where(const SourcePos& p) {
  return absl::StrCat("line ", p.line, ", column ", p.column);
}

// Which rules derive at least one string, given that every terminal does:
// the least fixpoint of "some alternative has only productive symbols".
std::vector<bool> ProductiveRules(const Grammar& g) {
  std::vector<bool> productive(g.rules.size(), false);
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t r = 0; r < g.rules.size(); ++r) {
      if (productive[r]) continue;
      for (const auto& alt : g.rules[r].alternatives) {
        bool all = true;
        for (const Symbol& s : alt) {
          if (!s.is_terminal() && !productive[s.id]) {
            all = false;
            break;
          }
        }
        if (all) {
          productive[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return productive;
}

// Rules reachable from `start` through the alternatives.
std::vector<bool> ReachableRules(const Grammar& g) {
  std::vector<bool> reached(g.rules.size(), false);
  std::vector<uint32_t> stack = {g.start};
  reached[g.start] = true;
  while (!stack.empty()) {
    uint32_t r = stack.back();
    stack.pop_back();
    for (const auto& alt : g.rules[r].alternatives) {
      for (const Symbol& s : alt) {
        if (!s.is_terminal() && !reached[s.id]) {
          reached[s.id] = true;
          stack.push_back(s.id);
        }
      }
    }
  }
  return reached;
}

std::string SymbolText(const Grammar& g, const Symbol& s) {
  if (s.is_terminal()) return g.terminals[s.id].name;
  return g.rules[s.id].name;
}

}  // namespace

absl::Status Normalize(Grammar* g) {
  if (g->start >= g->rules.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("start rule id ", g->start, " is out of range (", g->rules.size(), " rules)"));
  }
  for (const Rule& rule : g->rules) {
    for (const auto& alt : rule.alternatives) {
      for (const Symbol& s : alt) {
        size_t bound = s.is_terminal() ? g->terminals.size() : g->rules.size();
        if (s.id >= bound) {
          return absl::InvalidArgumentError(
              absl::StrCat("rule '", rule.name, "' (", Where(rule.where), ") uses ",
                           s.is_terminal() ? "terminal" : "rule", " id ", s.id, ", out of range"));
        }
      }
    }
  }
  std::vector<bool> productive = ProductiveRules(*g);
  if (!productive[g->start]) {
    const Rule& start = g->rules[g->start];
    return absl::InvalidArgumentError(absl::StrCat("rule '", start.name, "' (", Where(start.where),
                                                   ") derives no string"));
  }
  for (Rule& rule : g->rules) {
    std::vector<std::vector<Symbol>> kept;
    for (auto& alt : rule.alternatives) {
      bool ok = true;
      for (const Symbol& s : alt) {
        if (!s.is_terminal() && !productive[s.id]) {
          ok = false;
          break;
        }
      }
      if (ok) kept.push_back(std::move(alt));
    }
    rule.alternatives = std::move(kept);
  }
  std::vector<bool> reached = ReachableRules(*g);
  std::vector<uint32_t> new_id(g->rules.size(), 0);
  std::vector<Rule> rules;
  for (size_t r = 0; r < g->rules.size(); ++r) {
    if (!reached[r]) continue;
    new_id[r] = static_cast<uint32_t>(rules.size());
    rules.push_back(std::move(g->rules[r]));
  }
  for (Rule& rule : rules) {
    for (auto& alt : rule.alternatives) {
      for (Symbol& s : alt) {
        if (!s.is_terminal()) s.id = new_id[s.id];
      }
    }
  }
  g->start = new_id[g->start];
  g->rules = std::move(rules);
  return absl::OkStatus();
}

absl::Status ValidateRules(const Grammar& g) {
  if (g.start >= g.rules.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("start rule id ", g.start, " is out of range (", g.rules.size(), " rules)"));
  }
  for (const Rule& rule : g.rules) {
    for (const auto& alt : rule.alternatives) {
      for (const Symbol& s : alt) {
        size_t bound = s.is_terminal() ? g.terminals.size() : g.rules.size();
        if (s.id >= bound) {
          return absl::InvalidArgumentError(
              absl::StrCat("rule '", rule.name, "' (", Where(rule.where), ") uses ",
                           s.is_terminal() ? "terminal" : "rule", " id ", s.id, ", out of range"));
        }
      }
    }
  }
  for (uint32_t t : g.ignore) {
    if (t >= g.terminals.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ignored terminal id ", t, " is out of range (", g.terminals.size(),
                       " terminals)"));
    }
  }
  std::vector<bool> productive = ProductiveRules(g);
  std::vector<bool> reached = ReachableRules(g);
  for (const Rule& rule : g.rules) {
    size_t r = &rule - g.rules.data();
    if (!productive[r]) {
      return absl::InvalidArgumentError(
          absl::StrCat("rule '", rule.name, "' (", Where(rule.where), ") derives no string"));
    }
    if (!reached[r]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rule '", rule.name, "' (", Where(rule.where), ") is unreachable from the start rule"));
    }
  }
  return absl::OkStatus();
}

absl::Status Validate(const Grammar& g) {
  if (absl::Status rules = ValidateRules(g); !rules.ok()) return rules;
  for (const Terminal& t : g.terminals) {
    auto re = Regex::Parse(t.regex);
    if (!re.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("terminal '", t.name, "' (", Where(t.where),
                                                     "): ", re.status().message()));
    }
    if (!AnalyzeRegex(re->root()).non_empty) {
      return absl::InvalidArgumentError(absl::StrCat(
          "terminal '", t.name, "' (", Where(t.where), ") matches no non-empty string"));
    }
  }
  return absl::OkStatus();
}

std::string ToText(const Grammar& g) {
  std::string out;
  if (g.start < g.rules.size()) absl::StrAppend(&out, "%start ", g.rules[g.start].name, "\n");
  for (const Rule& rule : g.rules) {
    std::vector<std::string> alts;
    for (const auto& alt : rule.alternatives) {
      if (alt.empty()) {
        alts.push_back("\"\"");
        continue;
      }
      std::vector<std::string> syms;
      for (const Symbol& s : alt) {
        bool in_range = s.id < (s.is_terminal() ? g.terminals.size() : g.rules.size());
        syms.push_back(in_range ? SymbolText(g, s)
                                : absl::StrCat(s.is_terminal() ? "<terminal " : "<rule ", s.id, ">"));
      }
      alts.push_back(absl::StrJoin(syms, " "));
    }
    absl::StrAppend(&out, rule.name, " ::= ", absl::StrJoin(alts, " | "), "\n");
  }
  for (const Terminal& t : g.terminals) {
    absl::StrAppend(&out, "%terminal ", t.name, " = /", t.regex, "/");
    if (t.priority != 0) absl::StrAppend(&out, " priority ", t.priority);
    absl::StrAppend(&out, "\n");
  }
  for (uint32_t t : g.ignore) {
    absl::StrAppend(&out, "%ignore ",
                    t < g.terminals.size() ? g.terminals[t].name : absl::StrCat("<terminal ", t, ">"),
                    "\n");
  }
  return out;
}

}  // namespace maskd::grammar
