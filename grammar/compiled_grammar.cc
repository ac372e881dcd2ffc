#include "grammar/compiled_grammar.h"

#include <functional>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grammar/regex_language.h"

namespace maskd::grammar {

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::Create(
    const Grammar& g, const RegexLimits& regex_limits, const DfaOptions& dfa_options,
    std::shared_ptr<TerminalDfas> dfas, TerminalMode mode) {
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
  if (mode == TerminalMode::kLazy) {
    c->deferred_ = std::make_shared<DeferredBuild>(regex_limits, dfa_options, dfas);
  }
  for (const Terminal& t : g.terminals) {
    if (absl::Status s = c->AddTerminal(t, regex_limits, dfa_options, dfas, mode); !s.ok()) return s;
  }
  bool any_deferred = false;
  c->dfa_of_ = std::make_unique<std::atomic<const Dfa*>[]>(c->terminals_.size());
  for (size_t t = 0; t < c->terminals_.size(); ++t) {
    any_deferred = any_deferred || c->terminals_[t]->deferred();
    c->dfa_of_[t].store(c->terminals_[t]->IfBuilt(), std::memory_order_relaxed);
  }
  if (!any_deferred) c->deferred_ = nullptr;
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

absl::Status CompiledGrammar::AddTerminal(const Terminal& t, const RegexLimits& regex_limits,
                                          const DfaOptions& dfa_options,
                                          const std::shared_ptr<TerminalDfas>& dfas,
                                          TerminalMode mode) {
  const std::string where =
      absl::StrCat("terminal '", t.name, "' (line ", t.where.line, ", column ", t.where.column, ")");
  if (mode == TerminalMode::kLazy) {
    absl::StatusOr<Regex> re = Regex::Parse(t.regex, regex_limits);
    if (!re.ok()) {
      return absl::Status(re.status().code(), absl::StrCat(where, ": ", re.status().message()));
    }
    const RegexLanguage language = AnalyzeRegex(re->root());
    if (!language.non_empty) {
      return absl::InvalidArgumentError(absl::StrCat(where, " matches no non-empty string"));
    }
    if (deferred_->Deferrable(language)) {
      nullable_terminal_.push_back(language.nullable);
      terminal_min_.push_back(language.min_bytes);
      live_bytes_.push_back(language.ByteSet());
      terminals_.push_back(std::make_unique<DeferredDfa>(t.regex, deferred_));
      return absl::OkStatus();
    }
  }
  auto dfa = TerminalDfa(dfas.get(), t.regex, regex_limits, dfa_options, mode);
  if (!dfa.ok()) return absl::Status(dfa.status().code(), absl::StrCat(where, ": ", dfa.status().message()));
  const RefusalWatch watch;  // a lazy DFA's start row may need states past its limit
  const bool matches = MatchesNonEmptyString(**dfa);
  if (watch.refused()) {
    return absl::ResourceExhaustedError(
        absl::StrCat(where, ": ", (*dfa)->StateLimitError().message()));
  }
  if (!matches) return absl::InvalidArgumentError(absl::StrCat(where, " matches no non-empty string"));
  const Dfa& built = **dfa;
  nullable_terminal_.push_back(built.IsAccepting(built.start()));
  terminal_min_.push_back(built.DistanceToAccept(built.start()));
  live_bytes_.push_back(built.LiveBytes());
  terminals_.push_back(std::make_unique<DeferredDfa>(*std::move(dfa)));
  return absl::OkStatus();
}

const Dfa& CompiledGrammar::BuildDfa(uint32_t t) const {
  const Dfa& dfa = terminals_[t]->Get();
  // A failed build's stand-in is not noted: each read counts its refusal.
  if (terminals_[t]->IfBuilt() == &dfa) dfa_of_[t].store(&dfa, std::memory_order_release);
  return dfa;
}

absl::Status CompiledGrammar::DeferredError() const {
  return deferred_ != nullptr ? deferred_->first_error() : absl::OkStatus();
}

// Knuth's generalization of Dijkstra's algorithm: a rule's shortest string is
// final when it is the smallest candidate left; a production becomes a
// candidate for its rule once every rule it uses is final. Validate's
// invariant (every rule derives a string) makes every rule final at the end.
void CompiledGrammar::ComputeMinLengths() {
  const size_t np = productions_.size();
  std::vector<uint64_t> partial(np, 0);    // the sum of its final symbols so far
  std::vector<uint32_t> pending(np, 0);    // rule occurrences not yet final
  std::vector<std::vector<uint32_t>> uses(rule_productions_.size());  // rule -> productions, per occurrence
  using Candidate = std::pair<uint64_t, uint32_t>;  // (length, rule)
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  for (uint32_t p = 0; p < np; ++p) {
    for (const Symbol& s : productions_[p].rhs) {
      if (s.is_terminal()) {
        partial[p] = SaturatingAdd(partial[p], terminal_min_[s.id]);
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
      out[k] = SaturatingAdd(out[k + 1], s.is_terminal() ? terminal_min_[s.id] : rule_min_[s.id]);
    }
  }
  suffix_begin_[np] = suffix_min_.size();
}

}  // namespace maskd::grammar
