// Unit tests of StepBatch (service/step_batch.h): the call's limits and
// placement, errors per entry, the row rule, all or nothing per entry,
// rollback with tokens; and random batches against an oracle that replays
// each session's whole token sequence on a fresh Guide.
#include "service/step_batch.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "index/guide.h"
#include "service/index_cache.h"
#include "service/metrics.h"
#include "service/session_table.h"
#include "service/tokenizer_registry.h"

// Every operator new of this test binary is counted (the hot path's
// allocations, SteadyStateAllocatesNothing). Not under AddressSanitizer,
// whose own allocator must see every new and delete (it reports a replaced
// delete freeing memory of an operator new it intercepts).
#if defined(__SANITIZE_ADDRESS__)
#define MASKD_COUNT_ALLOCATIONS 0
#else
#define MASKD_COUNT_ALLOCATIONS 1
#endif
std::atomic<int64_t> g_allocations{0};

#if MASKD_COUNT_ALLOCATIONS
// Out of line, so that the compiler does not pair an inlined malloc with
// an inlined free across a new/delete (-Wmismatched-new-delete).
__attribute__((noinline)) void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace maskd {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kA = 0, kB = 1, kAB = 2, kOne = 4, kEos = 7;
constexpr uint32_t kJunk = 0xA5A5A5A5u;  // what rows hold before a call

// Byte-level BPE: a b ab 0 1 2 10, and <eos> (special, id 7).
std::string TinyTokenizerJson() {
  return R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "0": 3, "1": 4,
      "2": 5, "10": 6}, "merges": []},
      "added_tokens": [{"id": 7, "content": "<eos>", "special": true}],
      "decoder": {"type": "ByteLevel"}})";
}

class StepBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Two widths: 40 ids (2 words per row) and 100 ids (4 words).
    for (auto [name, size] : {std::pair<const char*, uint32_t>{"tiny40", 40}, {"tiny100", 100}}) {
      VocabularyOptions o;
      o.vocab_size = size;
      auto t = tokenizers_.Register(name, TinyTokenizerJson(), R"({"eos_token": "<eos>"})", o);
      ASSERT_TRUE(t.ok()) << t.status();
    }
    cache_ = std::make_unique<IndexCache>(IndexCacheOptions{}, nullptr);
    sessions_ = std::make_unique<SessionTable>(SessionTableOptions{}, &metrics_);
  }

  // A ready index of `regex` over tokenizer `tok`.
  IndexInfo Compile(const std::string& tok, const std::string& regex) {
    CompileSpec spec;
    auto t = tokenizers_.Get(tok);
    EXPECT_TRUE(t.ok()) << t.status();
    spec.tokenizer = tok;
    spec.constraint = Constraint::Regex(regex, t->context);
    absl::Notification done;
    IndexInfo out;
    auto snap = cache_->Compile(spec, [&](const IndexInfo& info) {
      out = info;
      done.Notify();
    });
    EXPECT_TRUE(snap.ok()) << snap.status();
    if (snap->state == IndexState::kCompiling) {
      done.WaitForNotification();
    } else {
      out = *snap;
    }
    EXPECT_EQ(out.state, IndexState::kReady) << out.status;
    return out;
  }

  uint64_t NewSession(const IndexInfo& info) {
    auto s = sessions_->Create(*cache_->Lease(info.id));
    EXPECT_TRUE(s.ok()) << s.status();
    return (*s)->id();
  }

  // The mask `words` words wide (zeros past the index's width) after
  // `tokens` from the start, by a fresh Guide.
  static std::vector<uint32_t> OracleRow(const IndexInfo& info, const std::vector<uint32_t>& tokens,
                                         size_t words, uint32_t max_tokens_left = 0) {
    auto g = Guide::Replay(info.index->token_index(), tokens);
    EXPECT_TRUE(g.ok()) << g.status();
    std::vector<uint32_t> row(words, kJunk);
    EXPECT_TRUE(g->WriteMask(absl::MakeSpan(row)).ok());
    if (max_tokens_left > 0) {
      EXPECT_TRUE(g->ApplyTokenBudget(max_tokens_left, row.data()).ok());
    }
    return row;
  }

  // Runs `entries` with rows of `words` words (placement that records the
  // shape and places rows in `rows_`).
  absl::Status Run(StepBatch& batch, const std::vector<StepEntryInput>& entries, uint32_t words,
                   uint32_t max_vocab = 0) {
    results_.assign(entries.size(), StepEntryResult{});
    rows_.assign(entries.size() * words, kJunk);
    placed_ = false;
    return batch.Run(
        entries,
        [&](const StepBatchShape& shape) -> absl::StatusOr<StepRows> {
          placed_ = true;
          shape_words_.assign(shape.words.begin(), shape.words.end());
          widest_ = shape.widest;
          return StepRows{rows_.data(), words, max_vocab};
        },
        absl::MakeSpan(results_));
  }
  std::vector<uint32_t> Row(size_t i, uint32_t words) const {
    return std::vector<uint32_t>(rows_.begin() + i * words, rows_.begin() + (i + 1) * words);
  }
  // The session's token count, by an empty step.
  uint64_t NumTokens(StepBatch& batch, uint64_t id) {
    std::vector<StepEntryResult> r(1);
    std::vector<uint32_t> row(8);
    StepEntryInput e;
    e.session_id = id;
    EXPECT_TRUE(batch
                    .Run({&e, 1},
                         [&](const StepBatchShape&) -> absl::StatusOr<StepRows> {
                           return StepRows{row.data(), 8, 0};
                         },
                         absl::MakeSpan(r))
                    .ok());
    EXPECT_TRUE(r[0].status.ok()) << r[0].status;
    return r[0].num_tokens;
  }

  Metrics metrics_{"test"};
  TokenizerRegistry tokenizers_{4, size_t{1} << 20};
  std::unique_ptr<IndexCache> cache_;
  std::unique_ptr<SessionTable> sessions_;
  std::vector<StepEntryResult> results_;
  std::vector<uint32_t> rows_;
  std::vector<uint32_t> shape_words_;
  uint32_t widest_ = 0;
  bool placed_ = false;
};

StepEntryInput Entry(uint64_t id, const std::vector<uint32_t>& tokens = {}, uint32_t rollback = 0,
                     uint32_t max_tokens_left = 0) {
  StepEntryInput e;
  e.session_id = id;
  e.tokens = tokens;
  e.rollback = rollback;
  e.max_tokens_left = max_tokens_left;
  return e;
}

TEST_F(StepBatchTest, LimitsFailTheCallBeforeAnyLookup) {
  IndexInfo info = Compile("tiny40", "[ab]*");
  const uint64_t id = NewSession(info);
  StepLimits limits;
  limits.max_batch = 2;
  limits.max_tokens_per_request = 3;
  limits.max_message_bytes = 2 * (2 * 4 + 64);  // two rows of 2 words
  StepBatch batch(sessions_.get(), &metrics_, limits);
  const std::vector<uint32_t> two = {kA, kB}, one = {kA};

  absl::Status s = Run(batch, {Entry(id), Entry(id), Entry(id)}, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("batch of 3 entries exceeds 2 (--max-batch)"));
  EXPECT_FALSE(placed_);
  s = Run(batch, {Entry(id, two), Entry(id, two)}, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("request carries 4 tokens, more than 3 (--max-request-tokens)"));
  EXPECT_FALSE(placed_);
  // Nothing was stepped, no row written, no result touched.
  EXPECT_EQ(rows_, std::vector<uint32_t>(4, kJunk));
  EXPECT_EQ(NumTokens(batch, id), 0u);
  // At the limits: fine.
  ASSERT_TRUE(Run(batch, {Entry(id, two), Entry(id, one)}, 2).ok());
  EXPECT_EQ(results_[1].num_tokens, 3u);

  EXPECT_EQ(batch.ThreadBuffers(3).status().code(), absl::StatusCode::kResourceExhausted);
  auto io = batch.ThreadBuffers(2);
  ASSERT_TRUE(io.ok());
  EXPECT_EQ(io->entries.size(), 2u);
  EXPECT_EQ(io->results.size(), 2u);

  EXPECT_TRUE(batch.CheckReplySize(2, 2).ok());
  s = batch.CheckReplySize(2, 3);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("reply of 24 mask bytes exceeds --max-message-bytes=144"));
}

TEST_F(StepBatchTest, PlacementSeesWidthsAndItsErrorStepsNothing) {
  IndexInfo narrow = Compile("tiny40", "[ab]*"), wide = Compile("tiny100", "[ab]*");
  const uint64_t n = NewSession(narrow), w = NewSession(wide);
  StepBatch batch(sessions_.get(), &metrics_, StepLimits{});
  const std::vector<uint32_t> a = {kA};
  const std::vector<StepEntryInput> entries = {Entry(n, a), Entry(12345, a), Entry(w, a)};
  std::vector<StepEntryResult> results(3);
  results[0].num_tokens = 99;
  std::vector<uint32_t> seen;
  absl::Status s = batch.Run(
      entries,
      [&](const StepBatchShape& shape) -> absl::StatusOr<StepRows> {
        seen.assign(shape.words.begin(), shape.words.end());
        seen.push_back(shape.widest);
        return absl::OutOfRangeError("the target does not fit");
      },
      absl::MakeSpan(results));
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(seen, (std::vector<uint32_t>{2, 0, 4, 4}));
  EXPECT_EQ(results[0].num_tokens, 99u);  // untouched
  EXPECT_EQ(NumTokens(batch, n), 0u);
  EXPECT_EQ(NumTokens(batch, w), 0u);
}

TEST_F(StepBatchTest, ErrorsArePerEntryAndRowsFollowTheOneRule) {
  IndexInfo narrow = Compile("tiny40", "ab*"), wide = Compile("tiny100", "ab*");
  const uint64_t n = NewSession(narrow), w = NewSession(wide);
  StepBatch batch(sessions_.get(), &metrics_, StepLimits{});
  const std::vector<uint32_t> a = {kA}, b = {kB}, b_then_a = {kB, kA}, far = {1000};
  // Rows of 3 words: the narrow session's mask is 2 words, then one of padding.
  ASSERT_TRUE(Run(batch,
                  {Entry(n, a),          // OK
                   Entry(777, a),        // unknown id
                   Entry(w, a),          // 4 words: wider than the row
                   Entry(n, b_then_a),   // b allowed, a is not: all or nothing
                   Entry(n, far),        // outside the vocabulary
                   Entry(n, {}, 5)},     // rollback past the start
                  3)
                  .ok());
  EXPECT_TRUE(results_[0].status.ok()) << results_[0].status;
  EXPECT_EQ(results_[0].num_tokens, 1u);
  EXPECT_TRUE(results_[0].accepting);
  EXPECT_EQ(Row(0, 3), OracleRow(narrow, {kA}, 3));
  EXPECT_EQ(Row(0, 3)[2], 0u);  // padding word zeroed

  EXPECT_EQ(results_[1].status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(results_[2].status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(results_[2].status.message(), HasSubstr("words_per_row 3 is less than the session's 4"));
  EXPECT_EQ(results_[2].num_tokens, 0u);  // never reached its session
  EXPECT_EQ(results_[3].status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(results_[3].num_tokens, 1u);  // the unchanged session
  EXPECT_EQ(results_[4].status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(results_[5].status.code(), absl::StatusCode::kInvalidArgument);
  for (int i = 1; i <= 5; ++i) {
    EXPECT_EQ(Row(i, 3), std::vector<uint32_t>(3, 0u)) << "entry " << i;
    // Refused before its session: nothing known; after: the unchanged
    // session ("a", accepting).
    EXPECT_EQ(results_[i].accepting, i >= 3) << i;
    EXPECT_EQ(results_[i].min_bytes_to_finish, 0u) << i;
    EXPECT_EQ(results_[i].forced, "") << i;
  }
  // The wide session was not stepped; the narrow one took only its first 'a'.
  EXPECT_EQ(NumTokens(batch, w), 0u);
  EXPECT_EQ(NumTokens(batch, n), 1u);
  // Counted: one error per failed entry, the one token accepted.
  const std::string m = metrics_.Serialize();
  EXPECT_THAT(m, HasSubstr("maskd_step_entry_errors_total{code=\"NOT_FOUND\"} 1"));
  EXPECT_THAT(m, HasSubstr("maskd_step_entry_errors_total{code=\"INVALID_ARGUMENT\"} 3"));
  EXPECT_THAT(m, HasSubstr("maskd_step_entry_errors_total{code=\"FAILED_PRECONDITION\"} 1"));
  EXPECT_THAT(m, HasSubstr("maskd_tokens_advanced_total 1"));
}

TEST_F(StepBatchTest, VocabularyWiderThanTheLogitsFails) {
  IndexInfo narrow = Compile("tiny40", "[ab]*"), wide = Compile("tiny100", "[ab]*");
  const uint64_t n = NewSession(narrow), w = NewSession(wide);
  StepBatch batch(sessions_.get(), nullptr, StepLimits{});
  const std::vector<uint32_t> a = {kA};
  ASSERT_TRUE(Run(batch, {Entry(n, a), Entry(w, a)}, 4, /*max_vocab=*/64).ok());
  EXPECT_TRUE(results_[0].status.ok());
  EXPECT_EQ(results_[1].status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(results_[1].status.message(),
              HasSubstr("the session's vocabulary (100) is wider than the logits (64)"));
  EXPECT_EQ(Row(0, 4), OracleRow(narrow, {kA}, 4));
  EXPECT_EQ(Row(1, 4), std::vector<uint32_t>(4, 0u));
  EXPECT_EQ(NumTokens(batch, w), 0u);
}

TEST_F(StepBatchTest, RollbackWithTokensAndEntriesInOrder) {
  IndexInfo info = Compile("tiny100", "(ab|a)b*1?");
  const uint64_t id = NewSession(info);
  StepBatch batch(sessions_.get(), nullptr, StepLimits{});
  const std::vector<uint32_t> a_b = {kA, kB}, ab = {kAB}, one = {kOne}, b = {kB};
  // One session twice in a batch: in order. "a b", then roll both back and
  // take "ab" instead, then "1".
  ASSERT_TRUE(Run(batch, {Entry(id, a_b), Entry(id, ab, 2), Entry(id, one)}, 4).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(results_[i].status.ok()) << i << results_[i].status;
  EXPECT_EQ(results_[0].num_tokens, 2u);
  EXPECT_EQ(results_[1].num_tokens, 1u);
  EXPECT_EQ(results_[2].num_tokens, 2u);
  EXPECT_EQ(Row(0, 4), OracleRow(info, {kA, kB}, 4));
  EXPECT_EQ(Row(1, 4), OracleRow(info, {kAB}, 4));
  EXPECT_EQ(Row(2, 4), OracleRow(info, {kAB, kOne}, 4));
  EXPECT_TRUE(results_[2].accepting);
  // A rollback of 1 plus "b 1 b" fails on the last "b", all or nothing: the
  // "1" is still there. A rollback of 1 plus "b" then works.
  const std::vector<uint32_t> b1b = {kB, kOne, kB};
  ASSERT_TRUE(Run(batch, {Entry(id, b1b, 1), Entry(id, b, 1)}, 4).ok());
  EXPECT_EQ(results_[0].status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(results_[0].num_tokens, 2u);
  EXPECT_TRUE(results_[1].status.ok()) << results_[1].status;
  EXPECT_EQ(results_[1].num_tokens, 2u);
  EXPECT_EQ(Row(1, 4), OracleRow(info, {kAB, kB}, 4));
  // EOS finishes; budget mode leaves EOS only when one token is left.
  const std::vector<uint32_t> eos = {kEos};
  ASSERT_TRUE(Run(batch, {Entry(id, {}, 0, 1), Entry(id, eos)}, 4).ok());
  EXPECT_EQ(Row(0, 4), OracleRow(info, {kAB, kB}, 4, 1));
  EXPECT_TRUE(results_[1].finished);
  EXPECT_EQ(Row(1, 4), OracleRow(info, {kAB, kB, kEos}, 4));
}

// After a warm-up, a batch of OK entries (as a service runs it: translation
// buffers from ThreadBuffers, rows placed in a reused buffer) allocates
// nothing: not in the limits, the lookup, the steps or the metrics.
TEST_F(StepBatchTest, SteadyStateAllocatesNothing) {
  if (!MASKD_COUNT_ALLOCATIONS) GTEST_SKIP() << "allocations are not counted under AddressSanitizer";
  IndexInfo info = Compile("tiny100", "[ab]*");
  const int64_t at_start = g_allocations.load();
  std::vector<uint64_t> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(NewSession(info));
  ASSERT_GT(g_allocations.load(), at_start);  // the counter sees allocations
  StepBatch batch(sessions_.get(), &metrics_, StepLimits{});
  const std::vector<uint32_t> a = {kA}, b = {kB};
  std::vector<uint32_t> rows(ids.size() * 4);
  auto place = [&](const StepBatchShape& shape) -> absl::StatusOr<StepRows> {
    return StepRows{rows.data(), shape.widest, 0};
  };
  auto step = [&](int round) {
    auto io = batch.ThreadBuffers(ids.size());
    if (!io.ok()) return io.status();
    for (size_t i = 0; i < ids.size(); ++i) {
      // Round 0 takes "a"; later rounds replace the last token.
      io->entries[i] = Entry(ids[i], round % 2 == 0 ? a : b, round == 0 ? 0 : 1);
    }
    absl::Status s = batch.Run(io->entries, place, io->results);
    for (const StepEntryResult& r : io->results) {
      if (s.ok() && !r.status.ok()) s = r.status;
    }
    return s;
  };
  for (int round = 0; round < 3; ++round) ASSERT_TRUE(step(round).ok());
  const int64_t before = g_allocations.load();
  absl::Status s;
  for (int round = 3; round < 103 && s.ok(); ++round) s = step(round);
  const int64_t allocated = g_allocations.load() - before;
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(allocated, 0);
  // The last round (102) replaced the token by "a" again.
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(std::vector<uint32_t>(rows.begin() + i * 4, rows.begin() + (i + 1) * 4),
              OracleRow(info, {kA}, 4));
  }
}

// Random batches over three sessions (two widths, one shared index), each
// entry a random rollback and random tokens (some not allowed, some outside
// the vocabulary), sometimes an unknown id, against a model that keeps each
// session's accepted tokens and replays them on a fresh Guide.
TEST_F(StepBatchTest, RandomBatchesMatchAReplayOracle) {
  IndexInfo narrow = Compile("tiny40", "(a|b|ab)*1?(0|2)*");
  IndexInfo wide = Compile("tiny100", "a(b|ab|10)*2?");
  struct Model {
    uint64_t id;
    const IndexInfo* info;
    std::vector<uint32_t> tokens;
  };
  std::vector<Model> models = {{NewSession(narrow), &narrow, {}},
                               {NewSession(wide), &wide, {}},
                               {NewSession(narrow), &narrow, {}}};
  StepBatch batch(sessions_.get(), nullptr, StepLimits{});
  std::mt19937 rng(20261201);
  const uint32_t words = 5;
  int ok = 0, failed = 0;
  for (int round = 0; round < 400; ++round) {
    const size_t n = 1 + rng() % 6;
    std::vector<int> which(n);
    std::vector<std::vector<uint32_t>> tokens(n);
    std::vector<StepEntryInput> entries(n);
    for (size_t i = 0; i < n; ++i) {
      which[i] = static_cast<int>(rng() % 4);  // 3: unknown id
      const size_t k = rng() % 4;
      for (size_t j = 0; j < k; ++j) {
        tokens[i].push_back(rng() % 16 == 0 ? 40 + rng() % 100 : rng() % 8);
      }
      const uint32_t rollback = rng() % 3 == 0 ? rng() % 4 : 0;
      const uint32_t budget = rng() % 4 == 0 ? 1 + rng() % 4 : 0;
      entries[i] = Entry(which[i] == 3 ? 1 : models[which[i]].id, tokens[i], rollback, budget);
    }
    ASSERT_TRUE(Run(batch, entries, words).ok());
    for (size_t i = 0; i < n; ++i) {
      const StepEntryResult& r = results_[i];
      SCOPED_TRACE(testing::Message() << "round " << round << " entry " << i);
      if (which[i] == 3) {
        EXPECT_EQ(r.status.code(), absl::StatusCode::kNotFound);
        EXPECT_EQ(Row(i, words), std::vector<uint32_t>(words, 0u));
        continue;
      }
      Model& m = models[which[i]];
      const StepEntryInput& e = entries[i];
      absl::StatusOr<Guide> g = absl::InvalidArgumentError("rollback past the start");
      std::vector<uint32_t> want = m.tokens;
      if (e.rollback <= want.size()) {
        want.resize(want.size() - e.rollback);
        want.insert(want.end(), tokens[i].begin(), tokens[i].end());
        g = Guide::Replay(m.info->index->token_index(), want);
      }
      if (!g.ok()) {
        ++failed;
        EXPECT_FALSE(r.status.ok());
        if (e.rollback <= m.tokens.size()) {
          EXPECT_EQ(r.status.code(), g.status().code());
        }
        EXPECT_EQ(r.num_tokens, m.tokens.size());
        auto before = Guide::Replay(m.info->index->token_index(), m.tokens);
        ASSERT_TRUE(before.ok());
        EXPECT_EQ(r.accepting, before->IsAccepting());
        EXPECT_EQ(r.finished, before->IsFinished());
        EXPECT_EQ(r.min_bytes_to_finish, 0u);
        EXPECT_EQ(r.forced, "");
        EXPECT_EQ(Row(i, words), std::vector<uint32_t>(words, 0u));
        continue;
      }
      ++ok;
      ASSERT_TRUE(r.status.ok()) << r.status;
      m.tokens = want;
      EXPECT_EQ(r.num_tokens, want.size());
      EXPECT_EQ(r.accepting, g->IsAccepting());
      EXPECT_EQ(r.finished, g->IsFinished());
      EXPECT_EQ(r.min_bytes_to_finish, g->MinBytesToFinish());
      EXPECT_EQ(r.forced, g->ForcedContinuation());
      EXPECT_EQ(Row(i, words), OracleRow(*m.info, want, words, e.max_tokens_left));
    }
  }
  // Both outcomes were exercised.
  EXPECT_GT(ok, 200) << failed;
  EXPECT_GT(failed, 100) << ok;
}

}  // namespace
}  // namespace maskd
