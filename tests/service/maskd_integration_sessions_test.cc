// Integration tests, sessions on one shared server: lifecycle, forced
// continuations and forks, batches mixing good and bad entries, the stateless
// Mask, streaming = unary, compile dedup and cancel, concurrent clients. The
// real maskd binary on a temporary unix socket, the bundled qwen3 tokenizer.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/server_harness.h"
#include "tests/service/maskd_integration_test_util.h"

namespace maskd {
namespace {

using ::maskd::testing::MaskdProcess;
using ::maskd::testing::MetricValue;
using ::testing::HasSubstr;
using ::maskd::integration_test::kOne;
using ::maskd::integration_test::kTwo;
using ::maskd::integration_test::kA;
using ::maskd::integration_test::kQwenVocab;
using ::maskd::integration_test::MaskdTest;

TEST_F(MaskdTest, SessionLifecycle) {
  const std::vector<uint32_t> eos = EosIds();
  ASSERT_FALSE(eos.empty());
  uint64_t id = NewSession("[0-9]{2}");
  ASSERT_NE(id, 0u);
  auto r0 = StepOne(id, {});
  ASSERT_EQ(r0.results_size(), 1);
  EXPECT_EQ(r0.results(0).status().code(), 0);
  EXPECT_EQ(r0.words_per_row(), (kQwenVocab + 31) / 32);
  EXPECT_EQ(r0.masks().size(), r0.words_per_row() * 4u);
  auto row = MaskRow(r0, 0);
  EXPECT_TRUE(Allowed(row, kOne));
  EXPECT_FALSE(Allowed(row, kA));
  EXPECT_FALSE(Allowed(row, eos[0]));
  EXPECT_FALSE(r0.results(0).accepting());

  auto r1 = StepOne(id, {kOne});
  EXPECT_EQ(r1.results(0).status().code(), 0);
  EXPECT_EQ(r1.results(0).num_tokens(), 1u);
  EXPECT_FALSE(r1.results(0).accepting());
  // Not allowed: FAILED_PRECONDITION, state unchanged.
  auto bad = StepOne(id, {kA});
  EXPECT_EQ(bad.results(0).status().code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_EQ(bad.results(0).num_tokens(), 1u);
  EXPECT_EQ(bad.masks(), std::string(bad.masks().size(), '\0'));
  // Unknown id: INVALID_ARGUMENT.
  auto oob = StepOne(id, {kQwenVocab + 5});
  EXPECT_EQ(oob.results(0).status().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  // All or nothing over several tokens.
  auto partial = StepOne(id, {kTwo, kA});
  EXPECT_NE(partial.results(0).status().code(), 0);
  EXPECT_EQ(partial.results(0).num_tokens(), 1u);

  auto r2 = StepOne(id, {kTwo});
  EXPECT_TRUE(r2.results(0).accepting());
  EXPECT_TRUE(Allowed(MaskRow(r2, 0), eos[0]));
  EXPECT_FALSE(Allowed(MaskRow(r2, 0), kOne));
  // Rollback.
  EXPECT_EQ(*client_->Rollback(id, 1), 1u);
  EXPECT_EQ(client_->Rollback(id, 5).status().code(), absl::StatusCode::kInvalidArgument);
  auto r3 = StepOne(id, {});
  EXPECT_FALSE(r3.results(0).accepting());
  // Rollback inside a step (speculative decoding): undo 1, take 2.
  auto r4 = StepOne(id, {kTwo, eos[0]}, /*rollback=*/0);
  EXPECT_TRUE(r4.results(0).finished());
  auto r5 = StepOne(id, {eos[0]}, /*rollback=*/2);
  EXPECT_NE(r5.results(0).status().code(), 0);  // after undoing "2"+EOS, EOS not allowed
  EXPECT_EQ(r5.results(0).num_tokens(), 3u);    // unchanged
  auto r6 = StepOne(id, {kOne}, /*rollback=*/2);
  EXPECT_EQ(r6.results(0).status().code(), 0);
  EXPECT_EQ(r6.results(0).num_tokens(), 2u);
  EXPECT_TRUE(r6.results(0).accepting());

  EXPECT_TRUE(client_->CloseSession(id).ok());
  EXPECT_EQ(client_->CloseSession(id).code(), absl::StatusCode::kNotFound);
  auto gone = StepOne(id, {});
  EXPECT_EQ(gone.results(0).status().code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_EQ(client_->Rollback(id, 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->ForkSession(id).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(MaskdTest, ForcedContinuationAndFork) {
  uint64_t id = NewSession("hello world [0-9]");
  auto r = StepOne(id, {});
  EXPECT_EQ(r.results(0).forced(), "hello world ");
  auto fork = client_->ForkSession(id);
  ASSERT_TRUE(fork.ok());
  EXPECT_NE(*fork, id);
  uint32_t hello = 14990;  // "hello"
  ASSERT_EQ(*client_->Detokenize("qwen3", std::vector<uint32_t>{hello}), "hello");
  auto a = StepOne(id, {hello});
  EXPECT_EQ(a.results(0).status().code(), 0);
  EXPECT_EQ(a.results(0).forced(), " world ");
  auto b = StepOne(*fork, {});
  EXPECT_EQ(b.results(0).num_tokens(), 0u);  // the fork did not move
  EXPECT_EQ(b.results(0).forced(), "hello world ");
  EXPECT_TRUE(client_->CloseSession(id).ok());
  EXPECT_TRUE(client_->CloseSession(*fork).ok());
}

TEST_F(MaskdTest, BatchMixesGoodAndBadEntries) {
  uint64_t s1 = NewSession("[0-9]+");
  uint64_t s2 = NewSession("[0-9]+");
  uint64_t s3 = NewSession("[a-z]+");
  v1::StepRequest req;
  auto add = [&](uint64_t id, std::vector<uint32_t> t) {
    auto* e = req.add_entries();
    e->set_session_id(id);
    for (uint32_t x : t) e->add_tokens(x);
  };
  add(s1, {kOne});
  add(12345, {kOne});  // unknown session
  add(s2, {kA});       // not allowed
  add(s3, {kA});
  v1::StepResponse resp;
  ASSERT_TRUE(client_->Step(req, &resp).ok());
  ASSERT_EQ(resp.results_size(), 4);
  EXPECT_EQ(resp.results(0).status().code(), 0);
  EXPECT_EQ(resp.results(1).status().code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_EQ(resp.results(2).status().code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_EQ(resp.results(3).status().code(), 0);
  EXPECT_EQ(resp.masks().size(), 4u * resp.words_per_row() * 4);
  EXPECT_TRUE(Allowed(MaskRow(resp, 0), kTwo));
  EXPECT_TRUE(AllowedTokens(MaskRow(resp, 1)).empty());
  EXPECT_TRUE(AllowedTokens(MaskRow(resp, 2)).empty());
  EXPECT_TRUE(Allowed(MaskRow(resp, 3), kA));
  // The bad entry did not change s2; the good ones advanced.
  EXPECT_EQ(StepOne(s2, {}).results(0).num_tokens(), 0u);
  EXPECT_EQ(StepOne(s1, {}).results(0).num_tokens(), 1u);
  // Each row equals the stateless mask.
  auto idx = client_->CompileRegex("qwen3", "[0-9]+");
  auto m = client_->Mask(idx->index_id(), std::vector<uint32_t>{kOne});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->mask(), resp.masks().substr(0, resp.words_per_row() * 4));
  // words_per_row: wider pads with zeros, narrower fails the entry.
  v1::StepRequest wide;
  wide.set_words_per_row(resp.words_per_row() + 10);
  wide.add_entries()->set_session_id(s1);
  ASSERT_TRUE(client_->Step(wide, &resp).ok());
  EXPECT_EQ(resp.masks().size(), (wide.words_per_row()) * 4u);
  EXPECT_EQ(resp.masks().substr(resp.masks().size() - 40), std::string(40, '\0'));
  wide.set_words_per_row(10);
  ASSERT_TRUE(client_->Step(wide, &resp).ok());
  EXPECT_EQ(resp.results(0).status().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  for (uint64_t id : {s1, s2, s3}) EXPECT_TRUE(client_->CloseSession(id).ok());
}

TEST_F(MaskdTest, StatelessMask) {
  auto idx = client_->CompileRegex("qwen3", "[0-9]{2}");
  ASSERT_TRUE(idx.ok());
  auto m = client_->Mask(idx->index_id(), std::vector<uint32_t>{kOne, kTwo});
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->accepting());
  EXPECT_EQ(m->words_per_row(), (kQwenVocab + 31) / 32);
  EXPECT_EQ(client_->Mask(idx->index_id(), std::vector<uint32_t>{kA}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(client_->Mask(idx->index_id(), std::vector<uint32_t>{kQwenVocab}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Mask("ix-nope", {}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(MaskdTest, StreamingMatchesUnary) {
  uint64_t a = NewSession("[0-9]{1,20}");
  uint64_t b = NewSession("[0-9]{1,20}");
  auto stream = client_->OpenStepStream();
  ASSERT_TRUE(stream.ok());
  v1::StepRequest req;
  v1::StepResponse sresp, uresp;
  for (int i = 0; i < 10; ++i) {
    req.Clear();
    auto* e = req.add_entries();
    e->set_session_id(a);
    if (i) e->add_tokens(kOne);
    ASSERT_TRUE((*stream)->Step(req, &sresp).ok());
    req.mutable_entries(0)->set_session_id(b);
    ASSERT_TRUE(client_->Step(req, &uresp).ok());
    EXPECT_EQ(sresp.masks(), uresp.masks());
    EXPECT_EQ(sresp.results(0).num_tokens(), static_cast<uint64_t>(i));
  }
  // A request-level error ends the stream with its status.
  req.Clear();
  for (int i = 0; i < 65; ++i) req.add_entries()->set_session_id(a);
  EXPECT_EQ((*stream)->Step(req, &sresp).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(client_->CloseSession(a).ok());
  EXPECT_TRUE(client_->CloseSession(b).ok());
}

TEST_F(MaskdTest, CompileDeduplication) {
  // Eight identical concurrent requests: one compilation, one miss.
  v1::CompileRequest req = Regex("[a-z]{1,120}[0-9]");
  req.mutable_options()->set_eager(true);
  std::vector<std::thread> threads;
  std::vector<absl::StatusOr<v1::CompileResponse>> out(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto c = server_->Connect();
      out[i] = c->Compile(req);
    });
  }
  for (auto& t : threads) t.join();
  int misses = 0;
  for (auto& o : out) {
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(o->index_id(), out[0]->index_id());
    EXPECT_EQ(o->state(), v1::INDEX_STATE_READY);
    misses += o->cache_hit() ? 0 : 1;
  }
  EXPECT_EQ(misses, 1);
}

TEST_F(MaskdTest, CancelCompile) {
  v1::CompileRequest req = Regex("[a-z]{1,900}[0-9]");
  req.mutable_options()->set_eager(true);
  req.set_wait(false);
  auto c = client_->Compile(req);
  ASSERT_TRUE(c.ok());
  auto cancelled = client_->CancelCompile(c->index_id());
  ASSERT_TRUE(cancelled.ok());
  auto polled = client_->GetIndex(c->index_id(), true);
  if (*cancelled) {
    // Either the waiter saw the cancellation, or the entry is already gone.
    EXPECT_TRUE(polled.status().code() == absl::StatusCode::kCancelled ||
                polled.status().code() == absl::StatusCode::kNotFound)
        << polled.status();
  }
  EXPECT_EQ(client_->CancelCompile("ix-none").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(MaskdTest, ConcurrentClients) {
  // Separate sessions advancing in parallel, and a shared session queried by
  // several threads at once.
  uint64_t shared = NewSession("[0-9]{3}");
  auto expect = client_->Mask(client_->CompileRegex("qwen3", "[0-9]{3}")->index_id(), {});
  ASSERT_TRUE(expect.ok());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      auto c = server_->Connect();
      if (t % 2 == 0) {
        for (int i = 0; i < 30; ++i) {
          v1::StepRequest req;
          req.add_entries()->set_session_id(shared);
          v1::StepResponse resp;
          if (!c->Step(req, &resp).ok() || resp.masks() != expect->mask()) ++failures;
        }
      } else {
        auto s = c->CreateSession(Regex("[0-9 ]{1,100}"));
        if (!s.ok()) {
          ++failures;
          return;
        }
        std::mt19937 rng(t);
        v1::StepRequest req;
        auto* e = req.add_entries();
        e->set_session_id(s->session_id());
        v1::StepResponse resp;
        for (int i = 0; i < 30; ++i) {
          if (!c->Step(req, &resp).ok() || resp.results(0).status().code() != 0 ||
              resp.results(0).num_tokens() != static_cast<uint64_t>(i)) {
            ++failures;
            return;
          }
          e->clear_tokens();
          e->add_tokens(rng() % 2 ? kOne : kTwo);
        }
        if (!c->CloseSession(s->session_id()).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(client_->CloseSession(shared).ok());
}

}  // namespace
}  // namespace maskd
