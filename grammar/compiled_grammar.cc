#include "grammar/compiled_grammar.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace maskd::grammar {
namespace {

// L L within L: from every accepting state a, every string of L must lead to
// an accepting state, and every prefix of one to a live state. A search over
// the pairs (state reached from a, state reached from the start) on the
// same bytes finds a counterexample if there is one.
bool ConcatClosed(const Dfa& dfa) {
  const uint32_t n = dfa.num_states();
  if (n > CompiledGrammar::kMaxClosedCheckStates) return false;
  std::vector<bool> seen(static_cast<size_t>(n) * n, false);
  std::vector<std::pair<uint32_t, uint32_t>> stack;
  for (uint32_t a = 1; a < n; ++a) {
    if (!dfa.IsAccepting(a)) continue;
    stack.push_back({a, dfa.start()});
    seen[static_cast<size_t>(a) * n + dfa.start()] = true;
  }
  while (!stack.empty()) {
    const auto [x, y] = stack.back();
    stack.pop_back();
    if (x == Dfa::kDead || (dfa.IsAccepting(y) && !dfa.IsAccepting(x))) return false;
    for (int b = 0; b < 256; ++b) {
      const uint32_t ny = dfa.Next(y, static_cast<uint8_t>(b));
      if (ny == Dfa::kDead) continue;
      const uint32_t nx = dfa.Next(x, static_cast<uint8_t>(b));
      const size_t key = static_cast<size_t>(nx) * n + ny;
      if (!seen[key]) {
        seen[key] = true;
        stack.push_back({nx, ny});
      }
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::Create(
    const Grammar& g, const RegexLimits& regex_limits, const DfaOptions& dfa_options) {
  absl::Status valid = Validate(g);
  if (!valid.ok()) return valid;
  if (g.rules.size() >= (1u << 30) || g.terminals.size() >= (1u << 30)) {
    return absl::ResourceExhaustedError("grammar has more than 2^30 rules or terminals");
  }
  std::shared_ptr<CompiledGrammar> c(new CompiledGrammar());
  c->start_ = g.start;
  c->ignore_ = g.ignore;
  c->rule_productions_.resize(g.rules.size());
  for (uint32_t id = 0; id < g.rules.size(); ++id) {
    for (const auto& alt : g.rules[id].alternatives) {
      c->rule_productions_[id].push_back(static_cast<uint32_t>(c->productions_.size()));
      c->productions_.push_back({id, alt});
    }
  }
  if (c->productions_.size() >= (1u << 30)) {
    return absl::ResourceExhaustedError("grammar has more than 2^30 alternatives");
  }
  for (const Terminal& t : g.terminals) {
    auto dfa = Dfa::FromPattern(t.regex, regex_limits, dfa_options);
    if (!dfa.ok()) {
      return absl::Status(dfa.status().code(),
                          absl::StrCat("terminal '", t.name, "' (line ", t.where.line, ", column ",
                                       t.where.column, "): ", dfa.status().message()));
    }
    c->nullable_terminal_.push_back((*dfa)->IsAccepting((*dfa)->start()));
    c->concat_closed_.push_back(ConcatClosed(**dfa));
    c->dfas_.push_back(std::move(*dfa));
  }
  c->nullable_rule_.assign(g.rules.size(), false);
  bool changed = true;
  while (changed) {
    changed = false;
    for (const Production& p : c->productions_) {
      if (c->nullable_rule_[p.rule]) continue;
      bool all = true;
      for (const Symbol& s : p.rhs) {
        if (s.is_terminal() ? !c->nullable_terminal_[s.id] : !c->nullable_rule_[s.id]) {
          all = false;
          break;
        }
      }
      if (all) {
        c->nullable_rule_[p.rule] = true;
        changed = true;
      }
    }
  }
  return std::shared_ptr<const CompiledGrammar>(std::move(c));
}

}  // namespace maskd::grammar
