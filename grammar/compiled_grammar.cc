#include "grammar/compiled_grammar.h"

#include <functional>
#include <queue>
#include <string>
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
  if (dfa.lazy() || n > CompiledGrammar::kMaxClosedCheckStates) return false;
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
    const Grammar& g, const RegexLimits& regex_limits, const DfaOptions& dfa_options,
    TerminalDfas* dfas, TerminalMode mode) {
  // The terminals' own invariant is checked on their DFAs below.
  if (absl::Status valid = ValidateRules(g); !valid.ok()) return valid;
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
    const std::string where = absl::StrCat("terminal '", t.name, "' (line ", t.where.line,
                                           ", column ", t.where.column, ")");
    auto dfa = TerminalDfa(dfas, t.regex, regex_limits, dfa_options, mode);
    if (!dfa.ok()) {
      return absl::Status(dfa.status().code(),
                          absl::StrCat(where, ": ", dfa.status().message()));
    }
    const RefusalWatch watch;  // a lazy DFA's start row may need states past its limit
    const bool matches = MatchesNonEmptyString(**dfa);
    if (watch.refused()) {
      return absl::ResourceExhaustedError(
          absl::StrCat(where, ": ", (*dfa)->StateLimitError().message()));
    }
    if (!matches) {
      return absl::InvalidArgumentError(absl::StrCat(where, " matches no non-empty string"));
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
  c->ComputeMinLengths();
  return std::shared_ptr<const CompiledGrammar>(std::move(c));
}

// Knuth's generalization of Dijkstra's algorithm: a rule's shortest string is
// final when it is the smallest candidate left; a production becomes a
// candidate for its rule once every rule it uses is final. Validate's
// invariant (every rule derives a string) makes every rule final at the end.
void CompiledGrammar::ComputeMinLengths() {
  const size_t np = productions_.size();
  std::vector<uint64_t> terminal_min(dfas_.size());
  for (size_t t = 0; t < dfas_.size(); ++t) terminal_min[t] = dfas_[t]->DistanceToAccept(dfas_[t]->start());
  std::vector<uint64_t> partial(np, 0);    // the sum of its final symbols so far
  std::vector<uint32_t> pending(np, 0);    // rule occurrences not yet final
  std::vector<std::vector<uint32_t>> uses(rule_productions_.size());  // rule -> productions, per occurrence
  using Candidate = std::pair<uint64_t, uint32_t>;  // (length, rule)
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  for (uint32_t p = 0; p < np; ++p) {
    for (const Symbol& s : productions_[p].rhs) {
      if (s.is_terminal()) {
        partial[p] = SaturatingAdd(partial[p], terminal_min[s.id]);
      } else {
        ++pending[p];
        uses[s.id].push_back(p);
      }
    }
    if (pending[p] == 0) queue.push({partial[p], productions_[p].rule});
  }
  rule_min_.assign(rule_productions_.size(), kNoLength);
  while (!queue.empty()) {
    const auto [len, r] = queue.top();
    queue.pop();
    if (rule_min_[r] != kNoLength) continue;
    rule_min_[r] = len;
    for (uint32_t p : uses[r]) {
      partial[p] = SaturatingAdd(partial[p], len);
      if (--pending[p] == 0) queue.push({partial[p], productions_[p].rule});
    }
  }
  suffix_begin_.resize(np + 1);
  suffix_min_.clear();
  for (uint32_t p = 0; p < np; ++p) {
    const std::vector<Symbol>& rhs = productions_[p].rhs;
    suffix_begin_[p] = suffix_min_.size();
    suffix_min_.resize(suffix_min_.size() + rhs.size() + 1);
    uint64_t* out = &suffix_min_[suffix_begin_[p]];
    out[rhs.size()] = 0;
    for (size_t k = rhs.size(); k-- > 0;) {
      const Symbol& s = rhs[k];
      out[k] = SaturatingAdd(out[k + 1], s.is_terminal() ? terminal_min[s.id] : rule_min_[s.id]);
    }
  }
  suffix_begin_[np] = suffix_min_.size();
}

}  // namespace maskd::grammar
