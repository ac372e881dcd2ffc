#include "constraint/constraint_guide.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace maskd {
namespace {

absl::Status RollbackPastStart(size_t rollback, size_t accepted) {
  return absl::InvalidArgumentError(
      absl::StrCat("rollback of ", rollback, " tokens, only ", accepted, " accepted"));
}

absl::Status ChartOverBudget(const MaskBudget& budget) {
  return absl::ResourceExhaustedError(
      absl::StrCat("the parser charts of grammar sessions would exceed their budget of ",
                   budget.max_bytes(), " bytes (--max-grammar-chart-bytes)"));
}

}  // namespace

absl::StatusOr<ConstraintGuide> ConstraintGuide::Create(std::shared_ptr<const ConstraintIndex> index,
                                                        size_t rollback_window,
                                                        std::shared_ptr<MaskBudget> chart_budget) {
  if (index == nullptr) return absl::InvalidArgumentError("ConstraintGuide needs an index");
  if (index->token_index() != nullptr) {
    Guide guide(index->token_index(), rollback_window);
    return ConstraintGuide(std::move(index), std::move(guide));
  }
  auto guide = grammar::GrammarGuide::Create(index->grammar_index());
  if (!guide.ok()) return guide.status();
  ConstraintGuide out(std::move(index), *std::move(guide));
  out.chart_budget_ = std::move(chart_budget);
  if (!out.Recharge()) return ChartOverBudget(*out.chart_budget_);
  return out;
}

ConstraintGuide::ConstraintGuide(ConstraintGuide&& other) noexcept
    : index_(std::move(other.index_)),
      state_(std::move(other.state_)),
      undone_(std::move(other.undone_)),
      chart_budget_(std::move(other.chart_budget_)),
      charged_(std::exchange(other.charged_, 0)) {}

ConstraintGuide& ConstraintGuide::operator=(ConstraintGuide&& other) noexcept {
  if (this != &other) {
    if (chart_budget_ != nullptr) chart_budget_->Release(charged_);
    index_ = std::move(other.index_);
    state_ = std::move(other.state_);
    undone_ = std::move(other.undone_);
    chart_budget_ = std::move(other.chart_budget_);
    charged_ = std::exchange(other.charged_, 0);
  }
  return *this;
}

ConstraintGuide::~ConstraintGuide() {
  if (chart_budget_ != nullptr) chart_budget_->Release(charged_);
}

absl::StatusOr<ConstraintGuide> ConstraintGuide::Fork() const {
  ConstraintGuide copy(index_, state_);
  copy.chart_budget_ = chart_budget_;
  if (!copy.Recharge()) return ChartOverBudget(*chart_budget_);
  return copy;
}

bool ConstraintGuide::Recharge() {
  const grammar::GrammarGuide* g = std::get_if<grammar::GrammarGuide>(&state_);
  if (chart_budget_ == nullptr || g == nullptr) return true;
  const size_t bytes = g->chart_bytes();
  if (bytes > charged_) {
    if (!chart_budget_->TryCharge(bytes - charged_)) return false;
  } else {
    chart_budget_->Release(charged_ - bytes);
  }
  charged_ = bytes;
  return true;
}

absl::StatusOr<ConstraintGuide> ConstraintGuide::Replay(std::shared_ptr<const ConstraintIndex> index,
                                                        absl::Span<const uint32_t> tokens,
                                                        const Interrupt* interrupt) {
  auto guide = Create(std::move(index));
  if (!guide.ok()) return guide.status();
  guide->SetInterrupt(interrupt);
  if (absl::Status s = guide->Advance(tokens); !s.ok()) return s;
  return guide;
}

void ConstraintGuide::SetInterrupt(const Interrupt* interrupt) {
  if (auto* g = std::get_if<grammar::GrammarGuide>(&state_)) g->SetInterrupt(interrupt);
}

absl::Status ConstraintGuide::Step(size_t rollback, absl::Span<const uint32_t> tokens,
                                   absl::Span<uint32_t> row, uint32_t max_tokens_left) {
  absl::Status s;
  if (row.size() < num_words()) {
    s = absl::InvalidArgumentError(absl::StrCat("mask row holds ", row.size(),
                                                " words; the vocabulary needs ", num_words()));
  } else if (rollback > num_tokens()) {
    s = RollbackPastStart(rollback, num_tokens());
  } else if (Guide* g = std::get_if<Guide>(&state_)) {
    s = StepRegex(*g, rollback, tokens, row, max_tokens_left);
  } else {
    s = StepGrammar(std::get<grammar::GrammarGuide>(state_), rollback, tokens, row,
                    max_tokens_left);
  }
  if (!s.ok()) {
    std::fill(row.begin(), row.end(), 0u);
    return s;
  }
  std::fill(row.begin() + num_words(), row.end(), 0u);
  return s;
}

absl::Status ConstraintGuide::StepRegex(Guide& g, size_t rollback,
                                        absl::Span<const uint32_t> tokens,
                                        absl::Span<uint32_t> row, uint32_t max_tokens_left) {
  absl::Status s;
  if (g.index().dfa().lazy()) {
    // The step's mask first, changing nothing: a state the lazy DFA's limit
    // refuses fails the step here, the session as it was. The advance below
    // then walks what this built and cannot fail.
    if (s = g.PeekStep(rollback, tokens, max_tokens_left, row.data()); !s.ok()) return s;
    return g.RollbackAndAdvance(rollback, tokens);
  }
  if (rollback > g.rollback_available()) {
    s = g.Rollback(rollback);  // OUT_OF_RANGE: past the window
  } else if (rollback == 0) {
    s = g.Advance(tokens);
  } else if (tokens.empty()) {
    s = g.Rollback(rollback);
  } else {
    s = g.RollbackAndAdvance(rollback, tokens);
  }
  if (!s.ok()) return s;
  (void)g.WriteMaskUnchecked(row.data());  // an eager DFA's masks cannot fail
  if (max_tokens_left > 0) (void)g.ApplyTokenBudget(max_tokens_left, row.data());
  return s;
}

absl::Status ConstraintGuide::StepGrammar(grammar::GrammarGuide& g, size_t rollback,
                                          absl::Span<const uint32_t> tokens,
                                          absl::Span<uint32_t> row,
                                          uint32_t max_tokens_left) {
  absl::Span<const uint32_t> advanced = g.tokens();
  undone_.assign(advanced.end() - static_cast<ptrdiff_t>(rollback), advanced.end());
  if (absl::Status s = g.RollbackAndAdvance(rollback, tokens); !s.ok()) return s;
  absl::Status s = g.WriteMask(row);
  if (s.ok() && max_tokens_left > 0) s = g.ApplyTokenBudget(max_tokens_left, row);
  if (s.ok() && !Recharge()) s = ChartOverBudget(*chart_budget_);
  if (!s.ok()) {
    // Back to the state before the step: the same tokens from the same
    // parser state are accepted as before.
    (void)g.Rollback(tokens.size());
    if (absl::Status redo = g.Readvance(undone_); !redo.ok()) {
      return absl::InternalError(absl::StrCat("step not undone: ", redo.message()));
    }
    (void)Recharge();  // the chart as before the step: fits what was charged
  }
  return s;
}

absl::Status ConstraintGuide::WriteMask(absl::Span<uint32_t> words) {
  if (Guide* g = std::get_if<Guide>(&state_)) return g->WriteMask(words);
  return std::get<grammar::GrammarGuide>(state_).WriteMask(words);
}

absl::Status ConstraintGuide::ApplyTokenBudget(uint32_t tokens_left, absl::Span<uint32_t> words) {
  if (const Guide* g = std::get_if<Guide>(&state_)) return g->ApplyTokenBudget(tokens_left, words.data());
  return std::get<grammar::GrammarGuide>(state_).ApplyTokenBudget(tokens_left, words);
}

absl::Status ConstraintGuide::Advance(absl::Span<const uint32_t> tokens) {
  if (Guide* g = std::get_if<Guide>(&state_)) return g->Advance(tokens);
  grammar::GrammarGuide& g = std::get<grammar::GrammarGuide>(state_);
  if (absl::Status s = g.Advance(tokens); !s.ok()) return s;
  if (!Recharge()) {
    (void)g.Rollback(tokens.size());
    return ChartOverBudget(*chart_budget_);
  }
  return absl::OkStatus();
}

absl::Status ConstraintGuide::Rollback(size_t n) {
  if (Guide* g = std::get_if<Guide>(&state_)) return g->Rollback(n);
  absl::Status s = std::get<grammar::GrammarGuide>(state_).Rollback(n);
  (void)Recharge();  // shrinks: always fits
  return s;
}

bool ConstraintGuide::IsAccepting() const {
  return std::visit([](const auto& g) { return g.IsAccepting(); }, state_);
}

bool ConstraintGuide::IsFinished() const {
  return std::visit([](const auto& g) { return g.IsFinished(); }, state_);
}

size_t ConstraintGuide::num_tokens() const {
  return std::visit([](const auto& g) { return g.num_tokens(); }, state_);
}

size_t ConstraintGuide::rollback_available() const {
  if (const Guide* g = std::get_if<Guide>(&state_)) return g->rollback_available();
  return num_tokens();
}

size_t ConstraintGuide::history_bytes() const {
  if (const Guide* g = std::get_if<Guide>(&state_)) return g->history_bytes();
  return num_tokens() * 2 * sizeof(uint32_t);
}

uint32_t ConstraintGuide::MinBytesToFinish() const {
  if (const Guide* g = std::get_if<Guide>(&state_)) return g->MinBytesToFinish();
  return std::get<grammar::GrammarGuide>(state_).MinBytesToFinish();
}

std::string ConstraintGuide::ForcedContinuation(size_t max_bytes) {
  if (Guide* g = std::get_if<Guide>(&state_)) return g->ForcedContinuation(max_bytes);
  absl::StatusOr<std::string> forced =
      std::get<grammar::GrammarGuide>(state_).ForcedContinuation(max_bytes);
  return forced.ok() ? *std::move(forced) : std::string();
}

}  // namespace maskd
