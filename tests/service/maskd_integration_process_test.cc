// Integration tests with servers of their own: session TTL, cache eviction
// with leased indexes, /metrics after a known workload, SIGTERM drain, compile
// limits, health while tokenizers load, bad startup flags. The real maskd
// binary on a temporary unix socket, the bundled qwen3 tokenizer.
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

// Servers of their own (flags or exact metric counts).

TEST(MaskdProcessTest, SessionTtl) {
  MaskdProcess server({"--session-ttl=1s"});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto c = server.Connect();
  v1::CompileRequest req;
  req.set_tokenizer("qwen3");
  req.set_regex("[0-9]+");
  auto idle = c->CreateSession(req);
  auto busy = c->CreateSession(req);
  ASSERT_TRUE(idle.ok() && busy.ok());
  v1::StepRequest step;
  step.add_entries()->set_session_id(busy->session_id());
  v1::StepResponse resp;
  for (int i = 0; i < 10; ++i) {  // 2.5 s, busy stays alive
    ASSERT_TRUE(c->Step(step, &resp).ok());
    EXPECT_EQ(resp.results(0).status().code(), 0) << i;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  step.mutable_entries(0)->set_session_id(idle->session_id());
  ASSERT_TRUE(c->Step(step, &resp).ok());
  EXPECT_EQ(resp.results(0).status().code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  std::string m = server.Metrics();
  EXPECT_EQ(MetricValue(m, "maskd_sessions_expired_total"), 1) << m;
  EXPECT_EQ(MetricValue(m, "maskd_sessions_active"), 1);
}

TEST(MaskdProcessTest, CacheEvictionSparesLeasedIndexes) {
  // Each index holds one computed 151,669-bit mask (~19 KB) plus its DFA
  // after its first mask; the budget fits about two.
  MaskdProcess server({"--cache-bytes=60000"});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto c = server.Connect();
  auto pinned = c->CreateSession([] {
    v1::CompileRequest r;
    r.set_tokenizer("qwen3");
    r.set_regex("[0-9]{4}");
    return r;
  }());
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  v1::StepRequest step;
  step.add_entries()->set_session_id(pinned->session_id());
  v1::StepResponse resp;
  ASSERT_TRUE(c->Step(step, &resp).ok());
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    auto idx = c->CompileRegex("qwen3", absl::StrCat("[a-z]{", i + 1, "}x"));
    ASSERT_TRUE(idx.ok()) << idx.status();
    ASSERT_TRUE(c->Mask(idx->index_id(), {}).ok());  // computes a mask: the index grows
    ids.push_back(idx->index_id());
  }
  // Touch the cache so it re-measures (Maintain runs after each compile).
  ASSERT_TRUE(c->CompileRegex("qwen3", "z").ok());
  std::string m = server.Metrics();
  EXPECT_GT(MetricValue(m, "maskd_index_cache_evictions_total"), 0) << m;
  EXPECT_LE(MetricValue(m, "maskd_index_cache_bytes"), 60000 * 2);
  // The leased index survived and its session works.
  EXPECT_TRUE(c->GetIndex(pinned->index_id(), false).ok());
  step.mutable_entries(0)->add_tokens(kOne);
  ASSERT_TRUE(c->Step(step, &resp).ok());
  EXPECT_EQ(resp.results(0).status().code(), 0);
  // The oldest unleased ones are gone: NOT_FOUND, and a new Compile rebuilds.
  EXPECT_EQ(c->GetIndex(ids[0], false).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(c->CreateSession(ids[0]).status().code(), absl::StatusCode::kNotFound);
  auto again = c->CompileRegex("qwen3", "[a-z]{1}x");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->cache_hit());
  EXPECT_EQ(again->index_id(), ids[0]);
}

TEST(MaskdProcessTest, MetricsAfterKnownWorkload) {
  MaskdProcess server;
  ASSERT_TRUE(server.ok()) << server.Log();
  auto c = server.Connect();
  auto s = c->CreateSession([] {
    v1::CompileRequest r;
    r.set_tokenizer("qwen3");
    r.set_regex("[0-9]{3}");
    return r;
  }());
  ASSERT_TRUE(s.ok());
  v1::StepRequest req;
  auto* e = req.add_entries();
  e->set_session_id(s->session_id());
  req.add_entries()->set_session_id(77);  // unknown: an entry error
  v1::StepResponse resp;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c->Step(req, &resp).ok());
    e->clear_tokens();
    e->add_tokens(kOne);
  }
  EXPECT_EQ(c->CloseSession(999).code(), absl::StatusCode::kNotFound);
  std::string m = server.Metrics();
  EXPECT_EQ(MetricValue(m, "maskd_build_info{version=\"0.1.0\"}"), 1) << m;
  EXPECT_EQ(MetricValue(m, "maskd_compile_seconds_count{kind=\"regex\",result=\"ok\"}"), 1);
  EXPECT_EQ(MetricValue(m, "maskd_index_cache_misses_total"), 1);
  EXPECT_EQ(MetricValue(m, "maskd_index_cache_hits_total"), 0);
  EXPECT_GT(MetricValue(m, "maskd_index_cache_bytes"), 0);
  EXPECT_EQ(MetricValue(m, "maskd_sessions_active"), 1);
  EXPECT_EQ(MetricValue(m, "maskd_sessions_max"), 100000);
  EXPECT_EQ(MetricValue(m, "maskd_step_seconds_count"), 3);
  EXPECT_EQ(MetricValue(m, "maskd_step_batch_size_count"), 3);
  EXPECT_EQ(MetricValue(m, "maskd_step_batch_size_sum"), 6);
  EXPECT_EQ(MetricValue(m, "maskd_tokens_advanced_total"), 2);
  EXPECT_EQ(MetricValue(m, "maskd_rpc_errors_total{code=\"NOT_FOUND\",method=\"CloseSession\"}"), 1);
  EXPECT_EQ(MetricValue(m, "maskd_step_entry_errors_total{code=\"NOT_FOUND\"}"), 3);
  // No constraint or session id ever appears in the exposition.
  EXPECT_THAT(m, ::testing::Not(HasSubstr("[0-9]")));
  EXPECT_THAT(m, ::testing::Not(HasSubstr(std::to_string(s->session_id()))));
}

// What an engine gives the server shows in its metrics whichever RPC it uses:
// Mask calls are counted and timed; Step calls and entries are counted by the
// engine the client names in its user agent (a bounded label: an unknown name
// is "other", no name "unknown").
TEST(MaskdProcessTest, MetricsCountMaskCallsAndStepsPerEngineClient) {
  MaskdProcess server;
  ASSERT_TRUE(server.ok()) << server.Log();
  auto vllm = server.Connect("vllm");
  auto odd = server.Connect("my-engine{x=\"1\"}");
  auto plain = server.Connect();
  v1::CompileRequest compile;
  compile.set_tokenizer("qwen3");
  compile.set_regex("[0-9]{3}");
  auto index = vllm->Compile(compile);
  ASSERT_TRUE(index.ok()) << index.status();
  auto s = vllm->CreateSession(compile);
  ASSERT_TRUE(s.ok());
  v1::StepRequest req;
  req.add_entries()->set_session_id(s->session_id());
  req.add_entries()->set_session_id(77);  // unknown: still an entry of the call
  v1::StepResponse resp;
  ASSERT_TRUE(vllm->Step(req, &resp).ok());
  ASSERT_TRUE(vllm->Step(req, &resp).ok());
  ASSERT_TRUE(odd->Step(req, &resp).ok());
  ASSERT_TRUE(plain->Step(req, &resp).ok());
  const uint32_t one[] = {kOne};
  ASSERT_TRUE(vllm->Mask(index->index_id(), one).ok());
  ASSERT_TRUE(plain->Mask(index->index_id(), {}).ok());
  EXPECT_EQ(plain->Mask("no-such-index", {}).status().code(), absl::StatusCode::kNotFound);
  const std::string m = server.Metrics();
  EXPECT_EQ(MetricValue(m, "maskd_client_step_calls_total{client=\"vllm\"}"), 2) << m;
  EXPECT_EQ(MetricValue(m, "maskd_client_step_entries_total{client=\"vllm\"}"), 4);
  EXPECT_EQ(MetricValue(m, "maskd_client_step_calls_total{client=\"other\"}"), 1);
  EXPECT_EQ(MetricValue(m, "maskd_client_step_calls_total{client=\"unknown\"}"), 1);
  EXPECT_EQ(MetricValue(m, "maskd_mask_seconds_count"), 2);  // the failed one is an RPC error
  EXPECT_EQ(MetricValue(m, "maskd_client_mask_calls_total{client=\"vllm\"}"), 1);
  EXPECT_EQ(MetricValue(m, "maskd_client_mask_calls_total{client=\"unknown\"}"), 1);
  EXPECT_EQ(MetricValue(m, "maskd_rpc_errors_total{code=\"NOT_FOUND\",method=\"Mask\"}"), 1);
  EXPECT_THAT(m, ::testing::Not(HasSubstr("my-engine")));
}

TEST(MaskdProcessTest, SigtermDrainsInFlightRpcs) {
  MaskdProcess server({"--drain-delay=1s", "--grace-period=20s"});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto c = server.Connect();
  auto s = c->CreateSession([] {
    v1::CompileRequest r;
    r.set_tokenizer("qwen3");
    r.set_regex("[0-9]+");
    return r;
  }());
  ASSERT_TRUE(s.ok());
  auto stream = c->OpenStepStream();
  ASSERT_TRUE(stream.ok());
  v1::StepRequest req;
  auto* e = req.add_entries();
  e->set_session_id(s->session_id());
  v1::StepResponse resp;
  ASSERT_TRUE((*stream)->Step(req, &resp).ok());
  EXPECT_EQ(*c->Health(), "SERVING");
  server.Signal(SIGTERM);
  // Drain delay: still answering, health NOT_SERVING.
  std::string health;
  for (int i = 0; i < 20 && health != "NOT_SERVING"; ++i) {
    auto h = c->Health();
    health = h.ok() ? *h : "";
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_EQ(health, "NOT_SERVING");
  // Past the drain delay the in-flight stream keeps working.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  e->add_tokens(kOne);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE((*stream)->Step(req, &resp).ok()) << i;
    EXPECT_EQ(resp.results(0).status().code(), 0);
  }
  EXPECT_EQ(server.Wait(0.3), -1);  // still running: the stream is open
  EXPECT_TRUE((*stream)->Close().ok());
  EXPECT_EQ(server.Wait(15), 0) << server.Log();
  std::string log = server.Log();
  EXPECT_THAT(log, HasSubstr(" INFO stop signal=SIGTERM"));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("[0-9]")));  // constraints never logged
}

TEST(MaskdProcessTest, CompileLimits) {
  // (a|b)*a(a|b){19} needs 1,048,577 DFA states: well over 300 ms to compile.
  MaskdProcess server({"--max-regex-repeat=20", "--max-nfa-states=400", "--max-dfa-states=4000000",
                       "--compile-timeout=300ms", "--max-pending-compiles=1",
                       "--compile-threads=1", "--failure-ttl=200ms"});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto c = server.Connect();
  // A repeat over --max-regex-repeat is a limit: RESOURCE_EXHAUSTED.
  auto repeat = c->CompileRegex("qwen3", "a{21}");
  EXPECT_EQ(repeat.status().code(), absl::StatusCode::kResourceExhausted) << repeat.status();
  EXPECT_THAT(std::string(repeat.status().message()), HasSubstr("limit"));
  EXPECT_TRUE(c->CompileRegex("qwen3", "a{20}").ok());
  std::string many;
  for (int i = 0; i < 30; ++i) many += i % 2 ? "[a-z]{20}" : "[0-9]{20}";
  EXPECT_EQ(c->CompileRegex("qwen3", many).status().code(),
            absl::StatusCode::kResourceExhausted);  // --max-nfa-states
  v1::CompileRequest slow;
  slow.set_tokenizer("qwen3");
  slow.set_regex("(a|b)*a(a|b){19}");
  slow.mutable_options()->set_eager(true);  // lazy (the default) would build one state
  auto first = c->Compile(slow);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->state(), v1::INDEX_STATE_COMPILING);
  v1::CompileRequest other = slow;
  other.set_regex("(a|b)*b(a|b){19}");
  EXPECT_EQ(c->Compile(other).status().code(), absl::StatusCode::kResourceExhausted);  // pending
  // --compile-timeout=300ms caps every compilation.
  auto waited = c->GetIndex(first->index_id(), /*wait=*/true);
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kDeadlineExceeded) << waited.status();
  // --failure-ttl=200ms: dropped by the next sweep (every second).
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(c->GetIndex(first->index_id(), false).status().code(), absl::StatusCode::kNotFound);
  std::string m = server.Metrics();
  EXPECT_EQ(MetricValue(m, "maskd_compile_seconds_count{kind=\"regex\",result=\"deadline_exceeded\"}"), 1) << m;
  // The repeat limit, the NFA limit and the pending-compile limit.
  EXPECT_EQ(MetricValue(m, "maskd_rpc_errors_total{code=\"RESOURCE_EXHAUSTED\",method=\"Compile\"}"), 3);
}

TEST(MaskdProcessTest, HealthNotServingUntilTokenizersLoaded) {
  // Six copies of the bundled tokenizer take a few seconds to load; the
  // server answers health meanwhile.
  char tmpl[] = "/tmp/maskd-test-toks-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  for (int i = 0; i < 6; ++i) {
    ASSERT_EQ(symlink((std::string(MASKD_SOURCE_DIR) + "/data/tokenizers/qwen3").c_str(),
                      (dir + "/q" + std::to_string(i)).c_str()),
              0);
  }
  MaskdProcess server({"--tokenizer-dir=" + dir}, /*wait_ready=*/false);
  // Connect once the socket exists (a refused first connection would put the
  // channel in reconnect backoff past the loading window).
  const std::string sock = server.addr().substr(strlen("unix://"));
  for (int i = 0; i < 500 && access(sock.c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // A prober: one connection attempt may take 100 ms at most, so a slow
  // first handshake (sanitizers, a loaded machine) fails and is retried
  // instead of holding the first call past the loading window.
  ClientOptions probe;
  probe.timeout = absl::Seconds(5);
  probe.connect_timeout = absl::Milliseconds(100);
  auto c = *Client::Connect(server.addr(), probe);
  std::vector<std::string> seen;
  for (int i = 0; i < 600 && (seen.empty() || seen.back() != "SERVING"); ++i) {
    auto h = c->Health();
    if (h.ok() && (seen.empty() || seen.back() != *h)) seen.push_back(*h);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"NOT_SERVING", "SERVING"}));
  EXPECT_TRUE(server.WaitReady(30));
  auto list = c->ListTokenizers();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 6u);
  (void)!system(("rm -rf '" + dir + "'").c_str());
}

TEST(MaskdProcessTest, BadStartupFlags) {
  MaskdProcess missing({"--tokenizer-dir=/nonexistent/folder"});
  EXPECT_FALSE(missing.ok());
  EXPECT_EQ(missing.Wait(10), 1);
  EXPECT_THAT(missing.Log(), HasSubstr("ERROR"));
}

}  // namespace
}  // namespace maskd
