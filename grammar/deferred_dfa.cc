#include "grammar/deferred_dfa.h"

#include <utility>

namespace maskd::grammar {
namespace {

DfaOptions WithoutAbort(DfaOptions options) {
  options.deadline = absl::InfiniteFuture();
  options.cancel = nullptr;
  return options;
}

// A DFA matching nothing: what a failed build reads as.
const Dfa& NoMatch() {
  static const std::shared_ptr<const Dfa> dfa = *Dfa::FromPattern("[^\\x00-\\x{10FFFF}]");
  return *dfa;
}

}  // namespace

DeferredBuild::DeferredBuild(const RegexLimits& limits, const DfaOptions& options,
                             std::shared_ptr<TerminalDfas> cache)
    : limits_(limits), options_(WithoutAbort(options)), cache_(std::move(cache)) {}

bool DeferrableTerminal(const RegexLanguage& language, const DfaOptions& options) {
  return language.nfa_states <= options.max_nfa_states && options.max_states >= kMinStatesOfDeferred;
}

bool DeferredBuild::Deferrable(const RegexLanguage& language) const {
  return DeferrableTerminal(language, options_);
}

absl::StatusOr<std::shared_ptr<const Dfa>> DeferredBuild::Build(const std::string& pattern) const {
  return TerminalDfa(cache_.get(), pattern, limits_, options_, TerminalMode::kLazy);
}

absl::Status DeferredBuild::first_error() const {
  absl::MutexLock lock(&mu_);
  return first_error_;
}

void DeferredBuild::RecordError(const absl::Status& error) {
  absl::MutexLock lock(&mu_);
  if (first_error_.ok()) first_error_ = error;
}

DeferredDfa::DeferredDfa(std::shared_ptr<const Dfa> dfa) { Publish(std::move(dfa)); }

DeferredDfa::DeferredDfa(std::string pattern, std::shared_ptr<DeferredBuild> build)
    : pattern_(std::move(pattern)), build_(std::move(build)) {}

void DeferredDfa::Publish(std::shared_ptr<const Dfa> dfa) const {
  owned_ = std::move(dfa);
  concat_closed_.store(ConcatClosed(*owned_), std::memory_order_release);
  dfa_.store(owned_.get(), std::memory_order_release);
}

const Dfa& DeferredDfa::Build() const {
  absl::call_once(once_, [&] {
    absl::StatusOr<std::shared_ptr<const Dfa>> dfa = build_->Build(pattern_);
    if (dfa.ok()) {
      Publish(*std::move(dfa));
    } else {
      build_->RecordError(dfa.status());
    }
  });
  if (const Dfa* dfa = dfa_.load(std::memory_order_acquire)) return *dfa;
  Dfa::CountRefusal();  // this call's build failed, or an earlier one's
  return NoMatch();
}

}  // namespace maskd::grammar
