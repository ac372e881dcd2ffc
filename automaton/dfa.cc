#include "automaton/dfa.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "automaton/internal/subset_rows.h"
#include "automaton/internal/lazy_dfa.h"

namespace maskd {

namespace automaton_internal {
uint64_t ThreadRefusals();  // lazy_dfa.cc
void CountThreadRefusal();  // lazy_dfa.cc
}  // namespace automaton_internal

Dfa::Dfa() = default;
Dfa::~Dfa() = default;

uint32_t Dfa::num_states() const { return lazy_ != nullptr ? lazy_->num_states() : num_states_; }

// Lazy mode, on a row entry Next found kUnbuilt (possibly filled since).

Dfa::State Dfa::LazyNext(State s, uint32_t c) const { return lazy_->Next(s, c); }

bool Dfa::IsAccepting(State s) const {
  return lazy_ != nullptr ? lazy_->IsAccepting(s) : accepting_[s] != 0;
}

uint32_t Dfa::DistanceToAccept(State s) const {
  return lazy_ != nullptr ? lazy_->DistanceToAccept(s) : distance_[s];
}

int Dfa::ForcedByte(State s) const {
  if (lazy_ == nullptr) return forced_byte_[s];
  return s == kDead ? -1 : lazy_->ForcedByte(s);
}

uint64_t Dfa::Refusals() { return automaton_internal::ThreadRefusals(); }
void Dfa::CountRefusal() { automaton_internal::CountThreadRefusal(); }

absl::Status Dfa::StateLimitError() const {
  const uint32_t limit = lazy_ != nullptr ? lazy_->max_states() : num_states_;
  const absl::Status refused = automaton_internal::TooManyStatesError(limit);
  return absl::ResourceExhaustedError(absl::StrCat(refused.message(), ", reached while walking"));
}

absl::Status Dfa::BuildAll(const DfaOptions& options) const {
  return lazy_ != nullptr ? lazy_->BuildAll(options) : absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Dfa>> Dfa::FromPattern(std::string_view pattern,
                                                            const RegexLimits& limits,
                                                            const DfaOptions& options, bool lazy) {
  auto re = Regex::Parse(pattern, limits);
  if (!re.ok()) return re.status();
  return lazy ? CompileLazy(*re, options) : Compile(*re, options);
}

Dfa::State Dfa::WidestSuccessor(State s, uint32_t* bytes, uint32_t* self_bytes) const {
  uint32_t class_size[256] = {};
  for (int b = 0; b < 256; ++b) ++class_size[byte_class_[b]];
  // Bytes per successor, summed over classes (few distinct successors).
  std::vector<std::pair<State, uint32_t>> to;
  uint32_t self = 0;
  for (uint32_t c = 0; c < num_classes_; ++c) {
    const State t = ClassNext(s, c);
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

std::bitset<256> Dfa::LiveBytes() const {
  std::bitset<256> live_classes;  // by class
  if (lazy_ != nullptr) {
    live_classes = lazy_->LiveClasses();
  } else {
    for (State s = 1; s < num_states_; ++s) {
      const State* row = &table_[static_cast<size_t>(s) * num_classes_];
      for (uint32_t c = 0; c < num_classes_; ++c) {
        if (row[c] != kDead) live_classes[c] = true;
      }
    }
  }
  std::bitset<256> bytes;
  for (int b = 0; b < 256; ++b) bytes[b] = live_classes[byte_class_[b]];
  return bytes;
}

size_t Dfa::MemoryBytes() const {
  if (lazy_ != nullptr) return sizeof(Dfa) + lazy_->MemoryBytes();
  return sizeof(Dfa) + table_.capacity() * sizeof(State) + accepting_.capacity() +
         distance_.capacity() * sizeof(uint32_t) + forced_byte_.capacity() * sizeof(int16_t);
}

}  // namespace maskd
