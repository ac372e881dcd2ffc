#include "automaton/internal/lazy_dfa.h"

#include <algorithm>
#include <utility>

#include "automaton/internal/build_abort.h"
#include "automaton/internal/forced_byte.h"
#include "automaton/internal/nfa_distance.h"

namespace maskd::automaton_internal {
namespace {

// States refused by a lazy DFA's state limit on this thread (Dfa::Refusals).
thread_local uint64_t refusals = 0;

DfaOptions WalkOptions(const DfaOptions& options) {
  DfaOptions o;
  o.max_states = options.max_states;
  o.max_nfa_states = options.max_nfa_states;
  return o;  // no deadline, no cancel flag: a walk is not a compilation
}

}  // namespace

uint64_t ThreadRefusals() { return refusals; }
void CountThreadRefusal() { ++refusals; }

LazyDfa::LazyDfa(CompactNfa nfa, const DfaOptions& options)
    : nfa_(std::move(nfa)), options_(WalkOptions(options)), max_states_(options.max_states),
      nfa_distance_(NfaDistances(nfa_)), classes_(nfa_.byte_class),
      table_(nfa_.num_classes, kUnknown) {
  live_.resize(nfa_.num_states);
  for (uint32_t s = 0; s < nfa_.num_states; ++s) {
    live_[s] = nfa_distance_[s] != Dfa::kNoDistance;
    if (live_[s]) max_distance_bound_ = std::max(max_distance_bound_, nfa_distance_[s]);
  }
  rows_ = std::make_unique<SubsetRows>(nfa_, options_, &live_);
}

absl::StatusOr<std::unique_ptr<LazyDfa>> LazyDfa::Create(CompactNfa nfa, const DfaOptions& options) {
  std::unique_ptr<LazyDfa> dfa(new LazyDfa(std::move(nfa), options));
  absl::MutexLock lock(&dfa->mu_);
  dfa->sets_.Add({}, SpanInterner::Hash({}));  // state 0: dead; its row is all 0
  dfa->table_.AddRow();
  for (uint32_t c = 0; c < dfa->nfa_.num_classes; ++c) {
    dfa->table_.Row(0)[c].store(Dfa::kDead, std::memory_order_relaxed);
  }
  dfa->facts_.At(0)->forced.store(-1, std::memory_order_relaxed);
  dfa->num_states_.store(1, std::memory_order_release);
  absl::Span<const uint32_t> start = dfa->rows_->StartSet();
  if (!start.empty()) {
    auto id = dfa->Intern(start);
    if (!id.ok()) return id.status();
    dfa->start_ = *id;
  }
  dfa->CountBytes();
  return dfa;
}

absl::StatusOr<uint32_t> LazyDfa::Intern(absl::Span<const uint32_t> set) const {
  bool added = false;
  absl::StatusOr<uint32_t> interned = InternStateSet(&sets_, set, max_states_, &added);
  if (!added) return interned;
  const uint32_t id = *interned;
  table_.AddRow();  // row id, every entry kUnknown
  Facts* facts = facts_.At(id);
  facts->accepting = std::binary_search(set.begin(), set.end(), nfa_.match) ? 1 : 0;
  for (uint32_t x : set) facts->distance = std::min(facts->distance, nfa_distance_[x]);
  // Published with the row entries that lead here (release stores).
  num_states_.store(id + 1, std::memory_order_release);
  return id;
}

absl::Status LazyDfa::FillRow(uint32_t s) const {
  auto intern = [this](absl::Span<const uint32_t> set) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return Intern(set);
  };
  row_.resize(nfa_.num_classes);
  // FillRow reads the set before interning (which may move the pool).
  absl::Status st = rows_->FillRow(sets_.Get(s), intern, row_.data());
  CountBytes();  // states interned before a refusal stay
  if (!st.ok()) return st;
  std::atomic<uint32_t>* row = table_.Row(s);
  for (uint32_t c = 0; c < nfa_.num_classes; ++c) row[c].store(row_[c], std::memory_order_release);
  const int16_t forced =
      facts_.At(s)->accepting ? -1 : ForcedByteOfRow(row_.data(), nfa_.num_classes, classes_);
  facts_.At(s)->forced.store(forced, std::memory_order_release);
  return absl::OkStatus();
}

uint32_t LazyDfa::FillAndRead(uint32_t s, uint32_t c) const {
  absl::MutexLock lock(&mu_);
  // The current table: the caller's may be an old one (FlatRows).
  const uint32_t t = table_.Row(s)[c].load(std::memory_order_relaxed);
  if (t != kUnknown) return t;
  if (!FillRow(s).ok()) {
    ++refusals;
    return Dfa::kDead;
  }
  return table_.Row(s)[c].load(std::memory_order_relaxed);
}

absl::Status LazyDfa::BuildAll(const DfaOptions& options) const {
  constexpr uint32_t kStatesPerAbortCheck = 256;
  absl::MutexLock lock(&mu_);
  // States are numbered in the order rows first lead to them: filling the
  // rows of 1, 2, ... in turn reaches every state. A row is filled whole or
  // not at all, so its first entry tells which.
  for (uint32_t s = 1; s < sets_.size(); ++s) {
    if (s % kStatesPerAbortCheck == 0) {
      if (absl::Status st = CheckBuildAbort(options); !st.ok()) return st;
    }
    if (table_.Row(s)[0].load(std::memory_order_relaxed) != kUnknown) continue;
    if (absl::Status st = FillRow(s); !st.ok()) return st;
  }
  return absl::OkStatus();
}

int LazyDfa::ForcedByte(uint32_t s) const {
  const Facts& facts = *facts_.At(s);
  int16_t f = facts.forced.load(std::memory_order_acquire);
  if (f != kForcedUnknown) return f;
  absl::MutexLock lock(&mu_);
  f = facts.forced.load(std::memory_order_relaxed);
  if (f != kForcedUnknown) return f;
  if (!FillRow(s).ok()) {
    ++refusals;
    return -1;
  }
  return facts.forced.load(std::memory_order_relaxed);
}

std::bitset<256> LazyDfa::LiveClasses() const {
  std::bitset<256> classes;
  for (const CompactNfa::Edge& e : nfa_.edges) {
    if (!live_[e.to]) continue;
    for (uint32_t c = e.lo; c <= e.hi; ++c) classes[c] = true;
  }
  return classes;
}

void LazyDfa::CountBytes() const {
  const size_t nfa_bytes =
      (live_.capacity() + (nfa_distance_.capacity() + nfa_.edge_begin.capacity() +
                           nfa_.eps_begin.capacity() + nfa_.eps_to.capacity()) *
                              sizeof(uint32_t)) +
      nfa_.edges.capacity() * sizeof(CompactNfa::Edge);
  const size_t bytes = sizeof(LazyDfa) + table_.MemoryBytes() + facts_.MemoryBytes() +
                       sets_.MemoryBytes() + rows_->MemoryBytes() +
                       row_.capacity() * sizeof(uint32_t) + nfa_bytes;
  bytes_.store(bytes, std::memory_order_relaxed);
}

}  // namespace maskd::automaton_internal
