#include "grammar/terminal_dfas.h"

#include <utility>

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
  std::string key = Key(pattern, limits, options);
  {
    absl::MutexLock lock(&mu_);
    if (auto it = table_.find(key); it != table_.end()) {
      ++stats_.hits;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.dfa;
    }
    ++stats_.misses;
  }
  auto dfa = Dfa::FromPattern(pattern, limits, options);
  if (!dfa.ok()) return dfa.status();
  const size_t bytes = (*dfa)->MemoryBytes() + key.size() + kEntryBytes;
  absl::MutexLock lock(&mu_);
  if (bytes > max_bytes_ || table_.contains(key)) return dfa;
  EvictFor(bytes);
  auto [it, inserted] = table_.emplace(std::move(key), Entry{*dfa, bytes, {}});
  lru_.push_front(&it->first);
  it->second.lru = lru_.begin();
  stats_.bytes += bytes;
  ++stats_.entries;
  return dfa;
}

void TerminalDfas::EvictFor(size_t bytes) {
  while (!lru_.empty() && stats_.bytes + bytes > max_bytes_) {
    auto it = table_.find(*lru_.back());
    stats_.bytes -= it->second.bytes;
    --stats_.entries;
    ++stats_.evicted;
    lru_.pop_back();
    table_.erase(it);
  }
}

TerminalDfas::Stats TerminalDfas::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::StatusOr<std::shared_ptr<const Dfa>> TerminalDfa(TerminalDfas* cache, std::string_view pattern,
                                                       const RegexLimits& limits,
                                                       const DfaOptions& options) {
  if (cache == nullptr) return Dfa::FromPattern(pattern, limits, options);
  return cache->Get(pattern, limits, options);
}

}  // namespace maskd::grammar
