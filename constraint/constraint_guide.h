// ConstraintGuide: the constraint state of one generated sequence over a
// shared ConstraintIndex, whatever its route: a Guide (index/guide.h) on the
// regex route, a GrammarGuide (grammar/grammar_guide.h) on the grammar route.
// Sessions hold one; it is the only place the two are told apart.
//
// Semantics are Guide's (advance, rollback, EOS finishes the sequence), with
// the differences of the grammar route:
//  - Rollback window: a grammar guide can always roll back to its start
//    (rollback_available() == num_tokens()); its memory is bounded by the
//    parser's max_chart_items instead of the window.
//  - Mask writes and advances can fail (RESOURCE_EXHAUSTED past a parser,
//    mask-work or parser-step limit; the Interrupt's status when stopped);
//    Step undoes its advance then, so the state is unchanged.
//  - Token budgets (ApplyTokenBudget) work on both routes; on a grammar
//    they cost a parser walk of the allowed tokens (GrammarGuide's).
//  - MinBytesToFinish is exact on both routes (on the grammar route from the
//    Earley chart: EarleyParser::MinBytesToFinish).
//  - Chart budget: given one, a grammar guide charges its parser chart's
//    bytes (GrammarGuide::chart_bytes) to it after each step and releases
//    them as the chart shrinks and when destroyed; a step whose chart would
//    not fit fails with RESOURCE_EXHAUSTED and is undone, and so does a Fork
//    (its copy of the chart is charged too). One budget shared by every
//    session bounds all grammar sessions' memory together.
// Not thread-safe (a grammar guide's mask methods use its own parser);
// distinct guides over one index are independent.
#ifndef MASKD_CONSTRAINT_CONSTRAINT_GUIDE_H_
#define MASKD_CONSTRAINT_CONSTRAINT_GUIDE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "automaton/interrupt.h"
#include "constraint/constraint_index.h"
#include "grammar/grammar_guide.h"
#include "index/guide.h"
#include "tokenizer/mask_budget.h"

namespace maskd {

class ConstraintGuide {
 public:
  static constexpr size_t kUnboundedHistory = Guide::kUnboundedHistory;

  // A guide at the start. `rollback_window` as Guide's (regex route only);
  // `chart_budget` (may be null; grammar route only) as above. Fails only when
  // a grammar's start set passes a parser limit or the budget.
  static absl::StatusOr<ConstraintGuide> Create(std::shared_ptr<const ConstraintIndex> index,
                                                size_t rollback_window = kUnboundedHistory,
                                                std::shared_ptr<MaskBudget> chart_budget = nullptr);
  // The guide reached from the start by `tokens` (stateless replay), with
  // `interrupt` set (SetInterrupt) before the tokens are advanced.
  static absl::StatusOr<ConstraintGuide> Replay(std::shared_ptr<const ConstraintIndex> index,
                                                absl::Span<const uint32_t> tokens,
                                                const Interrupt* interrupt = nullptr);

  // On the grammar route, the calls that follow poll `interrupt` (null: none;
  // not owned: the caller clears it before it dies) and fail with its status,
  // state unchanged, as with any error (GrammarGuide::SetInterrupt); each
  // mask, advance and budget walk is also bounded by the index's
  // max_parser_steps. The regex route's calls are bounded per token and
  // never poll it.
  void SetInterrupt(const Interrupt* interrupt);

  const ConstraintIndex& index() const { return *index_; }
  uint32_t num_words() const { return index_->num_words(); }

  // One decoding step, all or nothing: undoes `rollback` tokens, advances by
  // `tokens` and writes the next mask into `row` (row.size() >= num_words();
  // words past it are zeroed); `max_tokens_left` > 0 applies a token budget
  // (Guide::ApplyTokenBudget). On error the state is unchanged and every word
  // of `row` is zero. Errors: INVALID_ARGUMENT for a rollback past the start
  // or a bad token id, OUT_OF_RANGE past the rollback window,
  // FAILED_PRECONDITION for a token not allowed, RESOURCE_EXHAUSTED past a
  // grammar limit (the budget's walk included).
  absl::Status Step(size_t rollback, absl::Span<const uint32_t> tokens, absl::Span<uint32_t> row,
                    uint32_t max_tokens_left = 0);

  // The current mask, as Guide::WriteMask (words past num_words() zeroed).
  absl::Status WriteMask(absl::Span<uint32_t> words);
  // Budget mode on the mask just written into `words` (num_words() words);
  // on a grammar, ResourceExhausted past a limit with `words` unchanged.
  absl::Status ApplyTokenBudget(uint32_t tokens_left, absl::Span<uint32_t> words);

  // All or nothing; messages as Guide's.
  absl::Status Advance(absl::Span<const uint32_t> tokens);
  absl::Status Rollback(size_t n);

  bool IsAccepting() const;
  bool IsFinished() const;
  size_t num_tokens() const;
  size_t rollback_available() const;
  // Bytes of per-token history held (the regex route's rollback ring, the
  // grammar route's token records; the parser's chart is not counted).
  size_t history_bytes() const;
  uint32_t MinBytesToFinish() const;
  // Jump-forward bytes, as Guide's; empty when a grammar's look-ahead would
  // pass a parser limit.
  std::string ForcedContinuation(size_t max_bytes = 256);

  // An independent copy (shares the index and the chart budget).
  // ResourceExhausted when the copy's chart does not fit the budget.
  absl::StatusOr<ConstraintGuide> Fork() const;

  ConstraintGuide(const ConstraintGuide&) = delete;
  ConstraintGuide& operator=(const ConstraintGuide&) = delete;
  ConstraintGuide(ConstraintGuide&& other) noexcept;
  ConstraintGuide& operator=(ConstraintGuide&& other) noexcept;
  ~ConstraintGuide();

 private:
  ConstraintGuide(std::shared_ptr<const ConstraintIndex> index,
                  std::variant<Guide, grammar::GrammarGuide> state)
      : index_(std::move(index)), state_(std::move(state)) {}

  absl::Status StepRegex(Guide& g, size_t rollback, absl::Span<const uint32_t> tokens,
                         absl::Span<uint32_t> row, uint32_t max_tokens_left);
  absl::Status StepGrammar(grammar::GrammarGuide& g, size_t rollback,
                           absl::Span<const uint32_t> tokens, absl::Span<uint32_t> row,
                           uint32_t max_tokens_left);
  // Charges or releases the difference between the chart's bytes and those
  // charged; false (nothing charged) when the budget refuses.
  bool Recharge();

  std::shared_ptr<const ConstraintIndex> index_;
  std::variant<Guide, grammar::GrammarGuide> state_;
  std::vector<uint32_t> undone_;  // StepGrammar's scratch: the tokens rolled back
  std::shared_ptr<MaskBudget> chart_budget_;  // null: none
  size_t charged_ = 0;                        // bytes charged to chart_budget_
};

}  // namespace maskd

#endif  // MASKD_CONSTRAINT_CONSTRAINT_GUIDE_H_
