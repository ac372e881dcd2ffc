#include "index/token_index.h"

#include <algorithm>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "index/state_mask.h"

namespace maskd {

TokenIndex::TokenIndex(std::shared_ptr<const Dfa> dfa,
                       std::shared_ptr<const TokenizerContext> context, const Options& options)
    : dfa_(std::move(dfa)),
      context_(std::move(context)),
      vocab_(&context_->vocabulary()),
      num_words_((vocab_->size() + 31) / 32),
      options_(options),
      store_(std::make_unique<StateMaskStore>(options.budget)) {
  for (uint32_t eos : vocab_->eos_ids()) {
    if (vocab_->has_token(eos) && !vocab_->is_special(eos) && !vocab_->bytes(eos).empty()) {
      eos_in_trie_ = true;  // an EOS override naming a text token
    }
  }
}

TokenIndex::~TokenIndex() = default;

std::shared_ptr<const TokenIndex> TokenIndex::Create(
    std::shared_ptr<const Dfa> dfa, std::shared_ptr<const TokenizerContext> context) {
  return Create(std::move(dfa), std::move(context), Options());
}

std::shared_ptr<const TokenIndex> TokenIndex::Create(
    std::shared_ptr<const Dfa> dfa, std::shared_ptr<const TokenizerContext> context,
    const Options& options) {
  return std::shared_ptr<const TokenIndex>(
      new TokenIndex(std::move(dfa), std::move(context), options));
}

const StateMask& TokenIndex::MaskOf(State s) const {
  const StateMask* m = masks_.At(s)->load(std::memory_order_acquire);
  if (m != nullptr) return *m;
  return ComputeMask(s, nullptr);
}

absl::Status TokenIndex::WriteMask(State s, uint32_t* words) const {
  if (!dfa_->lazy()) {
    MaskOf(s).Write(words, num_words_);
    return absl::OkStatus();
  }
  const RefusalWatch watch;
  MaskOf(s).Write(words, num_words_);
  if (!watch.refused()) return absl::OkStatus();
  std::fill(words, words + num_words_, 0u);
  return dfa_->StateLimitError();
}

uint32_t TokenIndex::CountAllowed(State s) const { return MaskOf(s).count(); }

bool TokenIndex::IsAllowed(State s, uint32_t token) const {
  if (token >= vocab_->size() || s == Dfa::kDead) return false;
  // A read only: Find, not At, so that no chunk is created for a state
  // whose mask was never computed.
  const auto* slot = masks_.Find(s);
  const StateMask* m = slot != nullptr ? slot->load(std::memory_order_acquire) : nullptr;
  if (m != nullptr) return m->Has(token);
  if (vocab_->is_eos(token)) return dfa_->IsAccepting(s);
  return NextState(s, token) != Dfa::kDead;
}

TokenIndex::State TokenIndex::NextState(State s, uint32_t token) const {
  if (token >= vocab_->size() || !vocab_->has_token(token) || vocab_->is_special(token) ||
      vocab_->is_eos(token)) {
    return Dfa::kDead;
  }
  std::string_view bytes = vocab_->bytes(token);
  if (bytes.empty() || bytes.size() > 0xFFFF) return Dfa::kDead;
  return dfa_->Walk(s, bytes);
}

absl::StatusOr<TokenIndex::State> TokenIndex::NextStateChecked(State s, uint32_t token) const {
  if (!dfa_->lazy()) return NextState(s, token);
  const RefusalWatch watch;
  const State t = NextState(s, token);
  if (watch.refused()) return dfa_->StateLimitError();
  return t;
}

absl::Status TokenIndex::Precompute(int threads, absl::Time deadline,
                                    const std::atomic<bool>* cancel) const {
  std::vector<uint8_t> queued(dfa_->num_states(), 0);  // grows with a lazy DFA
  std::vector<State> queue;
  absl::Mutex mu;  // guards queue, queued, next, busy, status
  size_t next = 0;
  int busy = 0;
  absl::Status status;
  if (start() != Dfa::kDead) {
    queue.push_back(start());
    queued[start()] = 1;
  }
  auto worker = [&] {
    std::vector<State> successors;
    while (true) {
      State s;
      {
        // Work is queued, or nobody can queue more, or the build failed.
        auto ready = [&] { return next < queue.size() || busy == 0 || !status.ok(); };
        absl::MutexLock lock(&mu, absl::Condition(&ready));
        if (!status.ok() || next >= queue.size()) return;
        s = queue[next++];
        ++busy;
      }
      absl::Status abort;
      if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
        abort = absl::CancelledError("index precomputation cancelled");
      } else if (deadline != absl::InfiniteFuture() && absl::Now() > deadline) {
        abort = absl::DeadlineExceededError("index precomputation exceeded its deadline");
      }
      successors.clear();
      if (abort.ok()) {
        const RefusalWatch watch;
        ComputeMask(s, &successors);
        if (watch.refused()) {
          abort = dfa_->StateLimitError();
        } else if (masks_.At(s)->load(std::memory_order_acquire) == nullptr) {
          abort = options_.budget->ExhaustedError("index precomputation");
        }
      }
      absl::MutexLock lock(&mu);
      --busy;
      if (!abort.ok() && status.ok()) status = abort;
      for (State t : successors) {
        if (t >= queued.size()) queued.resize(std::max<size_t>(t + 1, 2 * queued.size()), 0);
        if (!queued[t]) {
          queued[t] = 1;
          queue.push_back(t);
        }
      }
    }
  };
  threads = std::max(1, threads);
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  return status;
}

uint32_t TokenIndex::num_computed_states() const {
  uint32_t c = 0;
  const uint32_t n = dfa_->num_states();
  for (uint32_t s = 0; s < n; ++s) {
    const std::atomic<const StateMask*>* m = masks_.Find(s);
    if (m != nullptr && m->load(std::memory_order_relaxed) != nullptr) ++c;
  }
  return c;
}

size_t TokenIndex::MemoryBytes() const {
  return sizeof(TokenIndex) + dfa_->MemoryBytes() + masks_.MemoryBytes() + store_->bytes();
}

absl::StatusOr<std::shared_ptr<const TokenIndex>> CompileRegex(
    std::string_view pattern, std::shared_ptr<const TokenizerContext> context,
    const CompileOptions& options) {
  auto regex = Regex::Parse(pattern, options.regex);
  if (!regex.ok()) return regex.status();
  return CompileRegex(*regex, std::move(context), options);
}

absl::StatusOr<std::shared_ptr<const TokenIndex>> CompileRegex(
    const Regex& regex, std::shared_ptr<const TokenizerContext> context,
    const CompileOptions& options) {
  auto dfa = options.lazy_dfa && !options.eager ? Dfa::CompileLazy(regex, options.dfa)
                                                : Dfa::Compile(regex, options.dfa);
  if (!dfa.ok()) return dfa.status();
  if ((*dfa)->start() == Dfa::kDead) {
    return absl::InvalidArgumentError("regex: the pattern matches no text");
  }
  auto index = TokenIndex::Create(std::move(*dfa), std::move(context), options.index);
  if (options.eager) {
    auto status = index->Precompute(options.threads, options.dfa.deadline, options.dfa.cancel);
    if (!status.ok()) return status;
  }
  return index;
}

}  // namespace maskd
