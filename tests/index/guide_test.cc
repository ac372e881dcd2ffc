// Guide: advance, rollback, fork and stateless replay give the same masks as
// straight-line advancing; every error leaves the state unchanged.
#include "index/guide.h"

#include <bitset>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "index/random_walk.h"
#include "tests/index/test_util.h"
#include "tokenizer/mask_bits.h"

namespace maskd {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const TokenIndex> Compile(const std::string& regex) {
  auto index = CompileRegex(regex, testing::BundledTokenizer());
  EXPECT_TRUE(index.ok()) << index.status();
  return *index;
}

std::vector<uint32_t> MaskOf(const Guide& g) {
  std::vector<uint32_t> m(g.index().num_words());
  EXPECT_TRUE(g.WriteMask(absl::MakeSpan(m)).ok());
  return m;
}

// Token id whose bytes are exactly `text`.
uint32_t TokenFor(const Vocabulary& v, const std::string& text) {
  for (uint32_t t = 0; t < v.size(); ++t) {
    if (v.has_token(t) && !v.is_special(t) && v.bytes(t) == text) return t;
  }
  ADD_FAILURE() << "no token for '" << text << "'";
  return 0;
}

constexpr char kJsonish[] = R"re(\{"id": [0-9]{1,6}, "tags": \[("[a-z]{1,8}"(, "[a-z]{1,8}"){0,3})?\]\})re";

// CountMaskBits (POPCNT where the CPU has it) against std::bitset's count,
// over rows of every length up to 70 words and every density.
TEST(MaskBits, CountEqualsBitsetCount) {
  std::mt19937 rng(7);
  for (size_t n = 0; n <= 70; ++n) {
    std::vector<uint32_t> words(n);
    size_t expected = 0;
    for (uint32_t& w : words) {
      w = static_cast<uint32_t>(rng()) & static_cast<uint32_t>(rng());  // sparser
      if (n % 3 == 0) w = ~w;                                          // denser
      expected += std::bitset<32>(w).count();
    }
    EXPECT_EQ(CountMaskBits(words.data(), n), expected) << n << " words";
    EXPECT_EQ(CountAllowedTokens(words.data(), static_cast<uint32_t>(n)), expected);
  }
}

TEST(Guide, RollbackForkAndReplayMatchStraightLine) {
  auto index = Compile(kJsonish);
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    auto walk = RandomWalk(index, seed, 40);
    ASSERT_TRUE(walk.ok());
    const auto& tokens = walk->tokens;
    // Straight line: masks after each prefix.
    Guide g(index);
    std::vector<std::vector<uint32_t>> masks = {MaskOf(g)};
    for (uint32_t t : tokens) {
      ASSERT_TRUE(g.Advance(t).ok());
      masks.push_back(MaskOf(g));
    }
    // Rollback to every depth.
    for (size_t k = 0; k <= tokens.size(); ++k) {
      Guide r = g.Fork();
      ASSERT_TRUE(r.Rollback(tokens.size() - k).ok());
      ASSERT_EQ(r.num_tokens(), k);
      ASSERT_EQ(MaskOf(r), masks[k]) << "rollback to " << k;
      // Stateless replay of the prefix.
      auto replay = Guide::Replay(index, absl::MakeConstSpan(tokens.data(), k));
      ASSERT_TRUE(replay.ok());
      ASSERT_EQ(MaskOf(*replay), masks[k]) << "replay of " << k;
    }
    // A fork advances independently of its parent.
    if (!tokens.empty()) {
      Guide parent(index);
      ASSERT_TRUE(parent.Advance(tokens[0]).ok());
      Guide child = parent.Fork();
      ASSERT_TRUE(child.Rollback(1).ok());
      EXPECT_EQ(MaskOf(parent), masks[1]);
      EXPECT_EQ(MaskOf(child), masks[0]);
    }
    // Multi-token advance equals one-by-one.
    Guide batch(index);
    ASSERT_TRUE(batch.Advance(absl::MakeConstSpan(tokens)).ok());
    EXPECT_EQ(MaskOf(batch), masks.back());
  }
}

TEST(Guide, ErrorsLeaveStateUnchanged) {
  auto index = Compile("ab(c|d)");
  const Vocabulary& v = index->vocabulary();
  Guide g(index);
  uint32_t a = TokenFor(v, "a"), b = TokenFor(v, "b"), c = TokenFor(v, "c"), z = TokenFor(v, "z");
  ASSERT_TRUE(g.Advance(a).ok());
  auto before = MaskOf(g);

  absl::Status s = g.Advance(z);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(MaskOf(g), before);
  EXPECT_EQ(g.num_tokens(), 1u);

  s = g.Advance(v.size());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("outside the vocabulary"));

  // All or nothing: "b" is fine, "z" is not -> neither is taken.
  std::vector<uint32_t> bad = {b, z};
  s = g.Advance(absl::MakeConstSpan(bad));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("tokens[1]"));
  EXPECT_EQ(g.num_tokens(), 1u);
  EXPECT_EQ(MaskOf(g), before);

  // EOS is not allowed before the constraint can end.
  ASSERT_FALSE(v.eos_ids().empty());
  uint32_t eos = v.eos_ids()[0];
  EXPECT_FALSE(g.IsAllowed(eos));
  EXPECT_EQ(g.Advance(eos).code(), absl::StatusCode::kFailedPrecondition);

  EXPECT_EQ(g.Rollback(2).code(), absl::StatusCode::kInvalidArgument);  // past the start
  EXPECT_EQ(g.num_tokens(), 1u);

  std::vector<uint32_t> small(index->num_words() - 1);
  EXPECT_EQ(g.WriteMask(absl::MakeSpan(small)).code(), absl::StatusCode::kInvalidArgument);

  // Finish: after EOS only EOS is allowed.
  ASSERT_TRUE(g.Advance(b).ok());
  ASSERT_TRUE(g.Advance(c).ok());
  EXPECT_TRUE(g.IsAccepting());
  EXPECT_FALSE(g.IsFinished());
  ASSERT_TRUE(g.Advance(eos).ok());
  EXPECT_TRUE(g.IsFinished());
  auto m = MaskOf(g);
  uint32_t allowed = CountAllowedTokens(m.data(), index->num_words());
  EXPECT_EQ(allowed, v.eos_ids().size());
  EXPECT_EQ(g.Advance(a).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(g.Rollback(1).ok());
  EXPECT_FALSE(g.IsFinished());
}

// RollbackAndAdvance equals Rollback then Advance when every token fits, and
// changes nothing when one does not (the rolled-back tokens stay).
TEST(Guide, RollbackAndAdvanceIsAllOrNothing) {
  auto index = Compile("ab(c|d)e");
  const Vocabulary& v = index->vocabulary();
  uint32_t a = TokenFor(v, "a"), b = TokenFor(v, "b"), c = TokenFor(v, "c"), d = TokenFor(v, "d"),
           e = TokenFor(v, "e");
  Guide g(index);
  std::vector<uint32_t> abc = {a, b, c};
  ASSERT_TRUE(g.Advance(absl::MakeConstSpan(abc)).ok());

  Guide straight(index);
  std::vector<uint32_t> abde = {a, b, d, e};
  ASSERT_TRUE(straight.Advance(absl::MakeConstSpan(abde)).ok());
  std::vector<uint32_t> de = {d, e};
  ASSERT_TRUE(g.RollbackAndAdvance(1, absl::MakeConstSpan(de)).ok());
  EXPECT_EQ(g.num_tokens(), 4u);
  EXPECT_EQ(g.state(), straight.state());
  EXPECT_EQ(MaskOf(g), MaskOf(straight));

  // "d" fits after "ab", "c" does not follow it: nothing changes.
  const auto before = MaskOf(g);
  std::vector<uint32_t> dc = {d, c};
  absl::Status s = g.RollbackAndAdvance(2, absl::MakeConstSpan(dc));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("tokens[1]"));
  EXPECT_EQ(g.num_tokens(), 4u);
  EXPECT_EQ(MaskOf(g), before);
  EXPECT_EQ(g.RollbackAndAdvance(5, {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.num_tokens(), 4u);

  // EOS inside the replacement: allowed where the constraint may end.
  uint32_t eos = v.eos_ids()[0];
  std::vector<uint32_t> e_eos = {e, eos};
  ASSERT_TRUE(g.RollbackAndAdvance(1, absl::MakeConstSpan(e_eos)).ok());
  EXPECT_TRUE(g.IsFinished());
  std::vector<uint32_t> eos_only = {eos};
  EXPECT_EQ(g.RollbackAndAdvance(2, absl::MakeConstSpan(eos_only)).code(),
            absl::StatusCode::kFailedPrecondition);  // "ab" + EOS cannot end
  EXPECT_TRUE(g.IsFinished());
}

TEST(Guide, WiderBufferIsZeroPadded) {
  auto index = Compile("[^Z]*");
  Guide g(index);
  std::vector<uint32_t> m(index->num_words() + 9, 0xFFFFFFFFu);
  ASSERT_TRUE(g.WriteMask(absl::MakeSpan(m)).ok());
  for (size_t i = index->num_words(); i < m.size(); ++i) EXPECT_EQ(m[i], 0u);
}

TEST(Guide, ForcedContinuation) {
  auto index = Compile(R"re(\{"name": "[a-z]+", "kind": "(cat|dog)"\})re");
  Guide g(index);
  EXPECT_EQ(g.ForcedContinuation(), "{\"name\": \"");
  EXPECT_EQ(g.ForcedContinuation(3), "{\"n");
  const Vocabulary& v = index->vocabulary();
  // Walk the forced prefix byte-token by byte-token, then a name.
  for (char c : std::string("{\"name\": \"bo")) {
    ASSERT_TRUE(g.Advance(TokenFor(v, std::string(1, c))).ok()) << c;
  }
  EXPECT_EQ(g.ForcedContinuation(), "");  // more letters or the closing quote
  ASSERT_TRUE(g.Advance(TokenFor(v, "\"")).ok());
  EXPECT_EQ(g.ForcedContinuation(), ", \"kind\": \"");
}

TEST(Guide, ReplayReportsTheOffendingPosition) {
  auto index = Compile("[0-9]+");
  const Vocabulary& v = index->vocabulary();
  std::vector<uint32_t> tokens = {TokenFor(v, "1"), TokenFor(v, "2"), TokenFor(v, "x")};
  auto g = Guide::Replay(index, tokens);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("tokens[2]"));
}

// Budget mode: a sequence that always takes a random token of the budget mask
// ends with EOS within the budget, for every budget from the smallest possible;
// a budget below that never empties a mask.
TEST(Guide, TokenBudgetAlwaysEndsInTime) {
  auto index = Compile(kJsonish);
  const Vocabulary& v = index->vocabulary();
  Guide start(index);
  const uint32_t need = start.MinBytesToFinish() + 1;  // bytes as tokens, plus EOS
  EXPECT_GT(start.MinBytesToFinish(), 10u);
  uint32_t widest = 0;  // MaxDistanceToAccept, from every state by brute force
  for (Dfa::State s = 1; s < index->dfa().num_states(); ++s) {
    const uint32_t d = index->dfa().DistanceToAccept(s);
    if (d != Dfa::kNoDistance) widest = std::max(widest, d);
  }
  EXPECT_EQ(index->dfa().MaxDistanceToAccept(), widest);
  std::mt19937_64 rng(7);
  for (uint32_t budget : {need, need + 1, need + 5, need + 40}) {
    for (int run = 0; run < 30; ++run) {
      Guide g(index);
      uint32_t used = 0;
      while (!g.IsFinished()) {
        ASSERT_LT(used, budget) << "budget " << budget << " exceeded";
        std::vector<uint32_t> m = MaskOf(g);
        const std::vector<uint32_t> full = m;
        EXPECT_TRUE(g.ApplyTokenBudget(budget - used, m.data()).ok());
        std::vector<uint32_t> allowed;
        for (uint32_t t = 0; t < v.size(); ++t) {
          const bool bit = (m[t >> 5] >> (t & 31)) & 1u;
          if (bit) {
            ASSERT_TRUE((full[t >> 5] >> (t & 31)) & 1u) << "budget added token " << t;
            allowed.push_back(t);
          }
        }
        ASSERT_FALSE(allowed.empty());
        ASSERT_TRUE(g.Advance(allowed[rng() % allowed.size()]).ok());
        ++used;
      }
      EXPECT_LE(used, budget);
    }
  }
  // Too small a budget: the mask keeps the tokens closest to an end.
  Guide g(index);
  std::vector<uint32_t> m = MaskOf(g);
  EXPECT_TRUE(g.ApplyTokenBudget(1, m.data()).ok());
  bool any = false;
  for (uint32_t w : m) any = any || w != 0;
  EXPECT_TRUE(any);
  // A large budget changes nothing.
  std::vector<uint32_t> big = MaskOf(g);
  EXPECT_TRUE(g.ApplyTokenBudget(index->dfa().MaxDistanceToAccept() + 2, big.data()).ok());
  EXPECT_EQ(big, MaskOf(g));
}

}  // namespace
}  // namespace maskd
