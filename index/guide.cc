#include "index/guide.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace maskd {

Guide::Guide(std::shared_ptr<const TokenIndex> index, size_t rollback_window)
    : index_(std::move(index)), state_(index_->start()), window_(rollback_window) {}

absl::StatusOr<Guide> Guide::Replay(std::shared_ptr<const TokenIndex> index,
                                    absl::Span<const uint32_t> tokens) {
  Guide g(std::move(index));
  g.ring_.reserve(tokens.size());
  if (auto s = g.Advance(tokens); !s.ok()) return s;
  return g;
}

absl::Status Guide::WriteMaskOf(uint32_t state, uint32_t* words) const {
  if (state != kFinished) return index_->WriteMask(state, words);
  std::memset(words, 0, static_cast<size_t>(index_->num_words()) * sizeof(uint32_t));
  for (uint32_t eos : index_->vocabulary().eos_ids()) words[eos >> 5] |= 1u << (eos & 31);
  return absl::OkStatus();
}

absl::Status Guide::WriteMaskUnchecked(uint32_t* words) const { return WriteMaskOf(state_, words); }

absl::Status Guide::PeekStep(size_t n, absl::Span<const uint32_t> tokens, uint32_t tokens_left,
                             uint32_t* words) const {
  if (n > count_) return RollbackError(n);
  uint32_t state = n == 0 ? state_ : Back(n);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (auto s = Transition(state, tokens[i], &state); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("tokens[", i, "]: ", s.message()));
    }
  }
  if (auto s = WriteMaskOf(state, words); !s.ok()) return s;
  return tokens_left > 0 ? BudgetAt(state, tokens_left, words) : absl::OkStatus();
}

absl::Status Guide::WriteMask(absl::Span<uint32_t> words) const {
  const uint32_t need = index_->num_words();
  if (words.size() < need) {
    return absl::InvalidArgumentError(absl::StrCat("mask buffer of ", words.size(),
                                                   " words is smaller than the vocabulary's ",
                                                   need, " words"));
  }
  if (auto s = WriteMaskUnchecked(words.data()); !s.ok()) return s;
  if (words.size() > need) {
    std::memset(words.data() + need, 0, (words.size() - need) * sizeof(uint32_t));
  }
  return absl::OkStatus();
}

bool Guide::IsAllowed(uint32_t token) const {
  const Vocabulary& v = index_->vocabulary();
  if (state_ == kFinished) return v.is_eos(token);
  return index_->IsAllowed(state_, token);
}

uint32_t Guide::MinBytesToFinish() const {
  if (state_ == kFinished) return 0;
  const uint32_t d = index_->dfa().DistanceToAccept(state_);
  return d == Dfa::kNoDistance ? 0 : d;
}

absl::Status Guide::ApplyTokenBudget(uint32_t tokens_left, uint32_t* words) const {
  return BudgetAt(state_, tokens_left, words);
}

absl::Status Guide::BudgetAt(uint32_t state, uint32_t tokens_left, uint32_t* words) const {
  if (state == kFinished) return absl::OkStatus();  // only EOS is allowed anyway
  const Dfa& dfa = index_->dfa();
  if (static_cast<uint64_t>(dfa.MaxDistanceToAccept()) + 2 <= tokens_left) return absl::OkStatus();
  const RefusalWatch watch;
  const Vocabulary& v = index_->vocabulary();
  const uint32_t n = index_->num_words();
  // The mask as it came, for the rare fallback below (per thread, reused).
  thread_local std::vector<uint32_t> original;
  original.assign(words, words + n);
  // One walk per allowed token: clear what is over budget, and note the
  // smallest distance to an end after any of them.
  uint32_t best = Dfa::kNoDistance;
  bool keep_any = false;
  for (uint32_t w = 0; w < n; ++w) {
    uint32_t keep = words[w];
    for (uint32_t bits = words[w]; bits != 0; bits &= bits - 1) {
      const uint32_t bit = static_cast<uint32_t>(__builtin_ctz(bits));
      const uint32_t t = w * 32 + bit;
      if (v.is_eos(t)) continue;
      const uint32_t d = dfa.DistanceToAccept(index_->NextState(state, t));
      if (d < best) best = d;
      if (static_cast<uint64_t>(d) + 2 > tokens_left) keep &= ~(1u << bit);
    }
    words[w] = keep;
    keep_any |= keep != 0;  // an EOS, or a token within budget
  }
  if (dfa.lazy() && watch.refused()) return dfa.StateLimitError();
  if (keep_any) return absl::OkStatus();
  // Nothing can finish in the budget: keep the tokens closest to an end.
  for (uint32_t w = 0; w < n; ++w) {
    for (uint32_t bits = original[w]; bits != 0; bits &= bits - 1) {
      const uint32_t bit = static_cast<uint32_t>(__builtin_ctz(bits));
      const uint32_t t = w * 32 + bit;
      if (dfa.DistanceToAccept(index_->NextState(state, t)) == best) words[w] |= 1u << bit;
    }
  }
  return absl::OkStatus();
}

bool Guide::IsAccepting() const {
  return state_ == kFinished || index_->dfa().IsAccepting(state_);
}

absl::Status Guide::Transition(uint32_t from, uint32_t token, uint32_t* next) const {
  const Vocabulary& v = index_->vocabulary();
  if (token >= v.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token id ", token, " is outside the vocabulary (size ", v.size(), ")"));
  }
  if (v.is_eos(token)) {  // allowed where the constraint may end, and after EOS
    if (from != kFinished && !index_->dfa().IsAccepting(from)) {
      return absl::FailedPreconditionError(
          absl::StrCat("token ", token, " (EOS) is not allowed: the constraint cannot end here"));
    }
    *next = kFinished;
    return absl::OkStatus();
  }
  if (from == kFinished) {
    *next = Dfa::kDead;
  } else {
    absl::StatusOr<uint32_t> to = index_->NextStateChecked(from, token);
    if (!to.ok()) return to.status();
    *next = *to;
  }
  if (*next == Dfa::kDead) {
    return absl::FailedPreconditionError(absl::StrCat(
        "token ", token, " is not allowed", from == kFinished ? " after EOS" : " in this state"));
  }
  return absl::OkStatus();
}

void Guide::Push(uint32_t prev) {
  if (count_ < ring_.size()) {  // room in the ring (after a rollback)
    size_t i = head_ + count_;
    ring_[i >= ring_.size() ? i - ring_.size() : i] = prev;
    ++count_;
  } else if (ring_.size() < window_) {  // still growing; head_ == 0 until full
    if (ring_.size() == ring_.capacity()) {
      ring_.reserve(std::min(window_, std::max<size_t>(16, 2 * ring_.capacity())));
    }
    ring_.push_back(prev);
    ++count_;
  } else if (!ring_.empty()) {  // full: overwrite the oldest
    ring_[head_] = prev;
    if (++head_ == ring_.size()) head_ = 0;
    ++dropped_;
  } else {  // window 0: no history
    ++dropped_;
  }
}

absl::Status Guide::Advance(uint32_t token) {
  uint32_t next;
  if (auto s = Transition(state_, token, &next); !s.ok()) return s;
  Push(state_);
  state_ = next;
  return absl::OkStatus();
}

absl::Status Guide::Advance(absl::Span<const uint32_t> tokens) {
  return RollbackAndAdvance(0, tokens);
}

absl::Status Guide::RollbackError(size_t n) const {
  if (n > num_tokens()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot roll back ", n, " tokens: only ",
                                                   num_tokens(), " were advanced"));
  }
  if (n > count_) {
    return absl::OutOfRangeError(absl::StrCat("cannot roll back ", n,
                                              " tokens: past the rollback window of ", window_,
                                              " tokens (", count_, " can be rolled back now)"));
  }
  return absl::OkStatus();
}

absl::Status Guide::Rollback(size_t n) {
  if (auto s = RollbackError(n); !s.ok()) return s;
  if (n == 0) return absl::OkStatus();
  state_ = Back(n);
  count_ -= n;
  return absl::OkStatus();
}

absl::Status Guide::RollbackAndAdvance(size_t n, absl::Span<const uint32_t> tokens) {
  if (n > count_) return Rollback(n);  // the error, state unchanged
  if (n == 0 && tokens.size() == 1) {  // a decoding step: one check, one walk
    absl::Status s = Advance(tokens[0]);
    if (s.ok()) return s;
    return absl::Status(s.code(), absl::StrCat("tokens[0]: ", s.message()));
  }
  if (n == 0 && count_ + tokens.size() <= window_) {
    // No live history entry is overwritten (pushes land past count_), so one
    // pass that restores count_ and state_ on error changes nothing.
    const uint32_t start_state = state_;
    const size_t start_count = count_;
    for (size_t i = 0; i < tokens.size(); ++i) {
      uint32_t next;
      if (auto s = Transition(state_, tokens[i], &next); !s.ok()) {
        state_ = start_state;
        count_ = start_count;
        return absl::Status(s.code(), absl::StrCat("tokens[", i, "]: ", s.message()));
      }
      Push(state_);
      state_ = next;
    }
    return absl::OkStatus();
  }
  // Check every step from the rolled-back state first, changing nothing (the
  // ring may overwrite its oldest entries as it advances, so a failure
  // half-way could not be undone).
  uint32_t state = n == 0 ? state_ : Back(n);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (auto s = Transition(state, tokens[i], &state); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("tokens[", i, "]: ", s.message()));
    }
  }
  (void)Rollback(n);
  for (uint32_t t : tokens) {
    uint32_t next;
    (void)Transition(state_, t, &next);  // cannot fail now
    Push(state_);
    state_ = next;
  }
  return absl::OkStatus();
}

void Guide::Reset() {
  ring_.clear();
  head_ = count_ = dropped_ = 0;
  state_ = index_->start();
}

std::string Guide::ForcedContinuation(size_t max_bytes) const {
  std::string out;
  if (state_ == kFinished) return out;
  const Dfa& dfa = index_->dfa();
  uint32_t s = state_;
  while (out.size() < max_bytes) {
    int b = dfa.ForcedByte(s);
    if (b < 0) break;
    out.push_back(static_cast<char>(b));
    s = dfa.Next(s, static_cast<uint8_t>(b));
  }
  return out;
}

}  // namespace maskd
