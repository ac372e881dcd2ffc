// ConstraintGuide over both routes: on the regex route it steps exactly as
// Guide does; on the grammar route its masks are brute force over
// GrammarGuide::IsAllowed, and every failing Step leaves the state as it was.
#include "constraint/constraint_guide.h"

#include <random>
#include <string>
#include <vector>

#include "automaton/interrupt.h"
#include "constraint/constraint_compiler.h"
#include "gmock/gmock.h"
#include "grammar/grammar_guide.h"
#include "gtest/gtest.h"
#include "index/guide.h"
#include "tests/index/test_util.h"

namespace maskd {
namespace {

using ::maskd::testing::BundledTokenizer;
using ::maskd::testing::BundledVocabulary;
using ::testing::HasSubstr;

constexpr char kJsonishGbnf[] = R"(root ::= "{" ws pair (ws "," ws pair)* ws "}"
pair ::= "\"" [a-z]+ "\"" ws ":" ws value
value ::= [0-9]+ | "true" | "false" | root
ws ::= [ ]*
)";

std::shared_ptr<const ConstraintIndex> Compile(const Constraint& c,
                                               const CompileLimits& limits = {}) {
  auto compiled = ConstraintCompiler(limits).Compile(c);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  return compiled.ok() ? compiled->index : nullptr;
}

std::shared_ptr<const ConstraintIndex> CompileGbnf(const std::string& text,
                                                   const CompileLimits& limits = {}) {
  return Compile(Constraint::Grammar(text, GrammarFormat::kGbnf, BundledTokenizer()), limits);
}

// "a" tokens that `start: start start | "a"` takes more than
// EarleyParser::kInterruptPollSteps parser steps to advance (its sets grow
// with the text; its masks stay cheap: few tokens are all "a").
constexpr size_t kInterruptedTokens = 48;

// The id of the token whose bytes are `text`.
uint32_t TokenOf(const std::string& text) {
  const Vocabulary& v = *BundledVocabulary();
  for (uint32_t t = 0; t < v.size(); ++t) {
    if (v.has_token(t) && !v.is_special(t) && v.bytes(t) == text) return t;
  }
  ADD_FAILURE() << "no token for " << text;
  return 0;
}

std::vector<uint32_t> Allowed(const std::vector<uint32_t>& row, uint32_t vocab_size) {
  std::vector<uint32_t> out;
  for (uint32_t t = 0; t < vocab_size; ++t) {
    if (row[t >> 5] >> (t & 31) & 1) out.push_back(t);
  }
  return out;
}

TEST(ConstraintGuide, RegexRouteStepsAsGuide) {
  auto index = Compile(Constraint::Regex("(ab|cd)+[0-9]{1,3}", BundledTokenizer()));
  ASSERT_NE(index, nullptr);
  ASSERT_EQ(index->route(), ConstraintRoute::kRegex);
  auto guide = ConstraintGuide::Create(index, 8);
  ASSERT_TRUE(guide.ok());
  Guide reference(index->token_index(), 8);
  std::vector<uint32_t> row(index->num_words() + 3, 0xFFFFFFFFu), want(index->num_words());
  std::mt19937 rng(7);
  for (int step = 0; step < 12; ++step) {
    EXPECT_TRUE(reference.WriteMaskUnchecked(want.data()).ok());
    std::vector<uint32_t> allowed = Allowed(want, index->vocabulary().size());
    ASSERT_FALSE(allowed.empty());
    const uint32_t t = allowed[rng() % allowed.size()];
    ASSERT_TRUE(reference.Advance(t).ok());
    ASSERT_TRUE(guide->Step(0, {t}, absl::MakeSpan(row)).ok());
    EXPECT_TRUE(reference.WriteMaskUnchecked(want.data()).ok());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), row.begin())) << "step " << step;
    EXPECT_EQ(row[index->num_words()], 0u);  // padding zeroed
    EXPECT_EQ(guide->IsAccepting(), reference.IsAccepting());
    EXPECT_EQ(guide->MinBytesToFinish(), reference.MinBytesToFinish());
    EXPECT_EQ(guide->num_tokens(), reference.num_tokens());
    if (reference.IsFinished()) break;
  }
  // Past the window: OUT_OF_RANGE, row zeroed, state kept.
  const size_t n = guide->num_tokens();
  absl::Status s = guide->Step(9, {}, absl::MakeSpan(row));
  EXPECT_EQ(s.code(), n > 8 ? absl::StatusCode::kOutOfRange : absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(guide->num_tokens(), n);
  EXPECT_THAT(row, ::testing::Each(0u));
}

// A lazy DFA (the regex route's default) builds states as steps reach them;
// the step that needs one past max_dfa_states fails with RESOURCE_EXHAUSTED
// and leaves the session as it was, and an eager build of the same regex
// refuses it at compile time.
TEST(ConstraintGuide, LazyRegexStepPastTheStateLimitChangesNothing) {
  CompileLimits limits;
  limits.max_dfa_states = 2000;
  const Constraint c = Constraint::Regex("[ab]*a[ab]{15}", BundledTokenizer());
  auto index = Compile(c, limits);
  ASSERT_NE(index, nullptr);
  ASSERT_TRUE(index->token_index()->dfa().lazy());
  Constraint eager = c;
  eager.options.eager_dfa = true;
  auto refused = ConstraintCompiler(limits).Compile(eager);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();

  auto guide = ConstraintGuide::Create(index);
  ASSERT_TRUE(guide.ok());
  const uint32_t ab[2] = {TokenOf("a"), TokenOf("b")};
  std::vector<uint32_t> row(index->num_words()), last(index->num_words());
  std::mt19937 rng(3);
  int ok_steps = 0;
  absl::Status s;
  for (int step = 0; step < 5000 && s.ok(); ++step) {
    const size_t before = guide->num_tokens();
    s = guide->Step(0, {ab[rng() & 1]}, absl::MakeSpan(row));
    if (s.ok()) {
      ++ok_steps;
      last = row;
      continue;
    }
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("more than 2000 states"));
    EXPECT_EQ(guide->num_tokens(), before);
    EXPECT_THAT(row, ::testing::Each(0u));
  }
  ASSERT_FALSE(s.ok()) << "the state limit was never reached";
  EXPECT_GT(ok_steps, 0);
  EXPECT_LE(index->num_dfa_states(), 2000u);
  // The session goes on from where it was: the same mask as before the
  // failed step.
  ASSERT_TRUE(guide->Step(0, {}, absl::MakeSpan(row)).ok());
  EXPECT_EQ(row, last);
}

TEST(ConstraintGuide, GrammarRouteMasksAreBruteForce) {
  auto index = CompileGbnf(kJsonishGbnf);
  ASSERT_NE(index, nullptr);
  ASSERT_EQ(index->route(), ConstraintRoute::kGrammar);
  EXPECT_GT(index->MemoryBytes(), 0u);
  auto guide = ConstraintGuide::Create(index);
  ASSERT_TRUE(guide.ok()) << guide.status();
  auto oracle = grammar::GrammarGuide::Create(index->grammar_index());
  ASSERT_TRUE(oracle.ok());
  const uint32_t vocab_size = index->vocabulary().size();
  std::vector<uint32_t> row(index->num_words());
  std::mt19937 rng(11);
  ASSERT_TRUE(guide->Step(0, {}, absl::MakeSpan(row)).ok());
  for (int step = 0; step < 25 && !guide->IsFinished(); ++step) {
    std::vector<uint32_t> allowed = Allowed(row, vocab_size);
    std::vector<uint32_t> brute;
    for (uint32_t t = 0; t < vocab_size; ++t) {
      auto ok = oracle->IsAllowed(t);
      ASSERT_TRUE(ok.ok());
      if (*ok) brute.push_back(t);
    }
    ASSERT_EQ(allowed, brute) << "step " << step;
    ASSERT_FALSE(allowed.empty());
    const uint32_t t = allowed[rng() % allowed.size()];
    ASSERT_TRUE(oracle->Advance(t).ok());
    ASSERT_TRUE(guide->Step(0, {t}, absl::MakeSpan(row)).ok());
    EXPECT_EQ(guide->IsAccepting(), oracle->IsAccepting());
    // The distance itself is checked against a search (tests/grammar/earley_min_bytes_test.cc).
    EXPECT_EQ(guide->MinBytesToFinish() == 0, guide->IsAccepting());
  }
  EXPECT_EQ(guide->rollback_available(), guide->num_tokens());
  // The terminals the walk reached have their DFAs now (deferred_dfa.h).
  EXPECT_GT(index->num_dfa_states(), 0u);
}

TEST(ConstraintGuide, GrammarStepIsAllOrNothing) {
  auto index = CompileGbnf(kJsonishGbnf);
  ASSERT_NE(index, nullptr);
  auto guide = ConstraintGuide::Create(index);
  ASSERT_TRUE(guide.ok());
  std::vector<uint32_t> row(index->num_words()), before(index->num_words());
  const std::vector<uint32_t> prefix = {TokenOf("{"), TokenOf("\""), TokenOf("a"), TokenOf("\"")};
  ASSERT_TRUE(guide->Step(0, prefix, absl::MakeSpan(before)).ok());
  // Roll back two tokens, then a token not allowed there: nothing changes.
  absl::Status s = guide->Step(2, {TokenOf("}")}, absl::MakeSpan(row));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("tokens[0]"));
  EXPECT_THAT(row, ::testing::Each(0u));
  EXPECT_EQ(guide->num_tokens(), prefix.size());
  ASSERT_TRUE(guide->Step(0, {}, absl::MakeSpan(row)).ok());
  EXPECT_EQ(row, before);
  // Rolling back past the start: refused before any change.
  EXPECT_EQ(guide->Step(5, {}, absl::MakeSpan(row)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(guide->num_tokens(), prefix.size());
  // Budget mode: a non-empty subset of the plain mask. After {"a": with 3
  // tokens left (the next, one more, EOS) a digit stays, a nested object does not.
  std::vector<uint32_t> budgeted(index->num_words()), plain(index->num_words());
  ASSERT_TRUE(guide->Step(0, {TokenOf(":")}, absl::MakeSpan(budgeted), 3).ok());
  ASSERT_TRUE(guide->Step(0, {}, absl::MakeSpan(plain)).ok());
  for (size_t w = 0; w < plain.size(); ++w) EXPECT_EQ(budgeted[w] & ~plain[w], 0u) << w;
  const uint32_t one = TokenOf("1"), quote = TokenOf("{");
  EXPECT_TRUE((budgeted[one >> 5] >> (one & 31)) & 1);
  EXPECT_TRUE((plain[quote >> 5] >> (quote & 31)) & 1);
  EXPECT_FALSE((budgeted[quote >> 5] >> (quote & 31)) & 1);
  ASSERT_TRUE(guide->Rollback(1).ok());
  EXPECT_EQ(guide->num_tokens(), prefix.size());
  // A rollback that is replaced: the same as stepping there directly.
  ASSERT_TRUE(guide->Step(1, {TokenOf("\":")}, absl::MakeSpan(row)).ok());
  auto direct = ConstraintGuide::Replay(index, {prefix[0], prefix[1], prefix[2], TokenOf("\":")});
  ASSERT_TRUE(direct.ok()) << direct.status();
  std::vector<uint32_t> want(index->num_words());
  ASSERT_TRUE(direct->WriteMask(absl::MakeSpan(want)).ok());
  EXPECT_EQ(row, want);
  // Forks are independent.
  auto fork = guide->Fork();
  ASSERT_TRUE(fork.ok());
  ASSERT_TRUE(fork->Step(2, {}, absl::MakeSpan(row)).ok());
  EXPECT_EQ(fork->num_tokens(), 2u);
  EXPECT_EQ(guide->num_tokens(), 4u);
}

// A mask that passes max_mask_work fails the step; the tokens it advanced
// are undone, so the guide is where it was. Searches the limits for one that
// admits some mask of a walk and refuses the next.
TEST(ConstraintGuide, GrammarMaskOverWorkUndoesTheStep) {
  const std::vector<uint32_t> walk = {TokenOf("{"),  TokenOf("\""), TokenOf("ab"), TokenOf("\":"),
                                      TokenOf("{"),  TokenOf("\""), TokenOf("c"),  TokenOf("\":"),
                                      TokenOf("1"),  TokenOf("}"),   TokenOf("}")};
  int found = 0;
  for (size_t work = 1; work <= (size_t{1} << 22); work *= 2) {
    CompileLimits limits;
    limits.grammar_index.max_mask_work = work;
    auto index = CompileGbnf(kJsonishGbnf, limits);
    ASSERT_NE(index, nullptr);
    auto guide = ConstraintGuide::Create(index);
    ASSERT_TRUE(guide.ok());
    std::vector<uint32_t> row(index->num_words()), before(index->num_words());
    if (!guide->Step(0, {}, absl::MakeSpan(before)).ok()) continue;  // start mask over the limit
    for (size_t i = 0; i < walk.size(); ++i) {
      std::fill(row.begin(), row.end(), 0xFFFFFFFFu);
      absl::Status s = guide->Step(0, {walk[i]}, absl::MakeSpan(row));
      if (s.ok()) {
        before = row;
        continue;
      }
      ++found;
      EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
      EXPECT_THAT(s.message(), HasSubstr("max_mask_work"));
      EXPECT_THAT(row, ::testing::Each(0u));
      EXPECT_EQ(guide->num_tokens(), i);
      ASSERT_TRUE(guide->Step(0, {}, absl::MakeSpan(row)).ok());
      EXPECT_EQ(row, before);
      break;
    }
  }
  EXPECT_GT(found, 0) << "no max_mask_work admits one mask of the walk and refuses the next";
}

// Issue #24 (1b): a step stopped by its Interrupt (the caller gave up) fails
// with the Interrupt's status and is undone: the tokens it rolled back are
// advanced again whatever the Interrupt says, so the guide is where it was.
TEST(ConstraintGuide, InterruptedGrammarStepIsUndone) {
  auto index = Compile(
      Constraint::Grammar("start: start start | \"a\"\n", GrammarFormat::kLark, BundledTokenizer()));
  ASSERT_NE(index, nullptr);
  auto guide = ConstraintGuide::Create(index);
  ASSERT_TRUE(guide.ok());
  const std::vector<uint32_t> as(kInterruptedTokens, TokenOf("a"));
  std::vector<uint32_t> row(index->num_words()), before(index->num_words());
  ASSERT_TRUE(guide->Step(0, as, absl::MakeSpan(before)).ok());
  FlagInterrupt cancel;
  cancel.Cancel();
  guide->SetInterrupt(&cancel);
  // Rolls back every token and advances them again: the advance alone takes
  // more steps than one poll period, so the redo runs past a poll too.
  std::fill(row.begin(), row.end(), 0xFFFFFFFFu);
  absl::Status s = guide->Step(as.size(), as, absl::MakeSpan(row));
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_THAT(row, ::testing::Each(0u));
  EXPECT_EQ(guide->num_tokens(), as.size());
  guide->SetInterrupt(nullptr);
  ASSERT_TRUE(guide->Step(0, {}, absl::MakeSpan(row)).ok());
  EXPECT_EQ(row, before);
}

// Grammar guides charge their charts to a shared budget: the step that would
// pass it fails and is undone, forks are charged, and everything is released.
TEST(ConstraintGuide, ChartBudgetBoundsGrammarGuidesTogether) {
  auto index = CompileGbnf(kJsonishGbnf);
  ASSERT_NE(index, nullptr);
  const std::vector<uint32_t> walk = {TokenOf("{"), TokenOf("\""), TokenOf("ab"), TokenOf("\":"),
                                      TokenOf("{"), TokenOf("\""), TokenOf("c"), TokenOf("\":")};
  // What the whole walk's chart takes, measured with an unbounded budget.
  auto unbounded = std::make_shared<MaskBudget>(uint64_t{1} << 40);
  uint64_t full = 0, start = 0;
  {
    auto g = ConstraintGuide::Create(index, ConstraintGuide::kUnboundedHistory, unbounded);
    ASSERT_TRUE(g.ok());
    start = unbounded->used();
    EXPECT_GT(start, 0u);
    std::vector<uint32_t> row(index->num_words());
    ASSERT_TRUE(g->Step(0, walk, absl::MakeSpan(row)).ok());
    full = unbounded->used();
    EXPECT_GT(full, start);
    ASSERT_TRUE(g->Rollback(walk.size()).ok());
    // Charged as held: arrays this small keep their capacity after a
    // rollback (grammar_guide_test's ChartBytes* tests check large ones
    // shrink and the charge with them).
    EXPECT_LE(unbounded->used(), full);
    EXPECT_GE(unbounded->used(), start);
  }
  EXPECT_EQ(unbounded->used(), 0u);  // and when the guide goes

  // A budget that holds the whole walk's chart, but not beside a fork's.
  auto budget = std::make_shared<MaskBudget>(full + start - 1);
  auto g = ConstraintGuide::Create(index, ConstraintGuide::kUnboundedHistory, budget);
  ASSERT_TRUE(g.ok());
  std::vector<uint32_t> row(index->num_words(), 0xFFFFFFFFu);
  auto fork = g->Fork();  // charged: two start charts
  ASSERT_TRUE(fork.ok());
  EXPECT_EQ(budget->used(), 2 * start);
  absl::Status s = g->Step(0, walk, absl::MakeSpan(row));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("--max-grammar-chart-bytes"));
  EXPECT_THAT(row, ::testing::Each(0u));
  EXPECT_EQ(g->num_tokens(), 0u);
  EXPECT_EQ(budget->used(), 2 * start);
  // Without the fork there is room.
  *fork = std::move(*g);  // releases the fork's chart, takes g's charge
  EXPECT_EQ(budget->used(), start);
  EXPECT_TRUE(fork->Step(0, walk, absl::MakeSpan(row)).ok());
  EXPECT_EQ(budget->used(), full);
}

TEST(ConstraintGuide, CompileReportsGrammarErrorsAndLimits) {
  auto context = BundledTokenizer();
  const ConstraintCompiler compiler;
  auto bad = compiler.Compile(Constraint::Grammar("root ::= [z-a]\n", GrammarFormat::kGbnf, context));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("line 1, column"));
  EXPECT_EQ(FailedStage(bad.status()), CompileStage::kConvert);

  CompileLimits small;
  small.grammar.max_text_bytes = 8;
  auto big =
      ConstraintCompiler(small).Compile(Constraint::Grammar(kJsonishGbnf, GrammarFormat::kGbnf, context));
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), HasSubstr("max_text_bytes"));

  CompileLimits capped;
  capped.max_dfa_states = 2;
  auto states = ConstraintCompiler(capped).Compile(
      Constraint::Grammar("start: /[a-z]{1,20}/\n", GrammarFormat::kLark, context));
  EXPECT_EQ(states.status().code(), absl::StatusCode::kResourceExhausted) << states.status();

  std::atomic<bool> cancel{true};
  CompileBudget cancelled;
  cancelled.cancel = &cancel;
  const Constraint jsonish = Constraint::Grammar(kJsonishGbnf, GrammarFormat::kGbnf, context);
  EXPECT_EQ(compiler.Compile(jsonish, cancelled).status().code(), absl::StatusCode::kCancelled);
  CompileBudget expired;
  expired.deadline = absl::Now() - absl::Seconds(1);
  EXPECT_EQ(compiler.Compile(jsonish, expired).status().code(),
            absl::StatusCode::kDeadlineExceeded);

  for (auto [format, text] : {std::pair{GrammarFormat::kLark, "start: \"a\" | \"b\"\n"},
                              std::pair{GrammarFormat::kGbnf, "root ::= \"a\" | \"b\"\n"},
                              std::pair{GrammarFormat::kEbnf, "root ::= \"a\" | \"b\"\n"}}) {
    auto ok = compiler.Compile(Constraint::Grammar(text, format, context));
    ASSERT_TRUE(ok.ok()) << GrammarFormatName(format) << ": " << ok.status();
    EXPECT_EQ(ok->index->route(), ConstraintRoute::kGrammar);
    EXPECT_TRUE(ok->warnings.empty());
  }
}

}  // namespace
}  // namespace maskd
