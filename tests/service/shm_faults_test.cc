// SharedMemory under faults, against the real maskd binary (--allow_shm):
// regions unregistered or shrunk (ftruncate) while calls are in flight fail
// the call, never the server, and an abandoned StepInRegion stops its work.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/shm_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/apply_mask.h"
#include "nlohmann/json.hpp"
#include "tests/service/server_harness.h"
#include "tests/service/shm_test_util.h"

namespace maskd {
namespace {

using ::maskd::testing::MaskdProcess;
using ::maskd::testing::MetricValue;
using ::maskd::testing::SessionTokens;
using ::maskd::testing::WaitForAnyMetric;
using ::testing::HasSubstr;
using ::testing::Not;
using Code = absl::StatusCode;
using ::maskd::shm_test::kQwenVocab;
using ::maskd::shm_test::kQwenWords;
using ::maskd::shm_test::NewSegment;
using ::maskd::shm_test::ShmTest;

TEST_F(ShmTest, UnregisterWhileCallsInFlight) {
  const int n = 32;
  std::vector<uint64_t> ids = NewSessions(n);
  const size_t bytes = size_t{n} * kQwenVocab * 4;
  auto seg = NewSegment("inflight", bytes);
  ASSERT_TRUE(shm_->RegisterSystemRegion("busy", seg.key(), 0, bytes).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> ok_calls{0}, not_found{0}, other{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < 3; ++th) {
    threads.emplace_back([&] {
      auto c = server_->Connect();
      ShmClient shm(c->channel(), absl::Seconds(30));
      v1::StepInRegionRequest req;
      for (uint64_t id : ids) req.add_entries()->set_session_id(id);
      auto* t = req.mutable_logits();
      t->set_region("busy");
      t->set_dtype(v1::LOGITS_DTYPE_FP32);
      t->set_rows(n);
      t->set_vocab(kQwenVocab);
      v1::StepInRegionResponse resp;
      while (!stop.load()) {
        absl::Status s = shm.StepInRegion(req, &resp);
        if (s.ok()) {
          ok_calls++;
        } else if (s.code() == Code::kNotFound) {
          not_found++;
          break;
        } else {
          other++;
          break;
        }
      }
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (ok_calls.load() < 6 && other.load() == 0 && not_found.load() == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(ok_calls.load(), 6);
  // Some call is very likely in flight now; either way the registry keeps the
  // mapping until the last lease goes.
  auto list = shm_->ListRegions("busy");
  ASSERT_TRUE(list.ok());
  ASSERT_TRUE(shm_->UnregisterRegion("busy").ok());
  for (auto& th : threads) th.join();
  stop = true;
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(not_found.load(), 3);
  EXPECT_TRUE(client_->Ping().ok());
  // The name is free again; a fresh segment works.
  auto seg2 = NewSegment("inflight2", bytes);
  ASSERT_TRUE(shm_->RegisterSystemRegion("busy", seg2.key(), 0, bytes).ok());
  EXPECT_TRUE(shm_->UnregisterRegion("busy").ok());
}

// Shrinks shared-memory object `key` to `size` bytes, as a client may.
void Shrink(const std::string& key, off_t size) {
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0) << key;
  ASSERT_EQ(ftruncate(fd, size), 0);
  close(fd);
}

bool Alive(pid_t pid) { return kill(pid, 0) == 0 && waitpid(pid, nullptr, WNOHANG) == 0; }

// Issue #11 item 2: register, ftruncate the object, StepInRegion: maskd died
// of SIGBUS (exit 135). Now the call fails with FAILED_PRECONDITION before any
// session is stepped, and the server keeps serving.
TEST_F(ShmTest, ShrunkObjectFailsTheCallNotTheServer) {
  const std::string log_before = server_->Log();
  std::vector<uint64_t> ids = NewSessions(2);
  const size_t bytes = 2 * size_t{kQwenWords} * 4;
  auto seg = NewSegment("shrink", bytes);
  ASSERT_TRUE(shm_->RegisterSystemRegion("shrunk", seg.key(), 0, bytes).ok());
  v1::StepInRegionRequest req;
  req.mutable_masks()->set_region("shrunk");
  for (uint64_t id : ids) req.add_entries()->set_session_id(id);
  v1::StepInRegionResponse resp;
  ASSERT_TRUE(shm_->StepInRegion(req, &resp).ok());
  auto allowed = AllowedTokens(
      absl::Span<const uint32_t>(static_cast<const uint32_t*>(seg.data()), kQwenWords));
  ASSERT_FALSE(allowed.empty());
  req.mutable_entries(0)->add_tokens(allowed[0]);

  Shrink(seg.key(), 4096);  // the rows live past 4096 bytes too
  absl::Status s = shm_->StepInRegion(req, &resp);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("\"shrunk\""));
  EXPECT_THAT(std::string(s.message()), HasSubstr("shrunk to 4096 bytes"));
  EXPECT_EQ(NumTokens(ids[0]), 0u);  // nothing was stepped

  // Logits target on a shrunk object: the same.
  const size_t lbytes = 2 * size_t{kQwenVocab} * 4;
  auto lseg = NewSegment("shrink-logits", lbytes);
  ASSERT_TRUE(shm_->RegisterSystemRegion("shrunk-logits", lseg.key(), 0, lbytes).ok());
  Shrink(lseg.key(), 0);
  v1::StepInRegionRequest lreq;
  lreq.add_entries()->set_session_id(ids[1]);
  auto* t = lreq.mutable_logits();
  t->set_region("shrunk-logits");
  t->set_dtype(v1::LOGITS_DTYPE_FP32);
  t->set_rows(1);
  t->set_vocab(kQwenVocab);
  s = shm_->StepInRegion(lreq, &resp);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s;

  // Still serving: the process, Ping, Step, and registration again.
  EXPECT_TRUE(Alive(server_->pid()));
  EXPECT_TRUE(client_->Ping().ok());
  EXPECT_EQ(NumTokens(ids[0]), 0u);
  ASSERT_TRUE(shm_->UnregisterRegion("shrunk").ok());
  auto fresh = NewSegment("shrink-again", bytes);
  ASSERT_TRUE(shm_->RegisterSystemRegion("shrunk", fresh.key(), 0, bytes).ok());
  ASSERT_TRUE(shm_->StepInRegion(req, &resp).ok());
  EXPECT_EQ(resp.results(0).status().code(), 0);
  EXPECT_EQ(NumTokens(ids[0]), 1u);
  EXPECT_THAT(server_->Log().substr(log_before.size()), Not(HasSubstr("ERROR")));
}

// The shrink races calls in flight (3 client threads applying masks to
// logits and writing masks): each call is OK, FAILED_PRECONDITION (shrink
// seen before the call touched the region) or DATA_LOSS (shrink during the
// call); never a dead server.
TEST_F(ShmTest, ShrinkDuringStepInRegionCalls) {
  const int n = 16;
  std::vector<uint64_t> ids = NewSessions(n);
  const size_t bytes = size_t{n} * kQwenVocab * 4;
  int data_loss = 0, refused = 0;
  for (int round = 0; round < 4; ++round) {
    auto seg = NewSegment("shrink-race", bytes);
    ASSERT_TRUE(shm_->RegisterSystemRegion("race", seg.key(), 0, bytes).ok());
    std::atomic<int> ok_calls{0}, precondition{0}, lost{0}, other{0};
    std::vector<std::thread> threads;
    for (int th = 0; th < 3; ++th) {
      threads.emplace_back([&, th] {
        auto c = server_->Connect();
        ShmClient shm(c->channel(), absl::Seconds(30));
        v1::StepInRegionRequest req;
        for (uint64_t id : ids) req.add_entries()->set_session_id(id);
        if (th == 0) {
          req.mutable_masks()->set_region("race");
          req.mutable_masks()->set_offset(bytes / 2);
        } else {
          auto* t = req.mutable_logits();
          t->set_region("race");
          t->set_dtype(v1::LOGITS_DTYPE_FP32);
          t->set_rows(n);
          t->set_vocab(kQwenVocab);
        }
        v1::StepInRegionResponse resp;
        for (;;) {
          absl::Status s = shm.StepInRegion(req, &resp);
          if (s.ok()) {
            ok_calls++;
            continue;
          }
          if (s.code() == Code::kFailedPrecondition) {
            precondition++;
          } else if (s.code() == Code::kDataLoss) {
            lost++;
          } else {
            ADD_FAILURE() << s;
            other++;
          }
          break;
        }
      });
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (ok_calls.load() < 3 * (round + 1) && other.load() == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(200 * round));
    }
    Shrink(seg.key(), 4096 * round);
    for (auto& th : threads) th.join();
    EXPECT_EQ(other.load(), 0);
    EXPECT_EQ(precondition.load() + lost.load(), 3);
    data_loss += lost.load();
    refused += precondition.load();
    ASSERT_TRUE(Alive(server_->pid())) << server_->Log();
    ASSERT_TRUE(client_->Ping().ok());
    // A shrunk region stays refused until registered again.
    auto list = shm_->ListRegions("race");
    ASSERT_TRUE(list.ok());
    ASSERT_TRUE(shm_->UnregisterRegion("race").ok());
  }
  RecordProperty("data_loss_calls", data_loss);
  RecordProperty("refused_calls", refused);
}

// Issue #24 (1b): a StepInRegion whose client gives up (its deadline passes)
// stops parsing: the grammar entry fails CANCELLED or DEADLINE_EXCEEDED
// within moments, not after the minutes its mask would take, and the session
// is unchanged. (The 60 s wait bounds a failure; the fix answers at once.)
TEST(ShmInterrupt, AbandonedStepInRegionStopsItsWork) {
  MaskdProcess server({"--allow_shm", "--max-grammar-parser-steps=1000000000000000",
                       "--max-grammar-mask-work=1000000000000"});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto client = server.Connect();
  v1::CompileRequest compile;
  compile.set_tokenizer("qwen3");
  compile.mutable_grammar()->set_text("start: start start | /./\n");
  compile.mutable_grammar()->set_format(v1::Grammar::FORMAT_LARK);
  compile.set_wait(true);
  auto session = client->CreateSession(compile);
  ASSERT_TRUE(session.ok()) << session.status();
  auto seg = NewSegment("abandoned", kQwenWords * 4);
  ShmClient shm(client->channel(), absl::Seconds(30));
  ASSERT_TRUE(shm.RegisterSystemRegion("m", seg.key(), 0, seg.size()).ok());
  v1::StepInRegionRequest req;
  req.mutable_masks()->set_region("m");
  auto* e = req.add_entries();
  e->set_session_id(session->session_id());
  for (int i = 0; i < 200; ++i) e->add_tokens(64);  // "a": the mask takes minutes
  ShmClient impatient(client->channel(), absl::Milliseconds(300));
  v1::StepInRegionResponse resp;
  absl::Status s = impatient.StepInRegion(req, &resp);
  // The server may end the call (the entry failed: its deadline passed) just
  // before the client's deadline fires: either way the work stopped.
  if (s.ok()) {
    ASSERT_EQ(resp.results_size(), 1);
    EXPECT_EQ(resp.results(0).status().code(), static_cast<int>(Code::kDeadlineExceeded))
        << resp.DebugString();
  } else {
    EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s;
  }
  EXPECT_TRUE(WaitForAnyMetric(server, {"maskd_step_entry_errors_total{code=\"CANCELLED\"}",
                                         "maskd_step_entry_errors_total{code=\"DEADLINE_EXCEEDED\"}"}))
      << "the abandoned step still runs after 60 s\n" << server.Metrics();
  EXPECT_EQ(SessionTokens(*client, session->session_id()), 0);  // no token taken
  EXPECT_TRUE(shm.UnregisterRegion("m").ok());
}

}  // namespace
}  // namespace maskd
