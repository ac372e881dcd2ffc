// DeferredDfa: a grammar terminal's DFA, built when a parse first needs it.
//
// A JSON Schema's grammar has hundreds of terminals (each property's key,
// each string, number and enum) and a generation reaches few of them, its
// first mask one or two: building every terminal's DFA at compile was most of
// a large schema's time to first mask (docs/grammars.md "Deferred terminal
// DFAs"). A deferred DFA holds its pattern until the first Get, which builds
// it on the calling thread while any other caller waits for that build
// (absl::call_once); later calls read it without a lock. CompiledGrammar
// defers only the terminals whose build cannot fail on a limit
// (DeferrableTerminal), in lazy mode, and takes the facts it needs at compile from
// the regex tree instead (grammar/regex_language.h).
//
// A build that fails anyway returns a DFA matching nothing and counts a
// refusal on the calling thread (Dfa::CountRefusal), so the walk that read
// it is discarded as for the state limit; DeferredBuild keeps the error,
// which GrammarIndex::StateLimitError reports.
#ifndef MASKD_GRAMMAR_DEFERRED_DFA_H_
#define MASKD_GRAMMAR_DEFERRED_DFA_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "automaton/dfa.h"
#include "automaton/regex.h"
#include "grammar/regex_language.h"
#include "grammar/terminal_dfas.h"

namespace maskd::grammar {

// Whether a lazy terminal of `language` (non-empty) under `options` may be
// built late: its NFA fits options.max_nfa_states (RegexLanguage::nfa_states
// bounds it), so no limit refuses its build, and max_states leaves room for
// its start row (the dead state, the start, one successor per byte), so no
// limit refuses what compiling a terminal checks on its DFA either. (A lazy
// DFA past its eager trial bounds its states while walking, deferred or not.)
bool DeferrableTerminal(const RegexLanguage& language, const DfaOptions& options);
inline constexpr uint32_t kMinStatesOfDeferred = 2 + 256;

// What the deferred terminals of one grammar are built with, and the first
// build that failed. Thread-safe.
class DeferredBuild {
 public:
  // `options` without its deadline and cancel flag (a walk is not a
  // compilation, and the flag may not outlive it); `cache` may be null.
  DeferredBuild(const RegexLimits& limits, const DfaOptions& options,
                std::shared_ptr<TerminalDfas> cache);

  // DeferrableTerminal(language, the options given).
  bool Deferrable(const RegexLanguage& language) const;

  // TerminalDfa(cache, pattern, ..., kLazy).
  absl::StatusOr<std::shared_ptr<const Dfa>> Build(const std::string& pattern) const;
  // OK while no build failed, else the first failure.
  absl::Status first_error() const;
  void RecordError(const absl::Status& error);

 private:
  const RegexLimits limits_;
  const DfaOptions options_;
  const std::shared_ptr<TerminalDfas> cache_;
  mutable absl::Mutex mu_;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
};

class DeferredDfa {
 public:
  // Built already.
  explicit DeferredDfa(std::shared_ptr<const Dfa> dfa);
  // Built by the first Get, from `pattern` (it parsed under build's limits).
  DeferredDfa(std::string pattern, std::shared_ptr<DeferredBuild> build);
  DeferredDfa(const DeferredDfa&) = delete;
  DeferredDfa& operator=(const DeferredDfa&) = delete;

  const Dfa& Get() const {
    const Dfa* dfa = dfa_.load(std::memory_order_acquire);
    return dfa != nullptr ? *dfa : Build();
  }
  // The DFA when built, else null (builds nothing).
  const Dfa* IfBuilt() const { return dfa_.load(std::memory_order_acquire); }
  bool deferred() const { return build_ != nullptr; }
  // ConcatClosed (terminal_dfas.h) of the DFA; false until it is built.
  bool concat_closed() const { return concat_closed_.load(std::memory_order_acquire); }

 private:
  const Dfa& Build() const;
  // Sets owned_, concat_closed_, then publishes dfa_.
  void Publish(std::shared_ptr<const Dfa> dfa) const;

  const std::string pattern_;                    // deferred only
  const std::shared_ptr<DeferredBuild> build_;   // null when built at creation
  mutable absl::once_flag once_;
  mutable std::shared_ptr<const Dfa> owned_;     // set once, before dfa_
  mutable std::atomic<bool> concat_closed_{false};
  mutable std::atomic<const Dfa*> dfa_{nullptr};
};

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_DEFERRED_DFA_H_
