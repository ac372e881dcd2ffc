// Integration tests: the real maskd binary on a temporary unix socket, the
// bundled qwen3 tokenizer, driven through maskd::Client.
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
#include "reflection_subset.grpc.pb.h"
#include "tests/service/server_harness.h"

namespace maskd {
namespace {

using ::maskd::testing::MaskdProcess;
using ::maskd::testing::MetricValue;
using ::testing::HasSubstr;

// qwen3 ids (checked against the server by Detokenize in TokenIds).
constexpr uint32_t kOne = 16, kTwo = 17, kA = 64;
constexpr uint32_t kQwenVocab = 151669;

// The shared server: limits small enough to test, large enough for the rest.
const std::vector<std::string>& SharedFlags() {
  static const auto* flags = new std::vector<std::string>{
      "--max-batch=64",         "--max-sessions=300",       "--max-regex-bytes=65536",
      "--max-dfa-states=5000",  "--max-request-tokens=4096", "--max-message-bytes=8388608",
      "--max-tokenizers=3",     "--session-ttl=10m",         "--compile-threads=2"};
  return *flags;
}

class MaskdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new MaskdProcess(SharedFlags());
    ASSERT_TRUE(server_->ok()) << server_->Log();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(server_ && server_->ok());
    client_ = server_->Connect();
  }

  v1::CompileRequest Regex(const std::string& regex) {
    v1::CompileRequest req;
    req.set_tokenizer("qwen3");
    req.set_regex(regex);
    req.set_wait(true);
    return req;
  }
  uint64_t NewSession(const std::string& regex) {
    auto s = client_->CreateSession(Regex(regex));
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->session_id() : 0;
  }
  // One-entry step.
  v1::StepResponse StepOne(uint64_t id, std::vector<uint32_t> tokens, uint32_t rollback = 0) {
    v1::StepRequest req;
    auto* e = req.add_entries();
    e->set_session_id(id);
    e->set_rollback(rollback);
    for (uint32_t t : tokens) e->add_tokens(t);
    v1::StepResponse resp;
    absl::Status s = client_->Step(req, &resp);
    EXPECT_TRUE(s.ok()) << s;
    return resp;
  }
  std::vector<uint32_t> EosIds() {
    auto list = client_->ListTokenizers();
    EXPECT_TRUE(list.ok());
    for (const auto& t : *list) {
      if (t.name() == "qwen3") return {t.eos_ids().begin(), t.eos_ids().end()};
    }
    return {};
  }

  static MaskdProcess* server_;
  std::unique_ptr<Client> client_;
};

MaskdProcess* MaskdTest::server_ = nullptr;

TEST_F(MaskdTest, HealthPingStatsTokenizers) {
  EXPECT_EQ(*client_->Health(), "SERVING");
  EXPECT_TRUE(client_->Ping().ok());
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->pid(), static_cast<uint32_t>(server_->pid()));
  EXPECT_GT(stats->rss_bytes(), 0u);
  EXPECT_EQ(stats->version(), "0.1.0");
  auto list = client_->ListTokenizers();
  ASSERT_TRUE(list.ok());
  ASSERT_GE(list->size(), 1u);
  const v1::Tokenizer* qwen = nullptr;
  for (const auto& t : *list) {
    if (t.name() == "qwen3") qwen = &t;
  }
  ASSERT_NE(qwen, nullptr);
  EXPECT_EQ(qwen->vocab_size(), kQwenVocab);
  EXPECT_EQ(qwen->content_hash().size(), 64u);
  EXPECT_EQ(qwen->source(), "dir");
  EXPECT_EQ(qwen->kind(), "byte_level");
  EXPECT_FALSE(qwen->eos_ids().empty());
}

TEST_F(MaskdTest, ServerReflectionListsServices) {
  auto stub = grpc::reflection::v1alpha::ServerReflection::NewStub(client_->channel());
  grpc::ClientContext ctx;
  auto rw = stub->ServerReflectionInfo(&ctx);
  grpc::reflection::v1alpha::ServerReflectionRequest req;
  req.set_list_services("");
  ASSERT_TRUE(rw->Write(req));
  grpc::reflection::v1alpha::ServerReflectionResponse resp;
  ASSERT_TRUE(rw->Read(&resp));
  std::vector<std::string> names;
  for (const auto& s : resp.list_services_response().service()) names.push_back(s.name());
  EXPECT_THAT(names, ::testing::Contains("maskd.v1.Maskd"));
  EXPECT_THAT(names, ::testing::Contains("grpc.health.v1.Health"));
  req.set_file_containing_symbol("maskd.v1.StepRequest");
  ASSERT_TRUE(rw->Write(req));
  ASSERT_TRUE(rw->Read(&resp));
  EXPECT_EQ(resp.file_descriptor_response().file_descriptor_proto_size() > 0, true);
  rw->WritesDone();
  EXPECT_TRUE(rw->Finish().ok());
}

TEST_F(MaskdTest, TokenIds) {
  EXPECT_EQ(*client_->Detokenize("qwen3", std::vector<uint32_t>{kOne, kTwo, kA}), "12a");
  EXPECT_EQ(client_->Detokenize("qwen3", std::vector<uint32_t>{kQwenVocab}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Detokenize("nope", std::vector<uint32_t>{1}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(MaskdTest, CompileCacheAndPoll) {
  auto a = client_->CompileRegex("qwen3", "[0-9]{2}x");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->state(), v1::INDEX_STATE_READY);
  EXPECT_THAT(a->index_id(), ::testing::StartsWith("ix-"));
  EXPECT_EQ(a->index_id().size(), 35u);
  EXPECT_GT(a->dfa_states(), 1u);
  EXPECT_EQ(a->vocab_size(), kQwenVocab);
  EXPECT_EQ(a->words_per_row(), (kQwenVocab + 31) / 32);
  EXPECT_FALSE(a->cache_hit());
  auto b = client_->CompileRegex("qwen3", "[0-9]{2}x");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->cache_hit());
  EXPECT_EQ(a->index_id(), b->index_id());
  // Options are part of the key.
  v1::CompileRequest eager = Regex("[0-9]{2}x");
  eager.mutable_options()->set_eager(true);
  auto c = client_->Compile(eager);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->index_id(), a->index_id());
  // No wait: returns at once; GetIndex polls.
  v1::CompileRequest nowait = Regex("[a-f]{1,8}y");
  nowait.set_wait(false);
  auto d = client_->Compile(nowait);
  ASSERT_TRUE(d.ok());
  auto e = client_->GetIndex(d->index_id(), /*wait=*/true);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->state(), v1::INDEX_STATE_READY);
  EXPECT_EQ(client_->GetIndex("ix-0000", false).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(MaskdTest, CompileErrors) {
  auto bad = client_->CompileRegex("qwen3", "ab(c");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_FALSE(bad.status().message().empty());
  // The failure is cached: the same error again.
  auto again = client_->CompileRegex("qwen3", "ab(c");
  EXPECT_EQ(again.status(), bad.status());
  EXPECT_EQ(client_->CompileRegex("nope", "a").status().code(), absl::StatusCode::kNotFound);
  v1::CompileRequest none;
  none.set_tokenizer("qwen3");
  EXPECT_EQ(client_->Compile(none).status().code(), absl::StatusCode::kInvalidArgument);
  // --max-regex-bytes=65536
  EXPECT_EQ(client_->CompileRegex("qwen3", std::string(70000, 'a')).status().code(),
            absl::StatusCode::kResourceExhausted);
  // --max-dfa-states=5000: (a|b)*a(a|b){14} needs 2^15 states.
  EXPECT_EQ(client_->CompileRegex("qwen3", "(a|b)*a(a|b){14}").status().code(),
            absl::StatusCode::kResourceExhausted);
  // Deadline: an eager compile of many states within 1 ms cannot finish.
  v1::CompileRequest slow = Regex("[a-z]{1,300}q");
  slow.mutable_options()->set_eager(true);
  slow.mutable_options()->set_timeout_ms(1);
  EXPECT_EQ(client_->Compile(slow).status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(client_->CreateSession("ix-unknown").status().code(), absl::StatusCode::kNotFound);
  v1::CreateSessionRequest empty;
  v1::CreateSessionResponse resp;
  grpc::ClientContext ctx;
  EXPECT_EQ(client_->stub()->CreateSession(&ctx, empty, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(MaskdTest, JsonSchema) {
  v1::CompileRequest req;
  req.set_tokenizer("qwen3");
  req.set_json_schema(R"({"type": "integer"})");
  req.set_wait(true);
  auto r = client_->Compile(req);
  ASSERT_TRUE(r.ok()) << r.status();
  auto s = client_->CreateSession(r->index_id());
  ASSERT_TRUE(s.ok());
  auto step = StepOne(s->session_id(), {kOne, kTwo});
  EXPECT_EQ(step.results(0).status().code(), 0) << step.results(0).status().message();
  EXPECT_TRUE(step.results(0).accepting());
}

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

TEST_F(MaskdTest, Limits) {
  uint64_t id = NewSession("[0-9]*");
  v1::StepRequest req;
  v1::StepResponse resp;
  for (int i = 0; i < 65; ++i) req.add_entries()->set_session_id(id);  // --max-batch=64
  EXPECT_EQ(client_->Step(req, &resp).code(), absl::StatusCode::kResourceExhausted);
  req.Clear();
  auto* e = req.add_entries();
  e->set_session_id(id);
  for (int i = 0; i < 4097; ++i) e->add_tokens(kOne);  // --max-request-tokens=4096
  EXPECT_EQ(client_->Step(req, &resp).code(), absl::StatusCode::kResourceExhausted);
  req.Clear();
  req.add_entries()->set_session_id(id);
  req.set_words_per_row(4u << 20);  // 16 MiB reply > --max-message-bytes=8 MiB
  EXPECT_EQ(client_->Step(req, &resp).code(), absl::StatusCode::kResourceExhausted);
  // --max-message-bytes also bounds what the server receives.
  v1::CompileRequest huge = Regex(std::string(9u << 20, 'a'));
  EXPECT_EQ(client_->Compile(huge).status().code(), absl::StatusCode::kResourceExhausted);
  // --max-sessions=300
  std::vector<uint64_t> ids;
  absl::Status last;
  auto idx = client_->CompileRegex("qwen3", "[0-9]*");
  for (int i = 0; i < 310; ++i) {
    auto s = client_->CreateSession(idx->index_id());
    if (!s.ok()) {
      last = s.status();
      break;
    }
    ids.push_back(s->session_id());
  }
  EXPECT_EQ(last.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_LE(ids.size(), 300u);
  for (uint64_t s : ids) EXPECT_TRUE(client_->CloseSession(s).ok());
  EXPECT_TRUE(client_->CloseSession(id).ok());
}

TEST_F(MaskdTest, RegisterTokenizer) {
  const std::string json = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
    "merges": ["a b"]}, "added_tokens": [{"id": 3, "content": "<eos>", "special": true}],
    "decoder": {"type": "ByteLevel"}, "pre_tokenizer": {"type": "ByteLevel"}})";
  v1::RegisterTokenizerRequest req;
  req.set_name("tiny");
  req.set_tokenizer_json(json);
  req.set_tokenizer_config_json(R"({"eos_token": "<eos>"})");
  req.set_vocab_size(40);
  auto t = client_->RegisterTokenizer(req);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->vocab_size(), 40u);
  EXPECT_EQ(t->source(), "registered");
  ASSERT_EQ(t->eos_ids_size(), 1);
  EXPECT_EQ(t->eos_ids(0), 3u);
  EXPECT_TRUE(client_->RegisterTokenizer(req).ok());  // same content: no-op
  req.set_vocab_size(41);
  EXPECT_EQ(client_->RegisterTokenizer(req).status().code(), absl::StatusCode::kAlreadyExists);
  req.set_name("bad name");
  EXPECT_EQ(client_->RegisterTokenizer(req).status().code(), absl::StatusCode::kInvalidArgument);
  req.set_name("broken");
  req.set_tokenizer_json("{");
  EXPECT_EQ(client_->RegisterTokenizer(req).status().code(), absl::StatusCode::kInvalidArgument);

  v1::CompileRequest c;
  c.set_tokenizer("tiny");
  c.set_regex("(ab)+");
  auto s = client_->CreateSession(c);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->words_per_row(), 2u);
  auto r = StepOne(s->session_id(), {});
  EXPECT_EQ(AllowedTokens(MaskRow(r, 0)), (std::vector<uint32_t>{0, 2}));
  r = StepOne(s->session_id(), {2});
  EXPECT_EQ(AllowedTokens(MaskRow(r, 0)), (std::vector<uint32_t>{0, 2, 3}));
  // A batch over two vocabularies: rows as wide as the widest.
  uint64_t q = NewSession("[0-9]");
  v1::StepRequest req2;
  req2.add_entries()->set_session_id(s->session_id());
  req2.add_entries()->set_session_id(q);
  v1::StepResponse resp;
  ASSERT_TRUE(client_->Step(req2, &resp).ok());
  EXPECT_EQ(resp.words_per_row(), (kQwenVocab + 31) / 32);
  EXPECT_EQ(AllowedTokens(MaskRow(resp, 0)), (std::vector<uint32_t>{0, 2, 3}));
  // --max-tokenizers=3: qwen3 + tiny + one more.
  req.set_tokenizer_json(json);
  req.set_vocab_size(50);
  req.set_name("tiny2");
  EXPECT_TRUE(client_->RegisterTokenizer(req).ok());
  req.set_name("tiny3");
  EXPECT_EQ(client_->RegisterTokenizer(req).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(client_->CloseSession(s->session_id()).ok());
  EXPECT_TRUE(client_->CloseSession(q).ok());
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
