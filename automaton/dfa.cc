#include "automaton/dfa.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace maskd {

absl::StatusOr<std::shared_ptr<const Dfa>> Dfa::FromPattern(std::string_view pattern,
                                                            const RegexLimits& limits,
                                                            const DfaOptions& options) {
  auto re = Regex::Parse(pattern, limits);
  if (!re.ok()) return re.status();
  return Compile(*re, options);
}

Dfa::State Dfa::WidestSuccessor(State s, uint32_t* bytes, uint32_t* self_bytes) const {
  uint32_t class_size[256] = {};
  for (int b = 0; b < 256; ++b) ++class_size[byte_class_[b]];
  // Bytes per successor, summed over classes (few distinct successors).
  std::vector<std::pair<State, uint32_t>> to;
  uint32_t self = 0;
  for (uint32_t c = 0; c < num_classes_; ++c) {
    const State t = table_[static_cast<size_t>(s) * num_classes_ + c];
    if (t == kDead) continue;
    if (t == s) {
      self += class_size[c];
      continue;
    }
    auto it = std::find_if(to.begin(), to.end(), [&](const auto& p) { return p.first == t; });
    if (it == to.end()) {
      to.emplace_back(t, class_size[c]);
    } else {
      it->second += class_size[c];
    }
  }
  State best = kDead;
  uint32_t most = 0;
  for (const auto& [t, n] : to) {
    if (n > most || (n == most && t < best)) {
      best = t;
      most = n;
    }
  }
  if (bytes != nullptr) *bytes = most;
  if (self_bytes != nullptr) *self_bytes = self;
  return best;
}

bool Dfa::Matches(std::string_view text) const {
  State s = Walk(start_, text);
  return s != kDead && IsAccepting(s);
}

size_t Dfa::MemoryBytes() const {
  return sizeof(Dfa) + table_.capacity() * sizeof(State) + accepting_.capacity() +
         distance_.capacity() * sizeof(uint32_t) + forced_byte_.capacity() * sizeof(int16_t);
}

}  // namespace maskd
