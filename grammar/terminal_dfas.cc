#include "grammar/terminal_dfas.h"

#include "absl/strings/str_cat.h"

namespace maskd::grammar {
namespace {

// Every limit that decides whether a build succeeds, then the pattern. The
// deadline and cancel flag are left out: a finished build is valid for any.
std::string Key(std::string_view pattern, const RegexLimits& limits, const DfaOptions& options) {
  return absl::StrCat(limits.max_pattern_bytes, ",", limits.max_repeat, ",", limits.max_nodes, ",",
                      limits.max_set_ranges, ",", limits.max_nesting, ",", options.max_states, ",",
                      options.max_nfa_states, "\n",
                      absl::string_view(pattern.data(), pattern.size()));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Dfa>> TerminalDfas::Get(std::string_view pattern,
                                                             const RegexLimits& limits,
                                                             const DfaOptions& options) {
  return cache_.GetOrMake(
      Key(pattern, limits, options),
      [&]() -> absl::StatusOr<std::shared_ptr<const Dfa>> {
        return Dfa::FromPattern(pattern, limits, options);
      },
      [](const Dfa& dfa) { return dfa.MemoryBytes(); });
}

absl::StatusOr<std::shared_ptr<const Dfa>> TerminalDfa(TerminalDfas* cache, std::string_view pattern,
                                                       const RegexLimits& limits,
                                                       const DfaOptions& options) {
  if (cache == nullptr) return Dfa::FromPattern(pattern, limits, options);
  return cache->Get(pattern, limits, options);
}

}  // namespace maskd::grammar
