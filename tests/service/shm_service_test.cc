// Integration tests of maskd.v1.SharedMemory: the real maskd binary on a
// temporary unix socket (--allow_shm), POSIX shared-memory segments created
// here, results checked against Maskd.Step replies of twin sessions.
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

namespace maskd {
namespace {

using ::maskd::testing::MaskdProcess;
using ::maskd::testing::MetricValue;
using ::maskd::testing::SessionTokens;
using ::maskd::testing::WaitForAnyMetric;
using ::testing::HasSubstr;
using ::testing::Not;
using Code = absl::StatusCode;

constexpr uint32_t kQwenVocab = 151669;
constexpr uint32_t kQwenWords = (kQwenVocab + 31) / 32;
const char kRegex[] = "[a-z]{1,12}( [a-z]{1,12}){0,8}";

std::string Key(const std::string& tag) {
  static std::atomic<int> n{0};
  return absl::StrCat("/maskd-test-", getpid(), "-", tag, "-", n++);
}

shm::PosixShmSegment NewSegment(const std::string& tag, size_t bytes) {
  auto seg = shm::PosixShmSegment::Create(Key(tag), bytes);
  EXPECT_TRUE(seg.ok()) << seg.status();
  return seg.ok() ? *std::move(seg) : shm::PosixShmSegment();
}

uint32_t NegInf(LogitsDtype d) {
  return d == LogitsDtype::kFloat32 ? 0xFF800000u : d == LogitsDtype::kFloat16 ? 0xFC00u : 0xFF80u;
}
v1::LogitsDtype ProtoDtype(LogitsDtype d) {
  return d == LogitsDtype::kFloat32   ? v1::LOGITS_DTYPE_FP32
         : d == LogitsDtype::kFloat16 ? v1::LOGITS_DTYPE_FP16
                                      : v1::LOGITS_DTYPE_BF16;
}
uint32_t GetElem(const void* base, size_t elem, size_t i) {
  uint32_t v = 0;
  std::memcpy(&v, static_cast<const char*>(base) + i * elem, elem);
  return v;
}

class ShmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new MaskdProcess({"--allow_shm", "--max-batch=64", "--max-message-bytes=67108864"});
    ASSERT_TRUE(server_->ok()) << server_->Log();
    // Two tiny tokenizers of different widths (40 ids: 2 words; 100 ids: 4).
    auto c = server_->Connect();
    for (uint32_t v : {40u, 100u}) {
      v1::RegisterTokenizerRequest req;
      req.set_name(absl::StrCat("tiny", v));
      req.set_tokenizer_json(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
        "merges": ["a b"]}, "added_tokens": [{"id": 3, "content": "<eos>", "special": true}],
        "decoder": {"type": "ByteLevel"}, "pre_tokenizer": {"type": "ByteLevel"}})");
      req.set_tokenizer_config_json(R"({"eos_token": "<eos>"})");
      req.set_vocab_size(v);
      auto t = c->RegisterTokenizer(req);
      ASSERT_TRUE(t.ok()) << t.status();
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(server_ && server_->ok());
    client_ = server_->Connect();
    shm_ = std::make_unique<ShmClient>(client_->channel(), absl::Seconds(30));
  }
  void TearDown() override {
    if (shm_) (void)shm_->UnregisterRegion("");
  }

  uint64_t NewSession(const std::string& tokenizer = "qwen3", const std::string& regex = kRegex) {
    v1::CompileRequest req;
    req.set_tokenizer(tokenizer);
    req.set_regex(regex);
    req.set_wait(true);
    auto s = client_->CreateSession(req);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->session_id() : 0;
  }
  std::vector<uint64_t> NewSessions(int n, const std::string& tokenizer = "qwen3",
                                    const std::string& regex = kRegex) {
    std::vector<uint64_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back(NewSession(tokenizer, regex));
    return ids;
  }
  uint64_t NumTokens(uint64_t id) {
    v1::StepRequest req;
    req.add_entries()->set_session_id(id);
    v1::StepResponse resp;
    EXPECT_TRUE(client_->Step(req, &resp).ok());
    return resp.results(0).num_tokens();
  }

  static MaskdProcess* server_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<ShmClient> shm_;
};

MaskdProcess* ShmTest::server_ = nullptr;

TEST_F(ShmTest, RegisterListUnregister) {
  auto seg = NewSegment("list", 1 << 16);
  ASSERT_TRUE(shm_->RegisterSystemRegion("b", seg.key(), 100, 1000).ok());
  ASSERT_TRUE(shm_->RegisterSystemRegion("a", seg.key(), 0, seg.size()).ok());
  auto list = shm_->ListRegions();
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name(), "a");
  EXPECT_EQ((*list)[0].kind(), v1::REGION_KIND_SYSTEM);
  EXPECT_EQ((*list)[0].byte_size(), seg.size());
  EXPECT_EQ((*list)[0].device_id(), -1);
  EXPECT_EQ((*list)[0].calls_in_flight(), 0);
  EXPECT_EQ((*list)[1].name(), "b");
  EXPECT_EQ((*list)[1].byte_size(), 1000u);
  auto one = shm_->ListRegions("b");
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].name(), "b");
  EXPECT_TRUE(shm_->UnregisterRegion("a").ok());
  list = shm_->ListRegions();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(shm_->ListRegions("a").status().code(), Code::kNotFound);
  EXPECT_TRUE(shm_->RegisterSystemRegion("a", seg.key(), 0, 8).ok());  // name free again
  EXPECT_TRUE(shm_->UnregisterRegion("").ok());
  list = shm_->ListRegions();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
}

TEST_F(ShmTest, RegistrationErrors) {
  auto seg = NewSegment("errors", 4096);
  auto code = [&](const std::string& name, const std::string& key, uint64_t off, uint64_t size) {
    return shm_->RegisterSystemRegion(name, key, off, size).code();
  };
  EXPECT_EQ(code("r", "no-slash", 0, 8), Code::kInvalidArgument);
  EXPECT_EQ(code("r", absl::StrCat("/other-", getpid()), 0, 8), Code::kPermissionDenied);
  EXPECT_EQ(code("r", Key("missing"), 0, 8), Code::kNotFound);
  EXPECT_EQ(code("r", seg.key(), 0, 4097), Code::kOutOfRange);
  EXPECT_EQ(code("r", seg.key(), 4000, 97), Code::kOutOfRange);
  EXPECT_EQ(code("r", seg.key(), std::numeric_limits<uint64_t>::max(), 2), Code::kInvalidArgument);
  EXPECT_EQ(code("r", seg.key(), 0, 0), Code::kInvalidArgument);
  EXPECT_EQ(code("", seg.key(), 0, 8), Code::kInvalidArgument);
  ASSERT_EQ(code("r", seg.key(), 0, 4096), Code::kOk);
  EXPECT_EQ(code("r", seg.key(), 0, 8), Code::kAlreadyExists);
  EXPECT_EQ(shm_->UnregisterRegion("nope").code(), Code::kNotFound);
  EXPECT_EQ(shm_->ListRegions("nope").status().code(), Code::kNotFound);
  // CUDA handles: the length is checked first, on every build.
  for (size_t len : {0, 63, 65, 128}) {
    absl::Status s = shm_->RegisterCudaRegion("c", std::string(len, 'x'), 0, 0, 8);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << len << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("64"));
  }
  // A well-formed but bogus handle: UNIMPLEMENTED (no CUDA in this build),
  // UNAVAILABLE (no GPU) or INVALID_ARGUMENT (rejected by the driver); the
  // message never carries CUDA internals.
  absl::Status s = shm_->RegisterCudaRegion("c", std::string(64, '\x01'), 0, 0, 8);
  EXPECT_THAT(s.code(), ::testing::AnyOf(Code::kUnimplemented, Code::kUnavailable,
                                         Code::kInvalidArgument))
      << s;
  EXPECT_THAT(std::string(s.message()), Not(HasSubstr("cuda")));
  EXPECT_THAT(std::string(s.message()), Not(HasSubstr("CUDA_ERROR")));
  // Messages never name server paths.
  absl::Status missing = shm_->RegisterSystemRegion("r2", Key("gone"), 0, 8);
  EXPECT_THAT(std::string(missing.message()), Not(HasSubstr("/dev/shm")));
}

TEST(ShmDisabled, RegistrationOffByDefault) {
  MaskdProcess server;  // no --allow_shm
  ASSERT_TRUE(server.ok()) << server.Log();
  auto client = server.Connect();
  ShmClient shm(client->channel(), absl::Seconds(30));
  auto seg = NewSegment("disabled", 4096);
  absl::Status s = shm.RegisterSystemRegion("r", seg.key(), 0, 4096);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--allow_shm"));
  EXPECT_EQ(shm.RegisterCudaRegion("c", std::string(64, 'x'), 0, 0, 8).code(),
            Code::kFailedPrecondition);
  auto list = shm.ListRegions();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
  v1::StepInRegionRequest req;
  req.mutable_masks()->set_region("r");
  v1::StepInRegionResponse resp;
  EXPECT_EQ(shm.StepInRegion(req, &resp).code(), Code::kNotFound);
}

TEST(ShmPrefix, KeysOutsideTheServersPrefixAreRefused) {
  const std::string prefix = absl::StrCat("/maskdx-", getpid(), "-");
  MaskdProcess server({"--allow_shm", "--shm_prefix=" + prefix});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto client = server.Connect();
  ShmClient shm(client->channel(), absl::Seconds(30));
  auto inside = shm::PosixShmSegment::Create(prefix + "a", 4096);
  ASSERT_TRUE(inside.ok()) << inside.status();
  EXPECT_TRUE(shm.RegisterSystemRegion("in", inside->key(), 0, 4096).ok());
  auto outside = NewSegment("prefix", 4096);  // "/maskd-test-...": the default prefix
  absl::Status s = shm.RegisterSystemRegion("out", outside.key(), 0, 4096);
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(prefix));

  MaskdProcess bad({"--allow_shm", "--shm_prefix=no-slash"}, /*wait_ready=*/false);
  EXPECT_EQ(bad.Wait(30), 2);
  EXPECT_THAT(bad.Log(), HasSubstr("--shm_prefix"));
}

// Issue #24 finding 3: one client (by default its connection) has at most
// --max-shm-regions-per-client regions registered; another connection of the
// same uid still registers; unregistering (from any connection of the uid)
// gives the units back.
TEST(ShmShares, RegionsPerClient) {
  MaskdProcess server({"--allow_shm", "--max-shm-regions-per-client=2"});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto connection = [&] {  // a connection of its own (no shared subchannel)
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel(server.addr(), grpc::InsecureChannelCredentials(), args);
  };
  ShmClient mine(connection(), absl::Seconds(30)), theirs(connection(), absl::Seconds(30));
  auto seg = NewSegment("shares", 4096);
  ASSERT_TRUE(mine.RegisterSystemRegion("m1", seg.key(), 0, 4096).ok());
  ASSERT_TRUE(mine.RegisterSystemRegion("m2", seg.key(), 0, 4096).ok());
  absl::Status refused = mine.RegisterSystemRegion("m3", seg.key(), 0, 4096);
  EXPECT_EQ(refused.code(), Code::kResourceExhausted) << refused;
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("holds 2 shared-memory regions, its whole share "
                        "(--max-shm-regions-per-client=2"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("client conn:"));
  // A failed registration takes no unit: another connection has its own.
  EXPECT_EQ(theirs.RegisterSystemRegion("t1", Key("gone"), 0, 8).code(), Code::kNotFound);
  ASSERT_TRUE(theirs.RegisterSystemRegion("t1", seg.key(), 0, 4096).ok());
  ASSERT_TRUE(theirs.RegisterSystemRegion("t2", seg.key(), 0, 4096).ok());
  // Unregistering gives the unit back.
  ASSERT_TRUE(mine.UnregisterRegion("m1").ok());
  EXPECT_TRUE(mine.RegisterSystemRegion("m3", seg.key(), 0, 4096).ok());
  // So does unregistering all of the uid's regions, from the other connection.
  ASSERT_TRUE(theirs.UnregisterRegion("").ok());
  EXPECT_TRUE(mine.RegisterSystemRegion("m4", seg.key(), 0, 4096).ok());
  EXPECT_TRUE(mine.RegisterSystemRegion("m5", seg.key(), 0, 4096).ok());
  EXPECT_TRUE(theirs.RegisterSystemRegion("t3", seg.key(), 0, 4096).ok());
}

// Masks target: the region holds exactly the bytes of Step's reply.
TEST_F(ShmTest, MasksEqualStepReplyByteForByte) {
  const int n = 3;
  std::vector<uint64_t> a = NewSessions(n), b = NewSessions(n);
  const std::string metrics_before = server_->Metrics();
  const size_t offset = 64, bytes = size_t{n} * kQwenWords * 4;
  auto seg = NewSegment("masks", offset + bytes + 64);
  std::memset(seg.data(), 0xAB, seg.size());
  ASSERT_TRUE(shm_->RegisterSystemRegion("m", seg.key(), 0, seg.size()).ok());
  v1::StepInRegionRequest sreq;
  sreq.mutable_masks()->set_region("m");
  sreq.mutable_masks()->set_offset(offset);
  v1::StepRequest req;
  for (int i = 0; i < n; ++i) {
    sreq.add_entries()->set_session_id(a[i]);
    req.add_entries()->set_session_id(b[i]);
  }
  std::mt19937_64 rng(3);
  for (int step = 0; step < 6; ++step) {
    v1::StepInRegionResponse sresp;
    v1::StepResponse resp;
    ASSERT_TRUE(shm_->StepInRegion(sreq, &sresp).ok());
    ASSERT_TRUE(client_->Step(req, &resp).ok());
    ASSERT_EQ(sresp.words_per_row(), kQwenWords);
    ASSERT_EQ(resp.masks().size(), bytes);
    ASSERT_EQ(std::memcmp(static_cast<char*>(seg.data()) + offset, resp.masks().data(), bytes), 0)
        << "step " << step;
    for (size_t i = 0; i < offset; ++i) ASSERT_EQ(static_cast<uint8_t*>(seg.data())[i], 0xAB);
    for (size_t i = offset + bytes; i < seg.size(); ++i) {
      ASSERT_EQ(static_cast<uint8_t*>(seg.data())[i], 0xAB);
    }
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(sresp.results(i).status().code(), 0);
      EXPECT_EQ(sresp.results(i).accepting(), resp.results(i).accepting());
      EXPECT_EQ(sresp.results(i).forced(), resp.results(i).forced());
      EXPECT_EQ(sresp.results(i).num_tokens(), resp.results(i).num_tokens());
      std::vector<uint32_t> allowed = AllowedTokens(MaskRow(resp, i));
      ASSERT_FALSE(allowed.empty());
      uint32_t t = allowed[rng() % allowed.size()];
      sreq.mutable_entries(i)->clear_tokens();
      sreq.mutable_entries(i)->add_tokens(t);
      req.mutable_entries(i)->clear_tokens();
      req.mutable_entries(i)->add_tokens(t);
    }
  }
  // A bad session id in the batch: its row is all zero, the others written.
  sreq.mutable_entries(1)->set_session_id(12345);
  v1::StepInRegionResponse sresp;
  ASSERT_TRUE(shm_->StepInRegion(sreq, &sresp).ok());
  EXPECT_EQ(sresp.results(1).status().code(), static_cast<int>(Code::kNotFound));
  EXPECT_EQ(sresp.results(0).status().code(), 0);
  const uint32_t* row1 =
      reinterpret_cast<const uint32_t*>(static_cast<char*>(seg.data()) + offset) + kQwenWords;
  for (uint32_t w = 0; w < kQwenWords; ++w) ASSERT_EQ(row1[w], 0u);
  // StepInRegion calls count as Step calls in the metrics, with their batch size:
  // 7 StepInRegion + 6 Step calls of 3 entries each.
  const std::string m = server_->Metrics();
  auto delta = [&](const std::string& name) {  // an absent sample (-1) is 0
    return std::max(MetricValue(m, name), 0.0) - std::max(MetricValue(metrics_before, name), 0.0);
  };
  EXPECT_EQ(delta("maskd_step_batch_size_count"), 13) << m;
  EXPECT_EQ(delta("maskd_step_batch_size_sum"), 39);
  EXPECT_EQ(delta("maskd_client_step_entries_total{client=\"unknown\"}"), 39);
}

// A batch with a grammar session runs on the step pool (--step-threads), off
// the callback thread: its rows land in the region as a unary Step's reply
// carries them, with a regex session beside it in the same batch.
TEST_F(ShmTest, GrammarBatchMasksEqualStepReplyByteForByte) {
  v1::CompileRequest grammar;
  grammar.set_tokenizer("qwen3");
  grammar.mutable_grammar()->set_text("root ::= [0-9]+ (\"+\" [0-9]+)*\n");
  grammar.mutable_grammar()->set_format(v1::Grammar::FORMAT_GBNF);
  grammar.set_wait(true);
  auto ga = client_->CreateSession(grammar);
  auto gb = client_->CreateSession(grammar);
  ASSERT_TRUE(ga.ok() && gb.ok()) << ga.status() << gb.status();
  const uint64_t ra = NewSession(), rb = NewSession();
  const size_t bytes = size_t{2} * kQwenWords * 4;
  auto seg = NewSegment("grammar", bytes);
  ASSERT_TRUE(shm_->RegisterSystemRegion("g", seg.key(), 0, seg.size()).ok());
  v1::StepInRegionRequest sreq;
  sreq.mutable_masks()->set_region("g");
  sreq.add_entries()->set_session_id(ga->session_id());
  sreq.add_entries()->set_session_id(ra);
  v1::StepRequest req;
  req.add_entries()->set_session_id(gb->session_id());
  req.add_entries()->set_session_id(rb);
  std::mt19937_64 rng(5);
  for (int step = 0; step < 6; ++step) {
    std::memset(seg.data(), 0xAB, seg.size());
    v1::StepInRegionResponse sresp;
    v1::StepResponse resp;
    ASSERT_TRUE(shm_->StepInRegion(sreq, &sresp).ok());
    ASSERT_TRUE(client_->Step(req, &resp).ok());
    ASSERT_EQ(resp.masks().size(), bytes);
    ASSERT_EQ(std::memcmp(seg.data(), resp.masks().data(), bytes), 0) << "step " << step;
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(sresp.results(i).status().code(), 0) << sresp.results(i).status().message();
      EXPECT_EQ(sresp.results(i).num_tokens(), resp.results(i).num_tokens());
      EXPECT_EQ(sresp.results(i).num_tokens(), static_cast<uint64_t>(step));
      std::vector<uint32_t> allowed = AllowedTokens(MaskRow(resp, i));
      ASSERT_FALSE(allowed.empty());
      const uint32_t t = allowed[rng() % allowed.size()];
      for (auto* e : {sreq.mutable_entries(i), req.mutable_entries(i)}) {
        e->clear_tokens();
        e->add_tokens(t);
      }
    }
  }
  EXPECT_TRUE(shm_->UnregisterRegion("g").ok());
}

TEST_F(ShmTest, StepInRegionRequestErrorsStepNothing) {
  uint64_t id = NewSession();
  uint64_t wide = NewSession("tiny100", "[ab]*"), narrow = NewSession("tiny40", "[ab]*");
  auto seg = NewSegment("reqerr", 1 << 20);
  ASSERT_TRUE(shm_->RegisterSystemRegion("r", seg.key(), 0, seg.size()).ok());
  auto call = [&](const v1::StepInRegionRequest& r) {
    v1::StepInRegionResponse resp;
    return shm_->StepInRegion(r, &resp);
  };
  v1::StepInRegionRequest base;
  auto* e = base.add_entries();
  e->set_session_id(id);
  auto allowed = AllowedTokens(MaskRow([&] {
    v1::StepRequest q;
    q.add_entries()->set_session_id(id);
    v1::StepResponse p;
    EXPECT_TRUE(client_->Step(q, &p).ok());
    return p;
  }(), 0));
  ASSERT_FALSE(allowed.empty());
  e->add_tokens(allowed[0]);  // would advance the session if stepped

  v1::StepInRegionRequest r = base;
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);  // no target
  r.mutable_masks()->set_region("unknown");
  EXPECT_EQ(call(r).code(), Code::kNotFound);
  r.mutable_masks()->set_region("r");
  r.mutable_masks()->set_offset(seg.size() - 100);
  EXPECT_EQ(call(r).code(), Code::kOutOfRange);
  r.mutable_masks()->set_offset(2);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);  // misaligned
  // Mixed widths on a masks target.
  v1::StepInRegionRequest mixed;
  mixed.mutable_masks()->set_region("r");
  mixed.add_entries()->set_session_id(wide);
  mixed.add_entries()->set_session_id(narrow);
  absl::Status ms = call(mixed);
  EXPECT_EQ(ms.code(), Code::kInvalidArgument);
  EXPECT_THAT(std::string(ms.message()), HasSubstr("same mask width"));

  auto logits = [&] {
    v1::StepInRegionRequest l = base;
    auto* t = l.mutable_logits();
    t->set_region("r");
    t->set_dtype(v1::LOGITS_DTYPE_BF16);
    t->set_rows(1);
    t->set_vocab(kQwenVocab);
    return l;
  };
  r = logits();
  r.mutable_logits()->set_dtype(v1::LOGITS_DTYPE_UNSPECIFIED);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);
  r = logits();
  r.mutable_logits()->set_rows(0);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);
  r = logits();
  r.mutable_logits()->set_vocab(0);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);
  r = logits();
  r.mutable_logits()->set_row_stride(kQwenVocab - 1);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);
  r = logits();
  r.mutable_logits()->set_rows(4);  // 4 rows > 1 entry, no map; also past the region
  EXPECT_THAT(call(r).code(), ::testing::AnyOf(Code::kInvalidArgument, Code::kOutOfRange));
  r = logits();
  r.mutable_logits()->set_rows(2);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);  // no map, 2 rows, 1 entry
  r.mutable_logits()->add_row_map(0);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);  // map size != rows
  r.mutable_logits()->add_row_map(1);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);  // entry 1 does not exist
  r = logits();
  r.mutable_logits()->set_offset(1);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);  // misaligned bf16
  r = logits();
  r.mutable_logits()->set_offset(seg.size() - 1000);
  EXPECT_EQ(call(r).code(), Code::kOutOfRange);
  r = logits();
  r.mutable_logits()->set_row_stride(uint64_t{1} << 62);
  r.mutable_logits()->set_rows(5);
  r.mutable_logits()->add_row_map(0);
  r.mutable_logits()->add_row_map(0);
  r.mutable_logits()->add_row_map(0);
  r.mutable_logits()->add_row_map(0);
  r.mutable_logits()->add_row_map(0);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);  // overflow
  r = logits();
  r.mutable_logits()->set_wait_event(std::string(64, 'e'));
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);  // event on a system region
  // None of these stepped the session.
  EXPECT_EQ(NumTokens(id), 0u);
  // And a good call does.
  r = logits();
  v1::StepInRegionResponse ok;
  ASSERT_TRUE(shm_->StepInRegion(r, &ok).ok());
  EXPECT_EQ(ok.results(0).status().code(), 0);
  EXPECT_EQ(ok.results(0).num_tokens(), 1u);
}

// Apply in place, every dtype: a row map with untouched rows, a padded row
// stride, logits wider than the tokenizer, and a bad session id whose row is
// left untouched.
void ApplyCase(ShmTest* t, Client* client, ShmClient* shm, LogitsDtype dtype,
               const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  const int n = static_cast<int>(a.size());
  const size_t elem = LogitsDtypeSize(dtype);
  const uint32_t vocab = kQwenVocab + 267;  // Qwen's real logits width: 151936
  const uint64_t stride = vocab + 64;
  const std::vector<int32_t> row_map = {2, -1, 0, 3, 1, -1, 2};  // entry 3: bad session
  const uint32_t rows = static_cast<uint32_t>(row_map.size());
  const size_t offset = 4096 + 8 * elem;
  const size_t count = (rows - 1) * stride + vocab;
  auto seg = NewSegment("apply", offset + count * elem + 4096);
  std::mt19937_64 rng(static_cast<uint64_t>(dtype) + 11);
  const std::string region = absl::StrCat("apply-", LogitsDtypeName(dtype));
  ASSERT_TRUE(shm->RegisterSystemRegion(region, seg.key(), 0, seg.size()).ok());

  v1::StepInRegionRequest sreq;
  auto* target = sreq.mutable_logits();
  target->set_region(region);
  target->set_offset(offset);
  target->set_dtype(ProtoDtype(dtype));
  target->set_rows(rows);
  target->set_vocab(vocab);
  target->set_row_stride(stride);
  for (int32_t m : row_map) target->add_row_map(m);
  v1::StepRequest req;
  for (int i = 0; i < n; ++i) {
    sreq.add_entries()->set_session_id(i == 3 ? 424242 : a[i]);
    req.add_entries()->set_session_id(b[i]);
  }
  req.set_words_per_row(0);
  char* logits = static_cast<char*>(seg.data()) + offset;
  for (int step = 0; step < 4; ++step) {
    // Random bits, never -inf, so that "untouched" and "masked" differ.
    std::vector<uint8_t> before(seg.size());
    for (auto& x : before) x = static_cast<uint8_t>(rng());
    for (size_t i = 0; i < before.size() / elem; ++i) {
      if (GetElem(before.data(), elem, i) == NegInf(dtype)) before[i * elem] ^= 1;
    }
    std::memcpy(seg.data(), before.data(), seg.size());
    v1::StepInRegionResponse sresp;
    v1::StepResponse resp;
    ASSERT_TRUE(shm->StepInRegion(sreq, &sresp).ok());
    ASSERT_TRUE(client->Step(req, &resp).ok());
    ASSERT_EQ(sresp.results(3).status().code(), static_cast<int>(Code::kNotFound));
    const char* want_base = reinterpret_cast<const char*>(before.data()) + offset;
    for (uint32_t r = 0; r < rows; ++r) {
      const int32_t m = row_map[r];
      for (uint64_t c = 0; c < stride && r * stride + c < count; ++c) {
        const size_t i = r * stride + c;
        uint32_t want = GetElem(want_base, elem, i);
        if (m >= 0 && m != 3 && c < vocab) {
          absl::Span<const uint32_t> mask = MaskRow(resp, m);
          if (!Allowed(mask, static_cast<uint32_t>(c))) want = NegInf(dtype);
        }
        ASSERT_EQ(GetElem(logits, elem, i), want)
            << LogitsDtypeName(dtype) << " step " << step << " row " << r << " col " << c;
      }
    }
    // Outside the logits: untouched.
    ASSERT_EQ(std::memcmp(seg.data(), before.data(), offset), 0);
    ASSERT_EQ(std::memcmp(logits + count * elem, want_base + count * elem,
                          seg.size() - offset - count * elem),
              0);
    for (int i = 0; i < n; ++i) {
      if (i == 3) continue;
      ASSERT_EQ(sresp.results(i).status().code(), 0);
      ASSERT_EQ(sresp.results(i).num_tokens(), resp.results(i).num_tokens());
      std::vector<uint32_t> allowed = AllowedTokens(MaskRow(resp, i));
      ASSERT_FALSE(allowed.empty());
      uint32_t tok = allowed[rng() % allowed.size()];
      sreq.mutable_entries(i)->clear_tokens();
      sreq.mutable_entries(i)->add_tokens(tok);
      req.mutable_entries(i)->clear_tokens();
      req.mutable_entries(i)->add_tokens(tok);
    }
  }
  (void)t;
}

TEST_F(ShmTest, ApplyInPlaceFp32) { ApplyCase(this, client_.get(), shm_.get(), LogitsDtype::kFloat32, NewSessions(4), NewSessions(4)); }
TEST_F(ShmTest, ApplyInPlaceBf16) { ApplyCase(this, client_.get(), shm_.get(), LogitsDtype::kBFloat16, NewSessions(4), NewSessions(4)); }
TEST_F(ShmTest, ApplyInPlaceFp16) { ApplyCase(this, client_.get(), shm_.get(), LogitsDtype::kFloat16, NewSessions(4), NewSessions(4)); }

// Logits narrower than a session's vocabulary: that entry fails, its row is
// untouched; a mixed-width batch applies (padding ids -inf).
TEST_F(ShmTest, MixedWidthsAndNarrowLogits) {
  uint64_t wide = NewSession("tiny100", "[ab]*"), narrow = NewSession("tiny40", "[ab]*");
  auto seg = NewSegment("narrow", 2 * 64 * 4);
  ASSERT_TRUE(shm_->RegisterSystemRegion("n", seg.key(), 0, seg.size()).ok());
  float* f = static_cast<float*>(seg.data());
  std::fill_n(f, 128, 1.0f);
  v1::StepInRegionRequest req;
  req.add_entries()->set_session_id(narrow);
  req.add_entries()->set_session_id(wide);
  auto* t = req.mutable_logits();
  t->set_region("n");
  t->set_dtype(v1::LOGITS_DTYPE_FP32);
  t->set_rows(2);
  t->set_vocab(64);
  v1::StepInRegionResponse resp;
  ASSERT_TRUE(shm_->StepInRegion(req, &resp).ok());
  EXPECT_EQ(resp.results(0).status().code(), 0);
  EXPECT_EQ(resp.results(1).status().code(), static_cast<int>(Code::kInvalidArgument));
  EXPECT_EQ(resp.words_per_row(), 4u);
  // Row 0 (tiny40, "[ab]*"): a (0), b (1), ab (2), <eos> (3) allowed; the rest -inf.
  for (int c = 0; c < 64; ++c) {
    if (c < 4) {
      EXPECT_EQ(f[c], 1.0f) << c;
    } else {
      EXPECT_EQ(f[c], -std::numeric_limits<float>::infinity()) << c;
    }
  }
  for (int c = 64; c < 128; ++c) EXPECT_EQ(f[c], 1.0f) << c;  // row 1 untouched
  EXPECT_EQ(NumTokens(wide), 0u);
}

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

// maskctl shm-demo: output contract.
std::string RunCapture(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, k);
  int st = pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

TEST_F(ShmTest, MaskctlShmDemoContract) {
  const std::string maskctl = std::string(MASKD_BIN_DIR) + "/maskctl";
  for (const char* dtype : {"fp32", "bf16", "fp16"}) {
    int status = -1;
    std::string out = RunCapture(maskctl + " --addr " + server_->addr() +
                                     " shm-demo --tokenizer qwen3 --regex '" + kRegex +
                                     "' --rows 3 --steps 4 --dtype " + dtype,
                                 &status);
    ASSERT_EQ(status, 0) << out;
    ASSERT_FALSE(out.empty());
    ASSERT_EQ(out.back(), '\n');
    auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["rows"], 3);
    EXPECT_EQ(j["steps"], 4);
    EXPECT_EQ(j["dtype"], dtype);
    EXPECT_EQ(j["mismatches"], 0);
    EXPECT_GT(j["apply_p50_us"].get<double>(), 0);
    EXPECT_GT(j["reply_p50_us"].get<double>(), 0);
    EXPECT_EQ(j.size(), 6u);
  }
  int status = -1;
  std::string out = RunCapture(maskctl + " --addr " + server_->addr() +
                                   " shm-demo --tokenizer nope --regex a --rows 1 --steps 1 2>&1",
                               &status);
  EXPECT_EQ(status, 2) << out;
  EXPECT_THAT(out, HasSubstr("maskctl shm-demo:"));
  out = RunCapture(maskctl + " --addr " + server_->addr() +
                       " shm-demo --tokenizer qwen3 --regex a --rows 1 --steps 1 --dtype fp64 2>&1",
                   &status);
  EXPECT_EQ(status, 2) << out;
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

// Issue #11 item 10 (shm half): a symlink or FIFO key answered INTERNAL and
// was logged as a server error. Now: the client's error, named, bounded, not
// logged, and the FIFO never blocks the server.
TEST_F(ShmTest, KeysThatAreNotObjectsAreTheClientsError) {
  auto target = NewSegment("target", 4096);
  const std::string link = Key("symlink"), fifo = Key("fifo"), dir = Key("dir");
  ASSERT_EQ(symlink(("/dev/shm" + target.key()).c_str(), ("/dev/shm" + link).c_str()), 0);
  ASSERT_EQ(mkfifo(("/dev/shm" + fifo).c_str(), 0600), 0);
  ASSERT_EQ(mkdir(("/dev/shm" + dir).c_str(), 0700), 0);
  const std::string empty = Key("empty");
  const int efd = shm_open(empty.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(efd, 0);
  close(efd);
  auto small = NewSegment("small", 100);
  const std::string log_before = server_->Log();
  struct Case {
    std::string key;
    Code code;
    std::string reason;
  };
  for (const Case& c : std::vector<Case>{
           {link, Code::kFailedPrecondition, "symbolic link"},
           {fifo, Code::kFailedPrecondition, "FIFO"},
           {dir, Code::kFailedPrecondition, "directory"},
           {Key("absent"), Code::kNotFound, "does not exist"},
           {empty, Code::kOutOfRange, "(0 bytes)"},
           {small.key(), Code::kOutOfRange, "(100 bytes)"},
       }) {
    absl::Status s = shm_->RegisterSystemRegion("k", c.key, 0, 4096);
    EXPECT_EQ(s.code(), c.code) << c.key << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.key));
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.reason));
    EXPECT_LT(s.message().size(), 400u);
  }
  // A 20 kB region name comes back NOT_FOUND with a short message.
  v1::StepInRegionRequest req;
  req.mutable_masks()->set_region(std::string(20000, 'r'));
  v1::StepInRegionResponse resp;
  absl::Status s = shm_->StepInRegion(req, &resp);
  EXPECT_EQ(s.code(), Code::kNotFound) << s.message().substr(0, 100);
  EXPECT_LT(s.message().size(), 200u);
  EXPECT_EQ(server_->Log().substr(log_before.size()).find("ERROR"), std::string::npos)
      << server_->Log().substr(log_before.size());
  unlink(("/dev/shm" + link).c_str());
  unlink(("/dev/shm" + fifo).c_str());
  unlink(("/dev/shm" + empty).c_str());
  rmdir(("/dev/shm" + dir).c_str());
}

// Copies shm_peer_child into `dir` (mode 0755) and returns the copy's path,
// or "" on error. The build tree may sit under a directory other users cannot
// enter (/root, a 0700 mktemp folder); `dir` is one they can.
std::string CopyPeerChild(const std::string& dir) {
  const std::string from = std::string(MASKD_BIN_DIR) + "/shm_peer_child";
  const std::string to = dir + "/shm_peer_child";
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  out << in.rdbuf();
  out.close();
  if (!in || !out || chmod(to.c_str(), 0755) != 0) return "";
  return to;
}

// Whether `uid` (gid too) may execute `path`.
bool CanExecAs(uid_t uid, const std::string& path) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0) _exit(2);
    _exit(access(path.c_str(), X_OK) == 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Runs `child` (a shm_peer_child) as `uid` (gid too) with `args`; returns its
// stdout line ("<code>[ names]"), or "" when it could not run.
std::string RunHelperAs(uid_t uid, const std::string& child, const std::vector<std::string>& args) {
  int out[2];
  if (pipe(out) != 0) return "";
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    if (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0) _exit(126);
    std::vector<std::string> a = {child};
    a.insert(a.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : a) argv.push_back(s.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  std::string text;
  char buf[256];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "";
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

std::string CodeOf(Code c) { return std::to_string(static_cast<int>(c)); }

// Gives shared-memory object `key` to `uid`.
void Chown(const std::string& key, uid_t uid) {
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fchown(fd, uid, uid), 0);
  close(fd);
}

// Issue #11 item 3: a root maskd mapped and wrote an object another user owns
// (mode 0600). End to end over the unix socket: the caller's uid comes from
// SO_PEERCRED and must own the object; a region is used, listed and
// unregistered only by its owner.
TEST(ShmOwnership, UnixCallersMayUseOnlyTheirOwnMemory) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a client as uid 65534";
  constexpr uid_t kNobody = 65534;
  MaskdProcess server({"--allow_shm", "--socket_mode=0666"});
  ASSERT_TRUE(server.ok()) << server.Log();
  const std::string dir = server.addr().substr(7, server.addr().rfind('/') - 7);
  ASSERT_EQ(chmod(dir.c_str(), 0711), 0);  // let uid 65534 reach the socket
  // ... and run the helper: from the build tree it may not (issue #24, 5).
  const std::string child = CopyPeerChild(dir);
  ASSERT_NE(child, "") << "cannot copy shm_peer_child into " << dir;
  if (!CanExecAs(kNobody, child)) {
    GTEST_SKIP() << "uid 65534 cannot execute " << child << " (is " << dir
                 << "'s file system mounted noexec?)";
  }
  auto client = server.Connect();
  ShmClient shm(client->channel(), absl::Seconds(30));
  const std::string addr = server.addr();
  auto RunAs = [&child](uid_t uid, const std::vector<std::string>& args) {
    return RunHelperAs(uid, child, args);
  };
  ASSERT_NE(RunAs(kNobody, {addr, "list"}), "") << "shm_peer_child did not run as uid 65534";

  // Root's 0600 object: nobody cannot register it; root can.
  auto roots = NewSegment("root-owned", 4096);
  EXPECT_EQ(RunAs(kNobody, {addr, "register", "stolen", roots.key(), "4096"}),
            CodeOf(Code::kPermissionDenied));
  ASSERT_TRUE(shm.RegisterSystemRegion("roots", roots.key(), 0, 4096).ok());
  // ... nor use, unregister or see root's region.
  EXPECT_EQ(RunAs(kNobody, {addr, "step", "roots"}), CodeOf(Code::kPermissionDenied));
  EXPECT_EQ(RunAs(kNobody, {addr, "unregister", "roots"}), CodeOf(Code::kPermissionDenied));
  EXPECT_EQ(RunAs(kNobody, {addr, "unregister", ""}), CodeOf(Code::kOk));  // only its own
  EXPECT_EQ(RunAs(kNobody, {addr, "list"}), CodeOf(Code::kOk));            // sees none
  auto list = shm.ListRegions();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].name(), "roots");

  // Nobody's object: nobody registers it; root (maskd's own uid) may not.
  auto theirs = NewSegment("nobody-owned", 4096);
  Chown(theirs.key(), kNobody);
  absl::Status s = shm.RegisterSystemRegion("not-mine", theirs.key(), 0, 4096);
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(theirs.key()));
  EXPECT_EQ(RunAs(kNobody, {addr, "register", "theirs", theirs.key(), "4096"}),
            CodeOf(Code::kOk));
  EXPECT_EQ(RunAs(kNobody, {addr, "list"}), CodeOf(Code::kOk) + " theirs");
  v1::StepInRegionRequest req;
  req.mutable_masks()->set_region("theirs");
  v1::StepInRegionResponse resp;
  EXPECT_EQ(shm.StepInRegion(req, &resp).code(), Code::kPermissionDenied);
  EXPECT_EQ(shm.UnregisterRegion("theirs").code(), Code::kPermissionDenied);
  EXPECT_EQ(RunAs(kNobody, {addr, "step", "theirs"}), CodeOf(Code::kOk));
  EXPECT_EQ(RunAs(kNobody, {addr, "unregister", "theirs"}), CodeOf(Code::kOk));
  EXPECT_TRUE(shm.UnregisterRegion("roots").ok());
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

// The TCP listener carries no peer credentials: SharedMemory calls there are
// FAILED_PRECONDITION naming why, unless --shm_allow_tcp makes TCP clients
// act as maskd's own uid (whose objects they may then register).
TEST(ShmOwnership, TcpCallersNeedShmAllowTcp) {
  for (bool allow : {false, true}) {
    std::vector<std::string> flags = {"--allow_shm", "--listen=127.0.0.1:0"};
    if (allow) flags.push_back("--shm_allow_tcp");
    MaskdProcess server(flags);
    ASSERT_TRUE(server.ok()) << server.Log();
    const std::string log = server.Log();
    const size_t at = log.find("listen=");
    ASSERT_NE(at, std::string::npos) << log;
    const size_t tcp = log.find("127.0.0.1:", at);
    ASSERT_NE(tcp, std::string::npos) << log;
    const std::string tcp_addr = "127.0.0.1:" + std::to_string(std::atoi(log.c_str() + tcp + 10));
    auto c = Client::Connect(tcp_addr);
    ASSERT_TRUE(c.ok()) << c.status();
    ShmClient shm((*c)->channel(), absl::Seconds(30));
    auto seg = NewSegment("tcp", 4096);
    absl::Status s = shm.RegisterSystemRegion("t", seg.key(), 0, 4096);
    v1::StepInRegionRequest req;
    req.mutable_masks()->set_region("t");
    v1::StepInRegionResponse resp;
    if (!allow) {
      EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s;
      EXPECT_THAT(std::string(s.message()), HasSubstr("unix"));
      EXPECT_THAT(std::string(s.message()), HasSubstr("--shm_allow_tcp"));
      EXPECT_EQ(shm.StepInRegion(req, &resp).code(), Code::kFailedPrecondition);
      EXPECT_EQ(shm.ListRegions().status().code(), Code::kFailedPrecondition);
      EXPECT_EQ(shm.UnregisterRegion("t").code(), Code::kFailedPrecondition);
      // The unix socket still serves shared memory.
      ShmClient unix_shm(server.Connect()->channel(), absl::Seconds(30));
      EXPECT_TRUE(unix_shm.RegisterSystemRegion("t", seg.key(), 0, 4096).ok());
    } else {
      EXPECT_TRUE(s.ok()) << s;  // the object is maskd's own uid's (root's)
      EXPECT_TRUE(shm.StepInRegion(req, &resp).ok());
      if (geteuid() == 0) {
        auto other = NewSegment("tcp-other", 4096);
        Chown(other.key(), 65534);
        EXPECT_EQ(shm.RegisterSystemRegion("o", other.key(), 0, 4096).code(),
                  Code::kPermissionDenied);
      }
      EXPECT_TRUE(shm.UnregisterRegion("t").ok());
    }
  }
}

}  // namespace
}  // namespace maskd
