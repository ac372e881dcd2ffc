// Grammars through the real maskd binary: Compile with a grammar (GBNF, EBNF,
// Lark, recursive JSON Schemas), sessions that Step, roll back and fork, the
// stateless Mask, cache keys and errors. Every mask the server returns is
// compared with an in-process ConstraintGuide on the same (bundled)
// tokenizer, a separate compilation of the same grammar.
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
using ::maskd::grammar_service_test::kArithmeticGbnf;
using ::maskd::grammar_service_test::GrammarRequest;

constexpr char kCallsLark[] = R"g(start: call (";" call)*
call: NAME "(" [args] ")"
args: arg ("," arg)*
?arg: NUMBER | ESCAPED_STRING | call
%import common.CNAME -> NAME
%import common.NUMBER
%import common.ESCAPED_STRING
%import common.WS
%ignore WS
)g";

std::vector<uint32_t> AllowedIds(absl::Span<const uint32_t> row, uint32_t vocab_size) {
  std::vector<uint32_t> out;
  for (uint32_t t = 0; t < vocab_size; ++t) {
    if (Allowed(row, t)) out.push_back(t);
  }
  return out;
}

class GrammarServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new MaskdProcess({"--max-grammar-bytes=4096", "--max-sessions=50"});
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

  // Walks `steps` random tokens through a server session and an in-process
  // guide, comparing every mask; then rolls back and forks.
  void WalkAndCompare(const std::string& text, v1::Grammar::Format format, GrammarFormat local,
                      uint32_t seed) {
    WalkAndCompare(GrammarRequest(text, format), Constraint::Grammar(text, local, ::maskd::testing::BundledTokenizer()),
                   seed);
  }
  void WalkAndCompare(const v1::CompileRequest& request, const Constraint& local, uint32_t seed) {
    auto compiled = client_->Compile(request);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    EXPECT_EQ(compiled->route(), "grammar");
    auto session = client_->CreateSession(compiled->index_id());
    ASSERT_TRUE(session.ok()) << session.status();
    const uint64_t id = session->session_id();

    auto vocab = ::maskd::testing::BundledVocabulary();
    auto index = ConstraintCompiler().Compile(local);
    ASSERT_TRUE(index.ok()) << index.status();
    auto guide = ConstraintGuide::Create(index->index);
    ASSERT_TRUE(guide.ok());
    std::vector<uint32_t> want(index->index->num_words());

    std::mt19937 rng(seed);
    std::vector<uint32_t> taken;
    uint32_t next = 0;
    bool have_next = false;
    for (int step = 0; step < 30; ++step) {
      v1::StepRequest req;
      auto* e = req.add_entries();
      e->set_session_id(id);
      if (have_next) e->add_tokens(next);
      v1::StepResponse resp;
      ASSERT_TRUE(client_->Step(req, &resp).ok());
      ASSERT_EQ(resp.results(0).status().code(), 0) << resp.results(0).status().message();
      if (have_next) {
        ASSERT_TRUE(guide->Advance({next}).ok());
        taken.push_back(next);
      }
      ASSERT_TRUE(guide->WriteMask(absl::MakeSpan(want)).ok());
      absl::Span<const uint32_t> row = MaskRow(resp, 0);
      ASSERT_TRUE(std::equal(want.begin(), want.end(), row.begin())) << "step " << step;
      EXPECT_EQ(resp.results(0).accepting(), guide->IsAccepting());
      EXPECT_EQ(resp.results(0).num_tokens(), taken.size());
      EXPECT_EQ(resp.results(0).forced(), guide->ForcedContinuation());
      if (resp.results(0).finished()) break;
      std::vector<uint32_t> allowed = AllowedIds(row, vocab->size());
      ASSERT_FALSE(allowed.empty());
      // Prefer text tokens; EOS only late.
      next = allowed[rng() % allowed.size()];
      if (vocab->is_eos(next) && step < 20 && allowed.size() > 1) {
        next = allowed[0] == next ? allowed[1] : allowed[0];
      }
      have_next = true;
    }
    EXPECT_GE(taken.size(), 5u);
    // The stateless Mask agrees with the session.
    auto stateless = client_->Mask(compiled->index_id(), taken);
    ASSERT_TRUE(stateless.ok()) << stateless.status();
    ASSERT_TRUE(guide->WriteMask(absl::MakeSpan(want)).ok());
    EXPECT_EQ(stateless->mask(), std::string(reinterpret_cast<const char*>(want.data()),
                                             want.size() * 4));
    // Roll back half, fork, and step the fork: the original does not move.
    const uint32_t back = static_cast<uint32_t>(taken.size() / 2);
    auto left = client_->Rollback(id, back);
    ASSERT_TRUE(left.ok()) << left.status();
    EXPECT_EQ(*left, taken.size() - back);
    auto fork = client_->ForkSession(id);
    ASSERT_TRUE(fork.ok());
    taken.resize(taken.size() - back);
    auto replayed = ConstraintGuide::Replay(index->index, taken);
    ASSERT_TRUE(replayed.ok());
    ASSERT_TRUE(replayed->WriteMask(absl::MakeSpan(want)).ok());
    v1::StepRequest req;
    req.add_entries()->set_session_id(*fork);
    v1::StepResponse resp;
    ASSERT_TRUE(client_->Step(req, &resp).ok());
    absl::Span<const uint32_t> row = MaskRow(resp, 0);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), row.begin()));
    EXPECT_TRUE(client_->CloseSession(id).ok());
    EXPECT_TRUE(client_->CloseSession(*fork).ok());
  }

  static MaskdProcess* server_;
  std::unique_ptr<Client> client_;
};

MaskdProcess* GrammarServiceTest::server_ = nullptr;

TEST_F(GrammarServiceTest, GbnfSessionsMatchTheEngine) {
  WalkAndCompare(kArithmeticGbnf, v1::Grammar::FORMAT_GBNF, GrammarFormat::kGbnf, 1);
}

// A StepStream of grammar steps (each message runs on the step pool) answers
// in order and as unary Steps do: the stream steps one session, unary Steps
// a twin with the same tokens; every reply matches (mask, count, state). The
// stream's messages also carry a regex session beside the grammar one (the
// whole batch goes to the pool).
TEST_F(GrammarServiceTest, GrammarStepStreamMatchesUnary) {
  auto compiled = client_->Compile(GrammarRequest(kCallsLark, v1::Grammar::FORMAT_LARK));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto streamed = client_->CreateSession(compiled->index_id());
  auto unary = client_->CreateSession(compiled->index_id());
  auto regex = client_->CompileRegex("qwen3", "[a-z]*");
  ASSERT_TRUE(streamed.ok() && unary.ok() && regex.ok());
  auto regex_session = client_->CreateSession(regex->index_id());
  ASSERT_TRUE(regex_session.ok()) << regex_session.status();
  auto stream = client_->OpenStepStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  auto vocab = ::maskd::testing::BundledVocabulary();
  std::mt19937 rng(7);
  std::vector<uint32_t> next;
  int steps = 0;
  for (int step = 0; step < 20; ++step, ++steps) {
    v1::StepRequest sreq, ureq;
    auto* se = sreq.add_entries();
    se->set_session_id(streamed->session_id());
    sreq.add_entries()->set_session_id(regex_session->session_id());
    auto* ue = ureq.add_entries();
    ue->set_session_id(unary->session_id());
    for (uint32_t t : next) {
      se->add_tokens(t);
      ue->add_tokens(t);
    }
    v1::StepResponse sresp, uresp;
    ASSERT_TRUE((*stream)->Step(sreq, &sresp).ok()) << "step " << step;
    ASSERT_TRUE(client_->Step(ureq, &uresp).ok()) << "step " << step;
    ASSERT_EQ(sresp.results_size(), 2);
    ASSERT_EQ(sresp.results(0).status().code(), 0) << sresp.results(0).status().message();
    EXPECT_EQ(sresp.results(1).status().code(), 0) << sresp.results(1).status().message();
    EXPECT_EQ(sresp.results(0).num_tokens(), static_cast<uint64_t>(step == 0 ? 0 : step));
    EXPECT_EQ(sresp.results(0).num_tokens(), uresp.results(0).num_tokens());
    EXPECT_EQ(sresp.results(0).accepting(), uresp.results(0).accepting());
    absl::Span<const uint32_t> srow = MaskRow(sresp, 0), urow = MaskRow(uresp, 0);
    ASSERT_TRUE(std::equal(urow.begin(), urow.end(), srow.begin())) << "step " << step;
    if (uresp.results(0).finished()) break;
    std::vector<uint32_t> allowed = AllowedIds(urow, vocab->size());
    ASSERT_FALSE(allowed.empty());
    uint32_t t = allowed[rng() % allowed.size()];
    if (vocab->is_eos(t) && allowed.size() > 1) t = allowed[0] == t ? allowed[1] : allowed[0];
    next = {t};
  }
  EXPECT_GE(steps, 10);
  EXPECT_TRUE((*stream)->Close().ok());
}

TEST_F(GrammarServiceTest, EbnfSessionsMatchTheEngine) {
  WalkAndCompare(kArithmeticGbnf, v1::Grammar::FORMAT_EBNF, GrammarFormat::kEbnf, 2);
}

TEST_F(GrammarServiceTest, LarkWithIgnoreSessionsMatchTheEngine) {
  WalkAndCompare(kCallsLark, v1::Grammar::FORMAT_LARK, GrammarFormat::kLark, 3);
}

constexpr char kTreeSchema[] = R"({"type":"object","properties":{"name":{"type":"string"},
  "children":{"type":"array","items":{"$ref":"#"}}},"required":["name","children"],
  "additionalProperties":false})";

v1::CompileRequest SchemaRequest(const std::string& schema, v1::SchemaRoute route) {
  v1::CompileRequest req;
  req.set_tokenizer("qwen3");
  req.set_json_schema(schema);
  req.mutable_options()->set_schema_route(route);
  req.set_wait(true);
  return req;
}

TEST_F(GrammarServiceTest, RecursiveSchemaSessionsMatchTheEngine) {
  // SCHEMA_ROUTE_AUTO (the default) takes the grammar route for a recursive $ref.
  WalkAndCompare(SchemaRequest(kTreeSchema, v1::SCHEMA_ROUTE_AUTO),
                 Constraint::JsonSchema(kTreeSchema, ::maskd::testing::BundledTokenizer()), 4);
}

TEST_F(GrammarServiceTest, SchemaRoutesAreReportedAndKeyed) {
  auto automatic = client_->Compile(SchemaRequest(kTreeSchema, v1::SCHEMA_ROUTE_AUTO));
  auto regex = client_->Compile(SchemaRequest(kTreeSchema, v1::SCHEMA_ROUTE_REGEX));
  auto plain = client_->Compile(SchemaRequest(R"({"type":"integer"})", v1::SCHEMA_ROUTE_AUTO));
  auto forced = client_->Compile(SchemaRequest(R"({"type":"integer"})", v1::SCHEMA_ROUTE_GRAMMAR));
  ASSERT_TRUE(automatic.ok() && regex.ok() && plain.ok() && forced.ok());
  EXPECT_EQ(automatic->route(), "grammar");
  EXPECT_EQ(regex->route(), "regex");
  EXPECT_EQ(plain->route(), "regex");
  EXPECT_EQ(forced->route(), "grammar");
  EXPECT_NE(automatic->index_id(), regex->index_id());  // the route is part of the key
  EXPECT_NE(plain->index_id(), forced->index_id());
  auto bad = client_->Compile(SchemaRequest(kTreeSchema, static_cast<v1::SchemaRoute>(7)));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("schema_route 7"));
  // Members in any order: the grammar route, its own cache entry.
  v1::CompileRequest any_order = SchemaRequest(
      R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})", v1::SCHEMA_ROUTE_AUTO);
  auto schema_order = client_->Compile(any_order);
  any_order.mutable_options()->set_any_property_order(true);
  auto any = client_->Compile(any_order);
  ASSERT_TRUE(schema_order.ok() && any.ok()) << any.status();
  EXPECT_EQ(schema_order->route(), "regex");
  EXPECT_EQ(any->route(), "grammar");
  EXPECT_NE(schema_order->index_id(), any->index_id());
  any_order.mutable_options()->set_schema_route(v1::SCHEMA_ROUTE_REGEX);
  auto refused = client_->Compile(any_order);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("any_property_order"));
  // No instance on either route: one clean error.
  auto endless = client_->Compile(SchemaRequest(
      R"({"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]})", v1::SCHEMA_ROUTE_AUTO));
  EXPECT_EQ(endless.status().code(), absl::StatusCode::kInvalidArgument) << endless.status();
  ASSERT_TRUE(client_->Ping().ok());
}

TEST_F(GrammarServiceTest, CacheKeysAndErrors) {
  auto a = client_->Compile(GrammarRequest(kArithmeticGbnf, v1::Grammar::FORMAT_GBNF));
  auto b = client_->Compile(GrammarRequest(kArithmeticGbnf, v1::Grammar::FORMAT_GBNF));
  auto c = client_->Compile(GrammarRequest(kArithmeticGbnf, v1::Grammar::FORMAT_EBNF));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->index_id(), b->index_id());
  EXPECT_TRUE(b->cache_hit());
  EXPECT_NE(a->index_id(), c->index_id());  // the format is part of the key

  auto syntax = client_->Compile(GrammarRequest("root ::= \"a\" |\n  [z-a]\n",
                                                v1::Grammar::FORMAT_GBNF));
  EXPECT_EQ(syntax.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(syntax.status().message(), HasSubstr("line 2, column"));

  auto no_format = client_->Compile(GrammarRequest("root ::= \"a\"\n", v1::Grammar::FORMAT_UNSPECIFIED));
  EXPECT_EQ(no_format.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_format.status().message(), HasSubstr("FORMAT_LARK"));

  std::string big = "root ::= \"a\"\n";
  while (big.size() <= 4096) big += "# padding padding padding padding padding\n";
  auto too_big = client_->Compile(GrammarRequest(big, v1::Grammar::FORMAT_GBNF));
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(too_big.status().message(), HasSubstr("--max-grammar-bytes"));

  // A token budget on a grammar session: the entry's mask is a non-empty
  // subset of the plain one, with the exact distance to an end; the
  // stateless Mask gives the same row.
  auto session = client_->CreateSession(a->index_id());
  ASSERT_TRUE(session.ok());
  v1::StepRequest req;
  auto* e = req.add_entries();
  e->set_session_id(session->session_id());
  e->set_max_tokens_left(2);
  v1::StepResponse resp;
  ASSERT_TRUE(client_->Step(req, &resp).ok());
  EXPECT_EQ(resp.results(0).status().code(), 0);
  EXPECT_GT(resp.results(0).min_bytes_to_finish(), 0u);
  EXPECT_NE(resp.masks(), std::string(resp.masks().size(), '\0'));
  v1::MaskRequest plain;
  plain.set_index_id(a->index_id());
  grpc::ClientContext plain_ctx;
  v1::MaskResponse plain_resp;
  ASSERT_TRUE(client_->stub()->Mask(&plain_ctx, plain, &plain_resp).ok());
  ASSERT_EQ(plain_resp.mask().size(), resp.masks().size());
  for (size_t i = 0; i < plain_resp.mask().size(); ++i) {
    EXPECT_EQ(resp.masks()[i] & ~plain_resp.mask()[i], 0) << "byte " << i;
  }
  EXPECT_EQ(plain_resp.min_bytes_to_finish(), resp.results(0).min_bytes_to_finish());
  v1::MaskRequest mask = plain;
  mask.set_max_tokens_left(2);
  grpc::ClientContext ctx;
  v1::MaskResponse mask_resp;
  ASSERT_TRUE(client_->stub()->Mask(&ctx, mask, &mask_resp).ok());
  EXPECT_EQ(mask_resp.mask(), resp.masks());

  // The server is still serving, and the metrics count grammars apart.
  ASSERT_TRUE(client_->Ping().ok());
  auto metrics = server_->Metrics();
  EXPECT_GE(MetricValue(metrics, "maskd_compile_seconds_count{kind=\"grammar\",result=\"ok\"}"), 2)
      << metrics;
  EXPECT_GE(MetricValue(metrics, "maskd_compile_seconds_count{kind=\"grammar\",result=\"invalid_argument\"}"), 1);
}

}  // namespace
}  // namespace maskd
