// TerminalDfas: a bounded, shared cache of the DFAs of grammar terminals,
// keyed by the terminal's regex and the limits it was built under.
//
// A structural tag of N tools is one grammar whose terminals are its tools'
// schemas' lexemes (a JSON string, a number, a property's key, a whole
// regular object...): most repeat within one request (every tool's strings)
// and across requests (an agent sends the same tools again and again). One
// cache per compiler (in maskd, per server) builds each distinct terminal's
// DFA once: a tool's schema is lowered and its terminals' DFAs built on its
// first request, and later grammars holding the same terminals take them from
// here (CompiledGrammar::Create and InlineRegularRules look them up).
//
// A DFA is the same whichever grammar asks (Dfa::FromPattern is a function
// of the pattern and the limits), so sharing one changes no mask. Only
// successful builds are kept; an error (a limit, a deadline) is returned and
// forgotten. Memory: at most max_bytes of DFAs and keys (Dfa::MemoryBytes
// plus the key's bytes and kEntryBytes), the least recently used dropped first; a DFA larger
// than that is built and returned but not kept. A DFA still used by a grammar
// stays alive after its eviction (shared_ptr).
//
// Thread-safe (grammar/byte_lru.h). Not on the step path: only compilations
// call it.
#ifndef MASKD_GRAMMAR_TERMINAL_DFAS_H_
#define MASKD_GRAMMAR_TERMINAL_DFAS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "automaton/dfa.h"
#include "automaton/regex.h"
#include "grammar/byte_lru.h"

namespace maskd::grammar {

// How a terminal's DFA is built.
//  - kWhole: Dfa::Compile, every state built and minimized; a terminal over
//    DfaOptions::max_states fails the build (and the lowering splits it).
//  - kLazy: Dfa::CompileLazy with DfaOptions::eager_up_to_states: whole when
//    the build fits that many states, else its states built as walks reach
//    them (the NFA and the start state at compile), max_states bounding them
//    while walking: a walk that needs more is refused there
//    (Dfa::Refusals), which the grammar's users turn into ResourceExhausted
//    (GrammarGuide). Same language, same masks.
enum class TerminalMode { kWhole, kLazy };

class TerminalDfas {
 public:
  using Stats = ByteLruStats;
  static constexpr size_t kEntryBytes = ByteLru<Dfa>::kEntryBytes;

  explicit TerminalDfas(size_t max_bytes) : cache_(max_bytes) {}

  // Dfa::FromPattern(pattern, limits, options, lazy when `mode` is kLazy),
  // from the cache when a build under the same limits and mode is there.
  // `presume`: a pattern not in the cache and PresumedOverStateLimit (below)
  // is refused (ResourceExhausted) without building its DFA; so is one over
  // `max_nodes` expanded regex nodes (0: no such bound), for callers whose
  // DFA is optional (a merged terminal, grammar/regular_rules.h). A lazy DFA is
  // charged what it holds when it is added; what its walks build later is
  // charged to the indexes that hold it (GrammarIndex::MemoryBytes), at
  // most max_states states each.
  absl::StatusOr<std::shared_ptr<const Dfa>> Get(std::string_view pattern,
                                                 const RegexLimits& limits,
                                                 const DfaOptions& options, TerminalMode mode,
                                                 bool presume = false, size_t max_nodes = 0);

  Stats stats() const { return cache_.stats(); }
  size_t max_bytes() const { return cache_.max_bytes(); }

 private:
  // Keys: the limits, then the pattern (terminal_dfas.cc: Key).
  ByteLru<Dfa> cache_;
};

// Whether a regex of `expanded_nodes` nodes (Regex::expanded_size: counted
// repeats expanded) is presumed over options.max_states without building its
// DFA: more than kPresumedNodesPerState nodes per allowed state. A failed
// build costs max_states states' work (~100 ms at the default 100,000), and
// a grammar's large parts fail in nests (an object holding an array of long
// strings, the members around it, the object around those). Terminals are
// lexemes whose subset construction has about a state per node or two: in
// maskbench-dev's Github_hard---o9904 (3.1 s on the grammar route before
// this), every terminal over 2 nodes per allowed state failed its build
// (212k-700k nodes, 100k states) and every one under built (up to 106k
// nodes, 50k states). A heuristic, so only for callers to whom a presumed
// failure costs a different grammar, never a different language: the
// lowering then splits the part (grammar/regex_rules.h), the inlining keeps
// the rule (grammar/regular_rules.h).
inline constexpr size_t kPresumedNodesPerState = 2;
inline bool PresumedOverStateLimit(size_t expanded_nodes, const DfaOptions& options) {
  return expanded_nodes > kPresumedNodesPerState * size_t{options.max_states};
}

// Whether `dfa` matches some non-empty string: every live state reaches
// acceptance (automaton/dfa.h), so a live successor of the start will do.
bool MatchesNonEmptyString(const Dfa& dfa);

// Whether the language L of `dfa` is closed under concatenation (L L is
// within L), so two of its strings in a row are also one of them (\s+,
// [a-z]*). Decided for whole DFAs of at most kMaxClosedCheckStates states;
// false above and for lazy ones (whose check would build their states).
bool ConcatClosed(const Dfa& dfa);
inline constexpr uint32_t kMaxClosedCheckStates = 512;

// `cache`->Get(...), or what it would build when `cache` is null.
absl::StatusOr<std::shared_ptr<const Dfa>> TerminalDfa(TerminalDfas* cache, std::string_view pattern,
                                                       const RegexLimits& limits,
                                                       const DfaOptions& options, TerminalMode mode,
                                                       bool presume = false, size_t max_nodes = 0);

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_TERMINAL_DFAS_H_
