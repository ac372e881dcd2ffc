// Unit tests of the gRPC-free service classes, part 3: SessionTable
// (step/rollback/fork/close, expiry, caps and per-client shares, concurrent
// steps, session ids) and the Guide's bounded rollback window. Bundled qwen3
// tokenizer only.
#include <atomic>
#include <bit>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "index/guide.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/index_cache.h"
#include "service/metrics.h"
#include "service/session_table.h"
#include "service/tokenizer_registry.h"
#include "tokenizer/loop_masks.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"
#include "tests/service/service_core_test_util.h"

namespace maskd {
namespace {

using ::testing::HasSubstr;
using ::maskd::service_core_test::kOne;
using ::maskd::service_core_test::kTwo;
using ::maskd::service_core_test::kA;
using ::maskd::service_core_test::Qwen;
using ::maskd::service_core_test::Spec;
using ::maskd::service_core_test::CompileWait;

class SessionTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = std::make_unique<IndexCache>(IndexCacheOptions{}, nullptr);
    IndexInfo info = CompileWait(*cache_, Spec("[0-9]{2}"));
    ASSERT_EQ(info.state, IndexState::kReady);
    id_ = info.id;
    row_.resize(info.index->num_words() + 3, 0xFFFFFFFFu);
  }
  std::shared_ptr<IndexLease> Lease() { return *cache_->Lease(id_); }

  std::unique_ptr<IndexCache> cache_;
  std::string id_;
  std::vector<uint32_t> row_;
};

TEST_F(SessionTableTest, StepRollbackForkClose) {
  SessionTableOptions o;
  o.max_sessions = 2;
  SessionTable table(o, nullptr);
  auto s = table.Create(Lease());
  ASSERT_TRUE(s.ok());
  EXPECT_NE((*s)->id(), 0u);
  EXPECT_EQ(table.Find((*s)->id()), *s);
  std::string forced = "junk";
  StepOutcome r = (*s)->Step(0, {}, absl::MakeSpan(row_), &forced);
  ASSERT_TRUE(r.status.ok());
  EXPECT_TRUE((row_[kOne >> 5] >> (kOne & 31)) & 1);
  EXPECT_EQ(row_.back(), 0u);  // padding words zeroed
  EXPECT_EQ(forced, "");
  const uint32_t one[] = {kOne}, a[] = {kA}, two_a[] = {kTwo, kA};
  r = (*s)->Step(0, one, absl::MakeSpan(row_), nullptr);
  EXPECT_EQ(r.num_tokens, 1u);
  r = (*s)->Step(0, a, absl::MakeSpan(row_), nullptr);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.num_tokens, 1u);
  EXPECT_EQ(row_[0], 0u);
  // Rollback + failing advance: all or nothing.
  r = (*s)->Step(1, two_a, absl::MakeSpan(row_), nullptr);
  EXPECT_FALSE(r.status.ok());
  EXPECT_EQ(r.num_tokens, 1u);
  r = (*s)->Step(2, {}, absl::MakeSpan(row_), nullptr);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument);
  auto fork = table.Fork((*s)->id());
  ASSERT_TRUE(fork.ok());
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.Create(Lease()).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(table.Fork((*s)->id()).status().code(), absl::StatusCode::kResourceExhausted);
  r = (*fork)->Step(0, one, absl::MakeSpan(row_), nullptr);
  EXPECT_TRUE(r.accepting);
  EXPECT_EQ(*(*s)->Rollback(1), 0u);
  EXPECT_EQ((*s)->Rollback(1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(table.Close((*s)->id()).ok());
  EXPECT_EQ(table.Close((*s)->id()).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table.Find((*s)->id()), nullptr);
  EXPECT_EQ(table.size(), 1u);
}

TEST_F(SessionTableTest, ExpireIdle) {
  Metrics metrics("test");
  SessionTableOptions o;
  o.ttl = absl::Seconds(30);
  SessionTable table(o, &metrics);
  auto a = table.Create(Lease());
  auto b = table.Create(Lease());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(table.ExpireIdle(absl::Now()), 0u);
  EXPECT_EQ(table.ExpireIdle(absl::Now() + absl::Seconds(31)), 2u);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_THAT(metrics.Serialize(), HasSubstr("maskd_sessions_expired_total 2"));
  EXPECT_THAT(metrics.Serialize(), HasSubstr("maskd_sessions_active 0"));
}

// Issue #24 finding 3: a client (its key) holds at most
// max_sessions_per_client sessions; past it RESOURCE_EXHAUSTED names the
// share, the flag and the client, and other clients are served. Close,
// expiry and a failed create give the unit back; a fork is charged to the
// caller.
TEST_F(SessionTableTest, SessionsPerClientShare) {
  SessionTableOptions o;
  o.max_sessions = 100;
  o.max_sessions_per_client = 2;
  o.ttl = absl::Seconds(30);
  SessionTable table(o, nullptr);
  auto a1 = table.Create(Lease(), "conn:1");
  auto a2 = table.Create(Lease(), "conn:1");
  ASSERT_TRUE(a1.ok() && a2.ok());
  auto refused = table.Create(Lease(), "conn:1");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("--max-sessions-per-client=2"));
  EXPECT_THAT(refused.status().message(), HasSubstr("client conn:1 holds 2 sessions"));
  auto fork = table.Fork((*a1)->id(), "conn:1");
  EXPECT_EQ(fork.status().code(), absl::StatusCode::kResourceExhausted);
  // Another client is served, forks of conn:1's session included.
  auto b1 = table.Create(Lease(), "conn:2");
  auto b2 = table.Fork((*a1)->id(), "conn:2");
  ASSERT_TRUE(b1.ok() && b2.ok());
  EXPECT_EQ(table.held_by("conn:2"), 2u);
  EXPECT_EQ(table.size(), 4u);
  // Closing gives the unit back at once, even while a call still holds the
  // session (here: a1, as a Step that found it before the Close would).
  ASSERT_TRUE(table.Close((*a1)->id()).ok());
  EXPECT_EQ(table.held_by("conn:1"), 1u);
  auto a3 = table.Create(Lease(), "conn:1");
  ASSERT_TRUE(a3.ok()) << a3.status();
  // So does expiry, the sessions still held.
  EXPECT_EQ(table.ExpireIdle(absl::Now() + absl::Seconds(31)), 4u);
  EXPECT_EQ(table.held_by("conn:1"), 0u);
  EXPECT_EQ(table.held_by("conn:2"), 0u);
  a1->reset();  // the last holders let go: nothing is given back twice
  a2->reset();
  a3->reset();
  b1->reset();
  b2->reset();
  EXPECT_EQ(table.held_by("conn:1"), 0u);
  EXPECT_TRUE(table.Create(Lease(), "conn:1").ok());
  EXPECT_TRUE(table.Create(Lease(), "conn:1").ok());
}

TEST_F(SessionTableTest, GlobalCapStillAppliesAndGivesTheShareBack) {
  SessionTableOptions o;
  o.max_sessions = 1;
  o.max_sessions_per_client = 5;
  SessionTable table(o, nullptr);
  ASSERT_TRUE(table.Create(Lease(), "a").ok());
  auto full = table.Create(Lease(), "b");
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(), HasSubstr("--max-sessions)"));
  EXPECT_EQ(table.held_by("b"), 0u);  // a refused create holds nothing
}

TEST_F(SessionTableTest, SweeperExpiresUnusedSessions) {
  SessionTableOptions o;
  o.ttl = absl::Milliseconds(100);
  SessionTable table(o, nullptr);
  auto a = table.Create(Lease());
  ASSERT_TRUE(a.ok());
  uint64_t id = (*a)->id();
  a->reset();
  // The sweeper runs on its own; wait for it (bounded), no fixed sleep.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (table.Find(id) != nullptr && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(table.Find(id), nullptr);
}

TEST_F(SessionTableTest, ConcurrentStepsOnOneSession) {
  SessionTable table({}, nullptr);
  auto s = table.Create(Lease());
  ASSERT_TRUE(s.ok());
  // Each thread steps one digit and rolls it back. Steps are serialized:
  // with "[0-9]{2}" a step succeeds unless two digits are already taken (by
  // two other threads), and then fails as a refused token, state unchanged.
  std::atomic<int> ok{0}, refused{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      std::vector<uint32_t> row(row_.size());
      for (int i = 0; i < 200; ++i) {
        const uint32_t one[] = {kOne};
        StepOutcome r = (*s)->Step(0, one, absl::MakeSpan(row), nullptr);
        if (r.status.ok()) {
          ++ok;
          if (r.num_tokens < 1 || r.num_tokens > 2) ++wrong;
          if (!(*s)->Rollback(1).ok()) ++wrong;
        } else if (r.status.code() == absl::StatusCode::kFailedPrecondition) {
          ++refused;  // a token not allowed now (Guide::Advance)
        } else {
          ++wrong;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(ok.load() + refused.load(), 800);
  EXPECT_GT(ok.load(), 0);
  // Every accepted step was rolled back: the session is at its start.
  StepOutcome end = (*s)->Step(0, {}, absl::MakeSpan(row_), nullptr);
  ASSERT_TRUE(end.status.ok()) << end.status;
  EXPECT_EQ(end.num_tokens, 0u);
}

// Item 5 of issue #11: ids were splitmix64(counter ^ key), so from one id a
// client derived its neighbours. Ids are now 64 CSPRNG bits.
uint64_t SplitMix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}
uint64_t InverseOdd(uint64_t a) {  // a * InverseOdd(a) == 1 mod 2^64
  uint64_t x = a;
  for (int i = 0; i < 6; ++i) x *= 2 - a * x;
  return x;
}
uint64_t UnSplitMix(uint64_t x) {
  x ^= x >> 31 ^ x >> 62;
  x *= InverseOdd(0x94d049bb133111ebULL);
  x ^= x >> 27 ^ x >> 54;
  x *= InverseOdd(0xbf58476d1ce4e5b9ULL);
  x ^= x >> 30 ^ x >> 60;
  return x;
}

TEST_F(SessionTableTest, IdsShareNoStructure) {
  ASSERT_EQ(UnSplitMix(SplitMix(12345)), 12345u);
  SessionTableOptions o;
  o.max_sessions = 200000;
  SessionTable table(o, nullptr);
  auto lease = Lease();
  absl::flat_hash_set<uint64_t> seen;
  uint64_t prev = 0, xor_bits = 0, ones = 0;
  constexpr int kN = 100000;
  for (int i = 0; i < kN; ++i) {
    auto s = table.Create(lease);
    ASSERT_TRUE(s.ok()) << s.status();
    const uint64_t id = (*s)->id();
    ASSERT_NE(id, 0u);
    ASSERT_TRUE(seen.insert(id).second) << "repeated id after " << i;
    ASSERT_FALSE(SessionTable::IsGrammarId(id)) << id;  // a regex session
    const uint64_t random = id >> 1;  // the bits above the kind bit
    if (i > 0) xor_bits += std::popcount(random ^ prev);
    ones += std::popcount(random);
    prev = random;
  }
  // Independent uniform 63-bit words: 31.5 bits differ on average (sd of the
  // mean over 1e5 pairs: 0.013), 31.5 bits set.
  EXPECT_NEAR(static_cast<double>(xor_bits) / (kN - 1), 31.5, 0.25);
  EXPECT_NEAR(static_cast<double>(ones) / kN, 31.5, 0.25);
}

// The step pool routes a batch by its ids' kind bit, before any lookup: it
// must say which sessions are on the grammar route, forks included.
TEST_F(SessionTableTest, IdsSayWhetherTheSessionIsOnTheGrammarRoute) {
  CompileSpec grammar;
  grammar.tokenizer = "qwen3";
  grammar.constraint =
      Constraint::Grammar("start: \"a\"+\n", GrammarFormat::kLark, Qwen());
  IndexInfo info = CompileWait(*cache_, grammar);
  ASSERT_EQ(info.state, IndexState::kReady) << info.status;
  SessionTable table({}, nullptr);
  for (int i = 0; i < 64; ++i) {
    auto g = table.Create(*cache_->Lease(info.id));
    auto r = table.Create(Lease());
    ASSERT_TRUE(g.ok() && r.ok());
    EXPECT_TRUE(SessionTable::IsGrammarId((*g)->id()));
    EXPECT_FALSE(SessionTable::IsGrammarId((*r)->id()));
    auto fork = table.Fork((*g)->id());
    ASSERT_TRUE(fork.ok()) << fork.status();
    EXPECT_TRUE(SessionTable::IsGrammarId((*fork)->id()));
  }
}

TEST_F(SessionTableTest, OneIdDoesNotRevealOthers) {
  // The reproducer: a victim's 40 sessions, an attacker with one session of
  // its own tries the neighbours of its id under every structure the old
  // scheme had (counter ^ key through an invertible mix) and the naive ones.
  SessionTable table({}, nullptr);
  std::vector<uint64_t> victim;
  for (int i = 0; i < 40; ++i) victim.push_back((*table.Create(Lease()))->id());
  const uint64_t mine = (*table.Create(Lease()))->id();
  for (int i = 0; i < 40; ++i) victim.push_back((*table.Create(Lease()))->id());
  const uint64_t u = UnSplitMix(mine);
  int found = 0, tried = 0;
  for (uint64_t d = 1; d <= 4096; ++d) {
    for (uint64_t c : {SplitMix(u ^ d), SplitMix(u + d), SplitMix(u - d), mine ^ d, mine + d,
                       mine - d}) {
      ++tried;
      if (c != mine && table.Find(c) != nullptr) ++found;
    }
  }
  EXPECT_EQ(found, 0) << "of " << tried << " guesses";
  for (uint64_t id : victim) EXPECT_NE(table.Find(id), nullptr);
}

TEST_F(SessionTableTest, RollbackWindowBoundsHistory) {
  // Item 8a: history was 4 bytes per token without a cap. "[0-9]{2}" ends
  // after two digits, so use an index that takes any number of digits.
  IndexInfo info = CompileWait(*cache_, Spec("[0-9]*"));
  ASSERT_EQ(info.state, IndexState::kReady);
  SessionTableOptions o;
  o.rollback_window = 64;
  SessionTable table(o, nullptr);
  auto s = table.Create(*cache_->Lease(info.id));
  ASSERT_TRUE(s.ok());
  std::vector<uint32_t> row(info.index->num_words());
  const uint32_t one[] = {kOne};
  for (int i = 0; i < 100000; ++i) {
    StepOutcome r = (*s)->Step(0, one, absl::MakeSpan(row), nullptr);
    ASSERT_TRUE(r.status.ok()) << r.status;
  }
  EXPECT_EQ(table.Find((*s)->id())->history_bytes(), 64u * 4);  // not 400 kB
  // Within the window: fine, and all or nothing with a rollback.
  StepOutcome r = (*s)->Step(64, {}, absl::MakeSpan(row), nullptr);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.num_tokens, 100000u - 64);
  // Past what is left of the window: OUT_OF_RANGE, nothing changed.
  r = (*s)->Step(1, one, absl::MakeSpan(row), nullptr);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kOutOfRange) << r.status;
  EXPECT_THAT(r.status.message(), HasSubstr("rollback window of 64"));
  EXPECT_EQ(r.num_tokens, 100000u - 64);
  EXPECT_EQ((*s)->Rollback(1).status().code(), absl::StatusCode::kOutOfRange);
  // More than was ever accepted stays INVALID_ARGUMENT.
  EXPECT_EQ((*s)->Rollback(200000).status().code(), absl::StatusCode::kInvalidArgument);
  // Advancing refills the window; a fork keeps it.
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE((*s)->Step(0, one, absl::MakeSpan(row), nullptr).status.ok());
  }
  auto f = table.Fork((*s)->id());
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*(*f)->Rollback(10), 100000u - 64);
  EXPECT_EQ((*f)->Rollback(1).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(GuideTest, RingKeepsExactlyTheWindow) {
  IndexCache cache({}, nullptr);
  IndexInfo info = CompileWait(cache, Spec("[0-9]*(a[0-9]*)?"));
  ASSERT_EQ(info.state, IndexState::kReady);
  // A long random walk with rollbacks on a bounded guide and an unbounded
  // reference: same states throughout; a rollback is accepted exactly when
  // it is within the model's count min(window, tokens since ...).
  for (size_t window : {size_t{0}, size_t{1}, size_t{5}, size_t{37}}) {
    Guide full(info.index->token_index()), ring(info.index->token_index(), window);
    uint64_t x = 88172645463325252ull;
    size_t avail = 0;
    int refused = 0;
    for (int i = 0; i < 3000; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      if (x % 4 == 0) {
        size_t n = (x >> 8) % 12;
        absl::Status b = ring.Rollback(n);
        ASSERT_EQ(b.ok(), n <= avail) << b << " window " << window;
        if (b.ok()) {
          ASSERT_TRUE(full.Rollback(n).ok());
          avail -= n;
        } else {
          // Past the start: InvalidArgument; within it but past the window:
          // OutOfRange.
          ASSERT_EQ(b.code(), n > full.num_tokens() ? absl::StatusCode::kInvalidArgument
                                                    : absl::StatusCode::kOutOfRange);
          ++refused;
        }
      } else {
        const uint32_t t[] = {(x >> 8) % 7 == 0 ? kA : kOne};
        absl::Status a = full.Advance(t), b = ring.Advance(t);
        ASSERT_EQ(a.ok(), b.ok());
        if (b.ok()) avail = std::min(window, avail + 1);
      }
      ASSERT_EQ(full.state(), ring.state());
      ASSERT_EQ(full.num_tokens(), ring.num_tokens());
      ASSERT_EQ(ring.rollback_available(), avail);
      ASSERT_LE(ring.history_bytes(), std::max<size_t>(window, 16) * 4);
    }
    EXPECT_GT(refused, 0);
  }
}

}  // namespace
}  // namespace maskd
