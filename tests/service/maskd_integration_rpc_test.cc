// Integration tests, the RPCs of one shared server: health, ping, stats,
// server reflection, token ids, Compile (cache, polling, errors, JSON Schema),
// the request limits and RegisterTokenizer. The real maskd binary on a
// temporary unix socket, the bundled qwen3 tokenizer, driven through
// maskd::Client.
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
  // --max-dfa-states=5000: (a|b)*a(a|b){14} needs 2^15 states. An eager
  // compile is refused; a lazy one (the default) builds only the start state,
  // and a walk past the limit is refused instead (constraint_guide_test).
  v1::CompileRequest big = Regex("(a|b)*a(a|b){14}");
  big.mutable_options()->set_eager(true);
  EXPECT_EQ(client_->Compile(big).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(client_->CompileRegex("qwen3", "(a|b)*a(a|b){14}").ok());
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

}  // namespace
}  // namespace maskd
