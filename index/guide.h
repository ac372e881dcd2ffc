// Guide: the constraint state of one generated sequence over a shared index.
//
// A Guide starts in the index's start state. Each advanced token must be
// allowed by the current mask; a disallowed token is an error and leaves the
// state unchanged. Taking an EOS id (allowed only where the constraint may
// end) finishes the guide: from then on only EOS ids are allowed. A Guide is
// not thread-safe; distinct Guides over one index are independent.
//
// Rollback history: the state before each of the last `rollback_window`
// advanced tokens is kept (4 bytes each, in a ring that grows up to the window
// and then overwrites its oldest entry), so a guide's memory is bounded by
// 4 * rollback_window bytes however long the sequence; a rollback reaching
// past the window is an OutOfRange error. Advancing allocates nothing once the
// ring has reached the window (amortised O(1) growth before that).
#ifndef MASKD_INDEX_GUIDE_H_
#define MASKD_INDEX_GUIDE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "index/token_index.h"

namespace maskd {

class Guide {
 public:
  // Keeps every state: rollback to the start is always possible.
  static constexpr size_t kUnboundedHistory = static_cast<size_t>(-1);

  // `rollback_window`: how many of the last tokens can be rolled back (0: none).
  explicit Guide(std::shared_ptr<const TokenIndex> index,
                 size_t rollback_window = kUnboundedHistory);

  // The guide reached from the start by `tokens` (stateless replay).
  static absl::StatusOr<Guide> Replay(std::shared_ptr<const TokenIndex> index,
                                      absl::Span<const uint32_t> tokens);

  const TokenIndex& index() const { return *index_; }
  const std::shared_ptr<const TokenIndex>& shared_index() const { return index_; }

  // Writes the current mask into `words` (packed layout; see index/token_index.h).
  // `words` must hold at least index().num_words() words; words past that are
  // zeroed (tokens past the vocabulary are never allowed). Fails with
  // InvalidArgument when `words` is too small, and over a lazy DFA with
  // ResourceExhausted (words zeroed) when its state limit refuses a state
  // the mask needs (TokenIndex::WriteMask).
  absl::Status WriteMask(absl::Span<uint32_t> words) const;
  // Same without the size check: `words` holds exactly index().num_words() words.
  absl::Status WriteMaskUnchecked(uint32_t* words) const;
  // What RollbackAndAdvance(n, tokens) followed by WriteMaskUnchecked and,
  // when tokens_left > 0, ApplyTokenBudget(tokens_left) would write, written
  // into `words` without changing the guide; the same errors. A step that
  // must change nothing when a lazy DFA's state limit refuses it calls this
  // first (the walks it makes then succeed again).
  absl::Status PeekStep(size_t n, absl::Span<const uint32_t> tokens, uint32_t tokens_left,
                        uint32_t* words) const;

  bool IsAllowed(uint32_t token) const;
  // InvalidArgument for an id outside the vocabulary width,
  // FailedPrecondition for a token not allowed now, ResourceExhausted when a
  // lazy DFA's state limit refuses its walk; the state is unchanged.
  absl::Status Advance(uint32_t token);
  // All or nothing: on error the state is as before the call. The message
  // names the position in `tokens` of the offending id.
  absl::Status Advance(absl::Span<const uint32_t> tokens);
  // Undoes the last `n` advanced tokens. InvalidArgument when n > num_tokens()
  // (past the start), OutOfRange when n > rollback_available() (past the
  // rollback window); the state is unchanged on error.
  absl::Status Rollback(size_t n);
  // Rollback(n) then Advance(tokens), all or nothing (speculative decoding:
  // replace rejected draft tokens). Allocates nothing beyond history growth.
  absl::Status RollbackAndAdvance(size_t n, absl::Span<const uint32_t> tokens);
  // Back to the start state.
  void Reset();
  // An independent copy (shares the index).
  Guide Fork() const { return *this; }

  bool IsAccepting() const;
  bool IsFinished() const { return state_ == kFinished; }
  // Tokens advanced since the start (including those past the window).
  size_t num_tokens() const { return dropped_ + count_; }
  // How many tokens can be rolled back now: min(num_tokens(), window).
  size_t rollback_available() const { return count_; }
  size_t rollback_window() const { return window_; }
  // Bytes the rollback history holds allocated (at most 4 * window rounded up
  // to the vector's growth; exactly 4 * window once the ring is full).
  size_t history_bytes() const { return ring_.capacity() * sizeof(uint32_t); }
  // DFA state, or kFinished.
  uint32_t state() const { return state_; }
  static constexpr uint32_t kFinished = 0xFFFFFFFFu;

  // Fewest bytes from here to a state where the constraint may end: 0 when
  // accepting or finished.
  uint32_t MinBytesToFinish() const;
  // Budget mode. `tokens_left`: the tokens the sequence may still generate,
  // the next one and a final EOS included (>= 1). Clears from `words` (the
  // current mask, index().num_words() words) every non-EOS token after which
  // the constraint could no longer be completed and ended with EOS within the
  // budget: token t stays iff DistanceToAccept(next(t)) + 2 <= tokens_left.
  // One token per byte is always possible where every byte is a token
  // (byte-level BPE, SentencePiece byte fallback), so a sequence that keeps to
  // these masks ends with EOS within the budget whenever the first mask's
  // budget was at least MinBytesToFinish() + 1. If nothing would stay (no such
  // token and no EOS allowed), the tokens leading closest to an end stay, so a
  // mask is never emptied. Cost: one DFA walk per allowed token, none when
  // tokens_left > MaxDistanceToAccept() + 1 (the usual case).
  // ResourceExhausted when a lazy DFA's state limit refuses one of those walks
  // (`words` is then partly cleared).
  absl::Status ApplyTokenBudget(uint32_t tokens_left, uint32_t* words) const;

  // The bytes every accepted text must continue with from here, up to the
  // first branch or accepting state, at most `max_bytes` (jump-forward).
  std::string ForcedContinuation(size_t max_bytes = 256) const;

 private:
  // The state after `token` from `from` (kFinished after EOS); the state is
  // not changed. Errors as Advance's.
  absl::Status Transition(uint32_t from, uint32_t token, uint32_t* next) const;
  // Rollback(n)'s error when it cannot roll back n tokens, else OK.
  absl::Status RollbackError(size_t n) const;
  // The mask of `state` (a DFA state or kFinished) into `words`.
  absl::Status WriteMaskOf(uint32_t state, uint32_t* words) const;
  // ApplyTokenBudget from `state`.
  absl::Status BudgetAt(uint32_t state, uint32_t tokens_left, uint32_t* words) const;

  // Appends `prev` (the state before a token just advanced) to the history,
  // dropping the oldest entry when the window is full.
  void Push(uint32_t prev);
  // The state before the n-th last advanced token (1 <= n <= count_).
  uint32_t Back(size_t n) const {
    size_t i = head_ + count_ - n;
    return ring_[i >= ring_.size() ? i - ring_.size() : i];
  }

  std::shared_ptr<const TokenIndex> index_;
  uint32_t state_;
  size_t window_;
  // The last count_ states before each advanced token, oldest at ring_[head_]
  // (circular once ring_.size() == window_); dropped_ older ones forgotten.
  std::vector<uint32_t> ring_;
  size_t head_ = 0;
  size_t count_ = 0;
  size_t dropped_ = 0;
};

}  // namespace maskd

#endif  // MASKD_INDEX_GUIDE_H_
