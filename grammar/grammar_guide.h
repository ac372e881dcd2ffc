// GrammarGuide: the grammar state of one generated sequence over a shared
// GrammarIndex; the grammar counterpart of index/guide.h's Guide.
//
// A GrammarGuide starts at the grammar's start. Each advanced token must be
// allowed by the current mask; a disallowed token is FailedPrecondition and
// leaves the state unchanged. Taking an EOS id (allowed only where the text
// so far is in the language) finishes the guide: from then on only EOS ids
// are allowed. Special tokens other than EOS are never allowed.
//
// State: an EarleyParser (one Earley set per byte of the sequence's text) and
// 8 bytes per advanced token, so memory grows with the text, bounded by
// EarleyOptions::max_chart_items (items; a sequence also takes at most that
// many tokens); rollback to any earlier token is exact and costs popping
// sets, plus (amortized O(1) per item) shrinking arrays a rollback left over
// half empty. chart_bytes() is all the memory the guide holds.
// The mask and lookahead methods push and pop sets on the guide's own parser
// and reuse its scratch space, so they are not const: a GrammarGuide is not
// thread-safe; distinct guides over one index are independent.
#ifndef MASKD_GRAMMAR_GRAMMAR_GUIDE_H_
#define MASKD_GRAMMAR_GRAMMAR_GUIDE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "automaton/interrupt.h"
#include "grammar/chart_allocator.h"
#include "grammar/earley_parser.h"
#include "grammar/grammar_index.h"

namespace maskd::grammar {

class GrammarGuide {
 public:
  static absl::StatusOr<GrammarGuide> Create(std::shared_ptr<const GrammarIndex> index);

  const GrammarIndex& index() const { return *index_; }

  // Over lazy terminal DFAs (EarleyOptions::terminal_mode), a call below
  // that needs a DFA state past max_states fails with ResourceExhausted
  // (GrammarIndex::StateLimitError), the state unchanged: a refused state
  // never reads as a rejected byte.
  //
  // Every call below that runs the parser (a mask, an advance, a rollback
  // that advances again, the token budget, the forced continuation) may take
  // at most index().options().max_parser_steps parser steps, and polls
  // `interrupt` (null: none; not owned, outlives the calls it is set for):
  // past the bound the call fails with ResourceExhausted naming
  // max_parser_steps, on an interrupt with the Interrupt's status, the state
  // unchanged either way. A Fork does not inherit it.
  void SetInterrupt(const Interrupt* interrupt) { interrupt_ = interrupt; }
  // Parser steps the last such call took (past max_parser_steps: one more).
  size_t parser_steps() const { return parser_.work(); }

  // Writes the current mask into `words` (packed layout), which must hold at
  // least index().num_words() words (InvalidArgument otherwise); words past
  // that are zeroed. ResourceExhausted past an Earley limit.
  absl::Status WriteMask(absl::Span<uint32_t> words);
  // Whether `token` may be advanced now (false for ids outside the vocabulary).
  absl::StatusOr<bool> IsAllowed(uint32_t token);
  // InvalidArgument for an id outside the vocabulary, FailedPrecondition for
  // a token not allowed now; the state is unchanged on error.
  absl::Status Advance(uint32_t token);
  // All or nothing; the message names the position of the offending id.
  absl::Status Advance(absl::Span<const uint32_t> tokens);
  // Advance(tokens) with no work limit and no interrupt: for advancing again
  // tokens this guide accepted before from the same state (undoing a failed
  // step), which must not fail for having been stopped.
  absl::Status Readvance(absl::Span<const uint32_t> tokens);
  // Undoes the last `n` tokens; InvalidArgument when n > num_tokens(). Then
  // gives back what the dropped sets leave spare (EarleyParser::ReleaseSpare).
  absl::Status Rollback(size_t n);
  // Rollback(n) then Advance(tokens), all or nothing (the undone tokens are
  // advanced again when `tokens` fails); spare memory given back at the end.
  absl::Status RollbackAndAdvance(size_t n, absl::Span<const uint32_t> tokens);
  // An independent copy (shares the index).
  GrammarGuide Fork() const {
    GrammarGuide copy = *this;
    copy.interrupt_ = nullptr;
    copy.parser_.SetWorkLimit(SIZE_MAX, "", nullptr);
    return copy;
  }

  bool IsAccepting() const { return !finished_ && parser_.IsAccepting(); }
  bool IsFinished() const { return finished_; }
  // The fewest text bytes still needed before the text may end (0 when
  // accepting or finished); exact (EarleyParser::MinBytesToFinish), capped
  // at 2^32 - 1.
  uint32_t MinBytesToFinish() const;
  // Budget mode on the mask just written into `words` (WriteMask's words),
  // as Guide::ApplyTokenBudget: `tokens_left` counts the tokens the sequence
  // may still generate, the next one and a final EOS included (>= 1); every
  // non-EOS token after which MinBytesToFinish() + 2 > tokens_left is
  // cleared, and if nothing would stay, the tokens leading closest to an end
  // stay. Cost: the parser takes the bytes of the allowed tokens along the
  // token trie (one Push per trie node of their prefixes, plus one per
  // refused byte) and computes MinBytesToFinish once per allowed token;
  // ResourceExhausted past max_mask_work pushes or a parser limit, with
  // `words` and the state unchanged.
  absl::Status ApplyTokenBudget(uint32_t tokens_left, absl::Span<uint32_t> words);
  size_t num_tokens() const { return token_start_.size(); }
  // The tokens advanced since the start, in order.
  absl::Span<const uint32_t> tokens() const { return tokens_; }
  // Text bytes taken so far.
  size_t num_bytes() const { return parser_.num_sets() - 1; }
  // Bytes the guide holds: the parser's arrays by their capacity
  // (EarleyParser::allocated_bytes: sets, waiting lists, table, memo), the
  // per-token records, the mask and budget scratch, and the object itself.
  // Grows with a step, shrinks with Rollback; what a mask or look-ahead
  // walk grows stays (capacity reused by the next walk).
  size_t chart_bytes() const;

  // The bytes every accepted text must continue with from here, up to the
  // first branch or accepting point, at most `max_bytes` (jump-forward).
  absl::StatusOr<std::string> ForcedContinuation(size_t max_bytes = 256);

 private:
  GrammarGuide(std::shared_ptr<const GrammarIndex> index, EarleyParser parser)
      : index_(std::move(index)), parser_(std::move(parser)) {}

  // Starts one call's work limit on the parser (SetInterrupt).
  void BeginWork() {
    parser_.SetWorkLimit(index_->options().max_parser_steps, "max_parser_steps", interrupt_);
  }
  absl::Status AdvanceOne(uint32_t token);
  // Undoes the last `n` <= num_tokens() tokens; keeps capacity.
  void PopTokens(size_t n);
  // Shrinks what PopTokens left spare (EarleyParser::ReleaseSpare).
  void ReleaseSpare();
  // Pushes `token`'s bytes; false (parser unchanged) when one is refused.
  absl::StatusOr<bool> PushToken(uint32_t token);
  // Whether a lazy terminal DFA refused a state since `watch` began: then
  // what the call read was cut short and it must fail (StateLimitError).
  bool Refused(const RefusalWatch& watch) const {
    return index_->has_lazy_terminals() && watch.refused();
  }

  std::shared_ptr<const GrammarIndex> index_;
  EarleyParser parser_;
  // Per advanced token: its id, and the parser's set count before it.
  ChartVector<uint32_t> tokens_;
  ChartVector<uint32_t> token_start_;
  bool finished_ = false;
  size_t finished_at_ = 0;  // token_start_ index of the first EOS when finished_
  MaskScratch scratch_;
  const Interrupt* interrupt_ = nullptr;
  ChartVector<uint32_t> undone_;  // RollbackAndAdvance's scratch
  // ApplyTokenBudget's scratch: the allowed text tokens and their distances.
  ChartVector<std::pair<uint32_t, uint64_t>> budget_;
};

}  // namespace maskd::grammar

#endif  // MASKD_GRAMMAR_GRAMMAR_GUIDE_H_
