#include "grammar/terminal_dfas.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace maskd::grammar {
namespace {

// Every limit that decides whether a build succeeds and what it builds,
// then the pattern. The deadline and cancel flag are left out: a finished
// build is valid for any.
std::string Key(std::string_view pattern, const RegexLimits& limits, const DfaOptions& options,
                TerminalMode mode) {
  const uint32_t eager_up_to = mode == TerminalMode::kLazy ? options.eager_up_to_states : 0;
  return absl::StrCat(limits.max_pattern_bytes, ",", limits.max_repeat, ",", limits.max_nodes, ",",
                      limits.max_set_ranges, ",", limits.max_nesting, ",", options.max_states, ",",
                      options.max_nfa_states, mode == TerminalMode::kLazy ? ",lazy," : ",whole,",
                      eager_up_to, "\n", absl::string_view(pattern.data(), pattern.size()));
}

// Dfa::Compile or CompileLazy by `mode`, or with `presume` the refusal of a
// pattern PresumedOverStateLimit, or of one over `max_nodes` (one parse
// either way).
absl::StatusOr<std::shared_ptr<const Dfa>> Build(std::string_view pattern, const RegexLimits& limits,
                                                 const DfaOptions& options, TerminalMode mode,
                                                 bool presume, size_t max_nodes) {
  absl::StatusOr<Regex> re = Regex::Parse(pattern, limits);
  if (!re.ok()) return re.status();
  if (presume && PresumedOverStateLimit(re->expanded_size(), options)) {
    return absl::ResourceExhaustedError(absl::StrCat(re->expanded_size(), " regex nodes, presumed over ",
                                                     options.max_states, " DFA states"));
  }
  if (max_nodes != 0 && re->expanded_size() > max_nodes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(re->expanded_size(), " regex nodes, over ", max_nodes));
  }
  return mode == TerminalMode::kLazy ? Dfa::CompileLazy(*re, options) : Dfa::Compile(*re, options);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Dfa>> TerminalDfas::Get(std::string_view pattern,
                                                             const RegexLimits& limits,
                                                             const DfaOptions& options,
                                                             TerminalMode mode, bool presume,
                                                             size_t max_nodes) {
  return cache_.GetOrMake(
      Key(pattern, limits, options, mode),
      [&]() { return Build(pattern, limits, options, mode, presume, max_nodes); },
      [](const Dfa& dfa) { return dfa.MemoryBytes(); });
}

bool MatchesNonEmptyString(const Dfa& dfa) {
  for (int b = 0; b < 256; ++b) {
    if (dfa.Next(dfa.start(), static_cast<uint8_t>(b)) != Dfa::kDead) return true;
  }
  return false;
}

// L L within L: from every accepting state a, every string of L must lead to
// an accepting state, and every prefix of one to a live state. A search over
// the pairs (state reached from a, state reached from the start) on the
// same bytes finds a counterexample if there is one.
bool ConcatClosed(const Dfa& dfa) {
  const uint32_t n = dfa.num_states();
  if (dfa.lazy() || n > kMaxClosedCheckStates) return false;
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

absl::StatusOr<std::shared_ptr<const Dfa>> TerminalDfa(TerminalDfas* cache, std::string_view pattern,
                                                       const RegexLimits& limits,
                                                       const DfaOptions& options, TerminalMode mode,
                                                       bool presume, size_t max_nodes) {
  if (cache == nullptr) return Build(pattern, limits, options, mode, presume, max_nodes);
  return cache->Get(pattern, limits, options, mode, presume, max_nodes);
}

}  // namespace maskd::grammar
