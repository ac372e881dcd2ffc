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

class TerminalDfas {
 public:
  using Stats = ByteLruStats;
  static constexpr size_t kEntryBytes = ByteLru<Dfa>::kEntryBytes;

  explicit TerminalDfas(size_t max_bytes) : cache_(max_bytes) {}

  // Dfa::FromPattern(pattern, limits, options), from the cache when a build
  // under the same limits is there.
  absl::StatusOr<std::shared_ptr<const Dfa>> Get(std::string_view pattern,
                                                 const RegexLimits& limits,
                                                 const DfaOptions& options);

  Stats stats() const { return cache_.stats(); }
  size_t max_bytes() const { return cache_.max_bytes(); }

 private:
  // Keys: the limits, then the pattern (terminal_dfas.cc: Key).
  ByteLru<Dfa> cache_;
};

// `cache`->Get(...), or Dfa::FromPattern when `cache` is null.
absl::StatusOr<std::shared_ptr<const Dfa>> TerminalDfa(TerminalDfas* cache, std::string_view pattern,
                                                       const RegexLimits& limits,
                                                       const DfaOptions& options);

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_TERMINAL_DFAS_H_
