// Slow and abandoned grammar calls through the real maskd binary: a client
// that gives up stops the mask or step it started, and slow masks and steps
// wait their client's turn on the mask and step pools, holding none of gRPC's
// callback threads.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "constraint/constraint_compiler.h"
#include "constraint/constraint_guide.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/index/test_util.h"
#include "tests/service/server_harness.h"
#include "tests/service/grammar_service_test_util.h"

namespace maskd {
namespace {

using ::maskd::testing::MaskdProcess;
using ::maskd::testing::MetricValue;
using ::maskd::testing::SessionTokens;
using ::maskd::testing::WaitForAnyMetric;
using ::testing::HasSubstr;
using ::maskd::grammar_service_test::kAbandonedTokens;
using ::maskd::grammar_service_test::kArithmeticGbnf;
using ::maskd::grammar_service_test::kSelfConcatLark;
using ::maskd::grammar_service_test::kTokenA;
using ::maskd::grammar_service_test::GrammarRequest;

// Issue #24 (1b): a client that gives up (here: its deadline passes) stops
// the mask it started: the server ends the call with CANCELLED or
// DEADLINE_EXCEEDED within moments, not after the minutes the mask would
// take, and serves other calls. (Not a timing assertion: the 60 s wait is a
// bound on a failure, the fixed server answers in milliseconds.)
TEST(GrammarServiceLimits, AbandonedMaskStopsItsWork) {
  MaskdProcess server({"--max-grammar-parser-steps=1000000000000000",
                       "--max-grammar-mask-work=1000000000000"});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto client = server.Connect();
  auto compiled = client->Compile(GrammarRequest(kSelfConcatLark, v1::Grammar::FORMAT_LARK));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  v1::MaskRequest mask;
  mask.set_index_id(compiled->index_id());
  for (int i = 0; i < kAbandonedTokens; ++i) mask.add_tokens(kTokenA);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  v1::MaskResponse mask_resp;
  grpc::Status s = client->stub()->Mask(&ctx, mask, &mask_resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_TRUE(WaitForAnyMetric(
      server, {"maskd_rpc_errors_total{code=\"CANCELLED\",method=\"Mask\"}",
               "maskd_rpc_errors_total{code=\"DEADLINE_EXCEEDED\",method=\"Mask\"}"}))
      << "the abandoned mask still runs after 60 s\n" << server.Metrics();
  EXPECT_TRUE(client->Ping().ok());
}

// The same for a Step: its grammar entry fails CANCELLED or
// DEADLINE_EXCEEDED once the client is gone, the session unchanged.
TEST(GrammarServiceLimits, AbandonedStepStopsItsWork) {
  MaskdProcess server({"--max-grammar-parser-steps=1000000000000000",
                       "--max-grammar-mask-work=1000000000000"});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto client = server.Connect();
  auto session = client->CreateSession(GrammarRequest(kSelfConcatLark, v1::Grammar::FORMAT_LARK));
  ASSERT_TRUE(session.ok()) << session.status();
  v1::StepRequest req;
  auto* e = req.add_entries();
  e->set_session_id(session->session_id());
  for (int i = 0; i < kAbandonedTokens; ++i) e->add_tokens(kTokenA);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  v1::StepResponse resp;
  grpc::Status s = client->stub()->Step(&ctx, req, &resp);
  // The server may end the call (the entry failed: its deadline passed) just
  // before the client's deadline fires: either way the work stopped.
  if (s.ok()) {
    ASSERT_EQ(resp.results_size(), 1);
    EXPECT_EQ(resp.results(0).status().code(),
              static_cast<int>(grpc::StatusCode::DEADLINE_EXCEEDED))
        << resp.DebugString();
  } else {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  }
  EXPECT_TRUE(WaitForAnyMetric(server, {"maskd_step_entry_errors_total{code=\"CANCELLED\"}",
                                         "maskd_step_entry_errors_total{code=\"DEADLINE_EXCEEDED\"}"}))
      << "the abandoned step still runs after 60 s\n" << server.Metrics();
  EXPECT_EQ(SessionTokens(*client, session->session_id()), 0);  // no token taken
}

// Issue #24 (1c): Mask calls run on --mask-threads, round-robin across
// clients, at most --max-pending-masks-per-client of one client at once. A
// client's flood of slow grammar masks (minutes each: no parser-step bound)
// is refused past its cap and holds none of gRPC's callback threads: Ping
// and a grammar Step are answered while the masks run; cancelled, they stop.
TEST(GrammarServiceLimits, SlowMasksHoldNoCallbackThread) {
  MaskdProcess server({"--max-grammar-parser-steps=1000000000000000",
                       "--max-grammar-mask-work=1000000000000", "--mask-threads=1",
                       "--max-pending-masks-per-client=4"});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto client = server.Connect();
  auto slow = client->Compile(GrammarRequest(kSelfConcatLark, v1::Grammar::FORMAT_LARK));
  ASSERT_TRUE(slow.ok()) << slow.status();
  auto cheap = client->Compile(GrammarRequest(kArithmeticGbnf, v1::Grammar::FORMAT_GBNF));
  ASSERT_TRUE(cheap.ok()) << cheap.status();
  auto session = client->CreateSession(cheap->index_id());
  ASSERT_TRUE(session.ok()) << session.status();

  constexpr int kFlood = 12, kCap = 4;
  v1::MaskRequest mask;
  mask.set_index_id(slow->index_id());
  for (int i = 0; i < kAbandonedTokens; ++i) mask.add_tokens(kTokenA);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<grpc::Status> results(kFlood);
  std::atomic<int> answered{0};
  std::vector<std::thread> flood;
  for (int i = 0; i < kFlood; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
    flood.emplace_back([&, i] {
      v1::MaskResponse resp;
      results[i] = client->stub()->Mask(contexts[i].get(), mask, &resp);
      ++answered;
    });
  }
  // The calls past the cap are refused at once; the others wait or run.
  for (int i = 0; i < 600 && answered.load() < kFlood - kCap; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(answered.load(), kFlood - kCap) << "refused calls, of " << kFlood;

  // Meanwhile Ping and a grammar Step are answered.
  auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(30); };
  grpc::ClientContext ping_ctx;
  ping_ctx.set_deadline(deadline());
  v1::PingResponse pong;
  grpc::Status ping = client->stub()->Ping(&ping_ctx, v1::PingRequest(), &pong);
  EXPECT_TRUE(ping.ok()) << ping.error_message();
  v1::StepRequest step;
  auto* e = step.add_entries();
  e->set_session_id(session->session_id());
  e->add_tokens(16);  // "1" in Qwen3
  grpc::ClientContext step_ctx;
  step_ctx.set_deadline(deadline());
  v1::StepResponse stepped;
  grpc::Status st = client->stub()->Step(&step_ctx, step, &stepped);
  EXPECT_TRUE(st.ok()) << st.error_message();
  if (st.ok()) {
    EXPECT_EQ(stepped.results(0).status().code(), 0) << stepped.results(0).status().message();
  }
  EXPECT_EQ(answered.load(), kFlood - kCap) << "a slow mask finished: the test shows nothing";

  for (auto& ctx : contexts) ctx->TryCancel();
  for (std::thread& t : flood) t.join();
  int refused = 0, cancelled = 0;
  for (const grpc::Status& r : results) {
    if (r.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      EXPECT_THAT(r.error_message(), HasSubstr("--max-pending-masks-per-client"));
    }
    if (r.error_code() == grpc::StatusCode::CANCELLED) ++cancelled;
    if (r.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED &&
        r.error_code() != grpc::StatusCode::CANCELLED) {
      ADD_FAILURE() << "a slow mask ended " << r.error_code() << ": " << r.error_message();
    }
  }
  EXPECT_EQ(refused, kFlood - kCap);
  EXPECT_EQ(cancelled, kCap);
  // The server stops their work: it serves this client's next mask once the
  // cancelled ones have left the pool.
  v1::MaskRequest small;
  small.set_index_id(cheap->index_id());
  grpc::Status m;
  for (int i = 0; i < 300; ++i) {
    grpc::ClientContext small_ctx;
    small_ctx.set_deadline(deadline());
    v1::MaskResponse small_resp;
    m = client->stub()->Mask(&small_ctx, small, &small_resp);
    if (m.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(m.ok()) << m.error_message();
}

// A Step of kAbandonedTokens "a" on a kSelfConcatLark session: minutes of
// parsing without a parser-step bound.
v1::StepRequest SlowStep(uint64_t session_id) {
  v1::StepRequest req;
  auto* e = req.add_entries();
  e->set_session_id(session_id);
  for (int i = 0; i < kAbandonedTokens; ++i) e->add_tokens(kTokenA);
  return req;
}

// One SlowStep, unary or as a StepStream's only message, on its own thread
// until `ctx` is cancelled; `answered` counts the calls that ended.
struct SlowCall {
  grpc::ClientContext ctx;
  grpc::Status status;
  v1::StepResponse resp;  // a unary call's reply (read after the join)
  std::thread thread;

  void Start(Client* client, uint64_t session_id, bool stream, std::atomic<int>* answered) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
    thread = std::thread([this, client, session_id, stream, answered] {
      const v1::StepRequest req = SlowStep(session_id);
      if (stream) {
        auto rw = client->stub()->StepStream(&ctx);
        if (rw->Write(req) && rw->Read(&resp)) rw->WritesDone();
        status = rw->Finish();
      } else {
        status = client->stub()->Step(&ctx, req, &resp);
      }
      ++*answered;
    });
  }
};

// Polls the server's metrics (every 100 ms, at most 60 s) until the step
// pool holds `tasks` tasks, queued or running, and runs at least one when
// `tasks` > 0 (how many run depends on how the server tells the callers
// apart: one client runs on all threads but one).
bool WaitForStepPool(const MaskdProcess& server, int tasks) {
  for (int i = 0; i < 600; ++i) {
    const std::string m = server.Metrics();
    const double running =
        MetricValue(m, "maskd_work_pool_tasks{pool=\"step\",state=\"running\"}");
    const double queued = MetricValue(m, "maskd_work_pool_tasks{pool=\"step\",state=\"queued\"}");
    if (running + queued == tasks && (tasks == 0 || running >= 1)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

std::chrono::system_clock::time_point In30s() {
  return std::chrono::system_clock::now() + std::chrono::seconds(30);
}

// A one-entry Step of `tokens` on `session_id`, with a 30 s deadline: OK and
// the entry OK.
void ExpectCheapStep(Client& client, uint64_t session_id, std::vector<uint32_t> tokens) {
  v1::StepRequest req;
  auto* e = req.add_entries();
  e->set_session_id(session_id);
  for (uint32_t t : tokens) e->add_tokens(t);
  grpc::ClientContext ctx;
  ctx.set_deadline(In30s());
  v1::StepResponse resp;
  grpc::Status s = client.stub()->Step(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.results(0).status().code(), 0) << resp.results(0).status().message();
}

// `n` connections ("hostile-0", ...), each with a session on
// kSelfConcatLark, whose steps parse for minutes.
void ConnectSlowClients(MaskdProcess& server, int n, std::vector<std::unique_ptr<Client>>* clients,
                        std::vector<uint64_t>* sessions) {
  for (int i = 0; i < n; ++i) {
    clients->push_back(server.Connect("hostile-" + std::to_string(i)));
    auto s =
        clients->back()->CreateSession(GrammarRequest(kSelfConcatLark, v1::Grammar::FORMAT_LARK));
    ASSERT_TRUE(s.ok()) << s.status();
    sessions->push_back(s->session_id());
  }
}

// Issue #24 (1c) for steps: batches that step a grammar session run on
// --step-threads (Step, StepStream, StepInRegion), round-robin across
// clients; regex batches stay on gRPC's threads. Four connections whose
// grammar steps take minutes (two unary, two streamed; some run, the others
// wait)
// hold none of gRPC's callback threads: another client's Ping, health check,
// regex Step and regex StepStream message are answered while all four are
// still unanswered. Cancelled, the slow steps stop: the pool serves a
// grammar step again.
TEST(GrammarServiceLimits, SlowGrammarStepsHoldNoCallbackThread) {
  MaskdProcess server({"--max-grammar-parser-steps=1000000000000000",
                       "--max-grammar-mask-work=1000000000000", "--step-threads=2"});
  ASSERT_TRUE(server.ok()) << server.Log();
  constexpr int kSlow = 4;
  std::vector<std::unique_ptr<Client>> hostile;
  std::vector<uint64_t> slow_sessions;
  ASSERT_NO_FATAL_FAILURE(ConnectSlowClients(server, kSlow, &hostile, &slow_sessions));
  auto victim = server.Connect("victim");
  auto regex = victim->CompileRegex("qwen3", "[0-9]+");
  ASSERT_TRUE(regex.ok()) << regex.status();
  auto cheap = victim->CreateSession(regex->index_id());
  ASSERT_TRUE(cheap.ok()) << cheap.status();
  auto arithmetic =
      victim->CreateSession(GrammarRequest(kArithmeticGbnf, v1::Grammar::FORMAT_GBNF));
  ASSERT_TRUE(arithmetic.ok()) << arithmetic.status();
  auto stream = victim->OpenStepStream();
  ASSERT_TRUE(stream.ok()) << stream.status();

  std::atomic<int> answered{0};
  std::vector<SlowCall> slow(kSlow);
  for (int i = 0; i < kSlow; ++i) {
    slow[i].Start(hostile[i].get(), slow_sessions[i], /*stream=*/i % 2 == 1, &answered);
  }
  // All four reached the pool (--step-threads=2: some run, the others wait).
  ASSERT_TRUE(WaitForStepPool(server, kSlow)) << server.Metrics();

  grpc::ClientContext ping_ctx;
  ping_ctx.set_deadline(In30s());
  v1::PingResponse pong;
  grpc::Status ping = victim->stub()->Ping(&ping_ctx, v1::PingRequest(), &pong);
  EXPECT_TRUE(ping.ok()) << ping.error_message();
  auto health = victim->Health();
  EXPECT_TRUE(health.ok() && *health == "SERVING") << health.status();
  ExpectCheapStep(*victim, cheap->session_id(), {16});  // "1" in Qwen3
  v1::StepRequest streamed;
  auto* e = streamed.add_entries();
  e->set_session_id(cheap->session_id());
  e->add_tokens(16);
  v1::StepResponse streamed_resp;
  absl::Status st = (*stream)->Step(streamed, &streamed_resp);
  EXPECT_TRUE(st.ok()) << st;
  if (st.ok()) {
    EXPECT_EQ(streamed_resp.results(0).num_tokens(), 2u);
  }
  EXPECT_EQ(answered.load(), 0) << "a slow step ended: the test shows nothing";

  for (SlowCall& c : slow) c.ctx.TryCancel();
  for (SlowCall& c : slow) c.thread.join();
  for (const SlowCall& c : slow) {
    EXPECT_EQ(c.status.error_code(), grpc::StatusCode::CANCELLED) << c.status.error_message();
  }
  // The server stops their work (running and queued): the pool serves a
  // grammar step again. (Not a timing assertion: the 30 s deadline bounds a
  // failure; without the interrupt the slow steps would hold both threads
  // for minutes.)
  ExpectCheapStep(*victim, arithmetic->session_id(), {16});
  EXPECT_TRUE(WaitForStepPool(server, 0)) << server.Metrics();
  EXPECT_TRUE((*stream)->Close().ok());
}

// One client's tasks run on all step threads but one: a client (one TCP
// connection) whose three grammar steps take minutes holds one of the two
// threads, and another client's cheap grammar step runs on the other while
// the three are still unanswered. Past --max-pending-steps-per-client the
// first client is refused, naming the flag.
TEST(GrammarServiceLimits, OneClientCannotHoldEveryStepThread) {
  MaskdProcess server({"--max-grammar-parser-steps=1000000000000000",
                       "--max-grammar-mask-work=1000000000000", "--step-threads=2",
                       "--max-pending-steps-per-client=3", "--listen=127.0.0.1:0"});
  ASSERT_TRUE(server.ok()) << server.Log();
  // The TCP port in the start line's listen=... (after the unix socket).
  const std::string log = server.Log();
  const size_t at = log.find(",127.0.0.1:", log.find(" listen="));
  ASSERT_NE(at, std::string::npos) << log;
  auto tcp = Client::Connect("127.0.0.1:" + std::to_string(atoi(log.c_str() + at + 11)));
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  Client& hostile = **tcp;  // its key: the TCP peer; the victim's: its uid
  constexpr int kSlow = 3;
  std::vector<uint64_t> slow_sessions;
  for (int i = 0; i < kSlow + 1; ++i) {
    auto s = hostile.CreateSession(GrammarRequest(kSelfConcatLark, v1::Grammar::FORMAT_LARK));
    ASSERT_TRUE(s.ok()) << s.status();
    slow_sessions.push_back(s->session_id());
  }
  auto victim = server.Connect("victim");
  auto arithmetic =
      victim->CreateSession(GrammarRequest(kArithmeticGbnf, v1::Grammar::FORMAT_GBNF));
  ASSERT_TRUE(arithmetic.ok()) << arithmetic.status();

  std::atomic<int> answered{0};
  std::vector<SlowCall> slow(kSlow);
  for (int i = 0; i < kSlow; ++i) slow[i].Start(&hostile, slow_sessions[i], false, &answered);
  ASSERT_TRUE(WaitForStepPool(server, kSlow)) << server.Metrics();  // one runs, two wait
  // A fourth is past the client's cap.
  grpc::ClientContext refused_ctx;
  refused_ctx.set_deadline(In30s());
  v1::StepResponse refused_resp;
  grpc::Status refused =
      hostile.stub()->Step(&refused_ctx, SlowStep(slow_sessions[kSlow]), &refused_resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("--max-pending-steps-per-client"));

  ExpectCheapStep(*victim, arithmetic->session_id(), {16});  // "1" in Qwen3
  EXPECT_EQ(answered.load(), 0) << "a slow step ended: the test shows nothing";

  for (SlowCall& c : slow) c.ctx.TryCancel();
  for (SlowCall& c : slow) c.thread.join();
  EXPECT_TRUE(WaitForStepPool(server, 0)) << server.Metrics();
}

// Polls the server's metrics (every 100 ms, at most 60 s) until the step
// pool runs `running` tasks, of them long (past --step-slice-ms, on extra
// threads) between `min_long` and `max_long`.
bool WaitForLongSteps(const MaskdProcess& server, int running, int min_long, int max_long) {
  for (int i = 0; i < 600; ++i) {
    const std::string m = server.Metrics();
    const double long_tasks =
        MetricValue(m, "maskd_work_pool_tasks{pool=\"step\",state=\"long\"}");
    if (MetricValue(m, "maskd_work_pool_tasks{pool=\"step\",state=\"running\"}") == running &&
        long_tasks >= min_long && long_tasks <= max_long) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// Issue #24, the hostile mix's first cause: as many clients as step threads
// (two), each with a grammar step that parses for minutes, held both
// threads, and a third client's cheap grammar step waited for one of them
// to end. Now a step past --step-slice-ms goes long (an extra thread, lower
// priority) when there is room, even before another waits: both slow ones
// run long and the third client's step is answered while they still run.
TEST(GrammarServiceLimits, TwoSlowClientsLeaveAStepThreadToAThird) {
  MaskdProcess server({"--max-grammar-parser-steps=1000000000000000",
                       "--max-grammar-mask-work=1000000000000", "--step-threads=2"});
  ASSERT_TRUE(server.ok()) << server.Log();
  constexpr int kSlow = 2;
  std::vector<std::unique_ptr<Client>> hostile;
  std::vector<uint64_t> slow_sessions;
  ASSERT_NO_FATAL_FAILURE(ConnectSlowClients(server, kSlow, &hostile, &slow_sessions));
  auto victim = server.Connect("victim");
  auto arithmetic =
      victim->CreateSession(GrammarRequest(kArithmeticGbnf, v1::Grammar::FORMAT_GBNF));
  ASSERT_TRUE(arithmetic.ok()) << arithmetic.status();

  std::atomic<int> answered{0};
  std::vector<SlowCall> slow(kSlow);
  for (int i = 0; i < kSlow; ++i) slow[i].Start(hostile[i].get(), slow_sessions[i], false, &answered);
  // Both long, neither holding a step thread (the gauges are polled once a
  // second: wait for them).
  ASSERT_TRUE(WaitForLongSteps(server, kSlow, kSlow, kSlow)) << server.Metrics();

  ExpectCheapStep(*victim, arithmetic->session_id(), {16});  // "1" in Qwen3
  EXPECT_EQ(answered.load(), 0) << "a slow step ended: the test shows nothing";

  for (SlowCall& c : slow) c.ctx.TryCancel();
  for (SlowCall& c : slow) c.thread.join();
  for (const SlowCall& c : slow) {
    EXPECT_EQ(c.status.error_code(), grpc::StatusCode::CANCELLED) << c.status.error_message();
  }
  EXPECT_TRUE(WaitForStepPool(server, 0)) << server.Metrics();
}

// --max-long-steps bounds the long steps: with one step thread and one long
// slot, the first slow step goes long past its slice (the slot free), the
// second keeps the thread (no slot left), and, polled while a third client's
// step waits, is refused RESOURCE_EXHAUSTED
// naming the flag, its session unchanged (no token taken), as a
// --max-grammar-parser-steps refusal leaves it; the third client's step then
// runs while the first slow step still does.
TEST(GrammarServiceLimits, NoLongSlotLeftRefusesTheStepAndKeepsItsSession) {
  MaskdProcess server({"--max-grammar-parser-steps=1000000000000000",
                       "--max-grammar-mask-work=1000000000000", "--step-threads=1",
                       "--max-long-steps=1"});
  ASSERT_TRUE(server.ok()) << server.Log();
  std::vector<std::unique_ptr<Client>> hostile;
  std::vector<uint64_t> slow_sessions;
  ASSERT_NO_FATAL_FAILURE(ConnectSlowClients(server, 2, &hostile, &slow_sessions));
  auto victim = server.Connect("victim");
  auto arithmetic =
      victim->CreateSession(GrammarRequest(kArithmeticGbnf, v1::Grammar::FORMAT_GBNF));
  ASSERT_TRUE(arithmetic.ok()) << arithmetic.status();

  std::atomic<int> answered{0};
  std::vector<SlowCall> slow(2);
  slow[0].Start(hostile[0].get(), slow_sessions[0], false, &answered);
  ASSERT_TRUE(WaitForLongSteps(server, 1, 1, 1)) << server.Metrics();  // it went long
  slow[1].Start(hostile[1].get(), slow_sessions[1], false, &answered);
  ASSERT_TRUE(WaitForLongSteps(server, 2, 1, 1)) << server.Metrics();  // on the thread

  ExpectCheapStep(*victim, arithmetic->session_id(), {16});  // "1" in Qwen3
  slow[1].thread.join();  // refused
  ASSERT_TRUE(slow[1].status.ok()) << slow[1].status.error_message();
  ASSERT_EQ(slow[1].resp.results_size(), 1);
  const auto& refused = slow[1].resp.results(0).status();
  EXPECT_EQ(refused.code(), static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED))
      << refused.message();
  EXPECT_THAT(refused.message(), HasSubstr("(--max-long-steps)"));
  EXPECT_EQ(SessionTokens(*hostile[1], slow_sessions[1]), 0);  // no token taken
  EXPECT_EQ(answered.load(), 1) << "the first slow step ended: the test shows nothing";

  slow[0].ctx.TryCancel();
  slow[0].thread.join();
  EXPECT_EQ(slow[0].status.error_code(), grpc::StatusCode::CANCELLED)
      << slow[0].status.error_message();
  EXPECT_EQ(SessionTokens(*hostile[0], slow_sessions[0]), 0);
  EXPECT_TRUE(WaitForStepPool(server, 0)) << server.Metrics();
}

}  // namespace
}  // namespace maskd
