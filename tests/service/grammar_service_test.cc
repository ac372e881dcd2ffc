// Grammars through the real maskd binary: Compile with a grammar, sessions
// that Step, roll back and fork, the stateless Mask, limits and errors. Every
// mask the server returns is compared with an in-process GrammarGuide on the
// same (bundled) tokenizer, a separate compilation of the same grammar.
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

namespace maskd {
namespace {

using ::maskd::testing::MaskdProcess;
using ::maskd::testing::MetricValue;
using ::maskd::testing::SessionTokens;
using ::maskd::testing::WaitForAnyMetric;
using ::testing::HasSubstr;

// Mask tokens ("a") after which a mask of kSelfConcatLark takes minutes.
constexpr int kAbandonedTokens = 200;

constexpr char kArithmeticGbnf[] = R"g(root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")"
)g";

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

v1::CompileRequest GrammarRequest(const std::string& text, v1::Grammar::Format format) {
  v1::CompileRequest req;
  req.set_tokenizer("qwen3");
  req.mutable_grammar()->set_text(text);
  req.mutable_grammar()->set_format(format);
  req.set_wait(true);
  return req;
}

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
    EXPECT_GT(compiled->dfa_states(), 0u);
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

// An ambiguous grammar whose Earley sets grow with the text, on a server with
// a small per-set limit: the step that passes it fails with
// RESOURCE_EXHAUSTED naming the limit, the session stays where it was, and
// the server keeps serving.
TEST(GrammarServiceLimits, ParserLimitRefusesTheStepNotTheServer) {
  MaskdProcess server({"--max-grammar-set-items=64"});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto client = server.Connect();
  auto compiled = client->Compile(
      GrammarRequest("root ::= root root | \"a\"\n", v1::Grammar::FORMAT_GBNF));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto session = client->CreateSession(compiled->index_id());
  ASSERT_TRUE(session.ok()) << session.status();
  constexpr uint32_t kA = 64;  // "a" in Qwen3
  ASSERT_EQ(*client->Detokenize("qwen3", std::vector<uint32_t>{kA}), "a");
  uint64_t accepted = 0;
  bool refused = false;
  for (int i = 0; i < 200 && !refused; ++i) {
    v1::StepRequest req;
    auto* e = req.add_entries();
    e->set_session_id(session->session_id());
    e->add_tokens(kA);
    v1::StepResponse resp;
    ASSERT_TRUE(client->Step(req, &resp).ok());
    const auto& r = resp.results(0);
    if (r.status().code() == 0) {
      accepted = r.num_tokens();
      continue;
    }
    refused = true;
    EXPECT_EQ(r.status().code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
    EXPECT_THAT(r.status().message(), HasSubstr("max_items_per_position"));
    EXPECT_EQ(r.num_tokens(), accepted);
  }
  ASSERT_TRUE(refused) << "200 tokens without reaching 64 items in a set";
  EXPECT_GT(accepted, 3u);
  // The session is usable where it stopped: a rollback and a step from there.
  v1::StepRequest req;
  auto* e = req.add_entries();
  e->set_session_id(session->session_id());
  e->set_rollback(2);
  v1::StepResponse resp;
  ASSERT_TRUE(client->Step(req, &resp).ok());
  EXPECT_EQ(resp.results(0).status().code(), 0) << resp.results(0).status().message();
  EXPECT_EQ(resp.results(0).num_tokens(), accepted - 2);
  EXPECT_TRUE(client->Ping().ok());
}

// Issue #24 (1): an ambiguous Lark grammar of one self-concatenating rule
// over any byte costs seconds of CPU per mask (millions of parser steps in
// one Earley set; --max-grammar-mask-work counts sets and never trips).
constexpr char kSelfConcatLark[] = "start: start start | /./\n";
constexpr uint32_t kTokenA = 64;  // "a" in Qwen3

// --max-grammar-parser-steps bounds each mask and advance: the step whose
// mask passes it fails with RESOURCE_EXHAUSTED naming the limit, the session
// unchanged and usable; so does a Mask call; the server keeps serving.
TEST(GrammarServiceLimits, ParserStepLimitRefusesTheMaskNotTheSession) {
  // A mask after one "a" takes 15.7 million steps, after six 29.7 million.
  MaskdProcess server({"--max-grammar-parser-steps=22000000"});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto client = server.Connect();
  auto compiled = client->Compile(GrammarRequest(kSelfConcatLark, v1::Grammar::FORMAT_LARK));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto session = client->CreateSession(compiled->index_id());
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_EQ(*client->Detokenize("qwen3", std::vector<uint32_t>{kTokenA}), "a");
  auto step = [&](std::vector<uint32_t> tokens) {
    v1::StepRequest req;
    auto* e = req.add_entries();
    e->set_session_id(session->session_id());
    for (uint32_t t : tokens) e->add_tokens(t);
    v1::StepResponse resp;
    EXPECT_TRUE(client->Step(req, &resp).ok());
    return resp.results(0);
  };
  const std::vector<uint32_t> six(6, kTokenA);
  auto refused = step(six);
  EXPECT_EQ(refused.status().code(), static_cast<int>(absl::StatusCode::kResourceExhausted))
      << refused.status().message();
  EXPECT_THAT(refused.status().message(), HasSubstr("max_parser_steps"));
  EXPECT_EQ(refused.num_tokens(), 0u);
  auto one = step({kTokenA});  // a cheap mask: the session is usable
  EXPECT_EQ(one.status().code(), 0) << one.status().message();
  EXPECT_EQ(one.num_tokens(), 1u);

  v1::MaskRequest mask;
  mask.set_index_id(compiled->index_id());
  for (uint32_t t : six) mask.add_tokens(t);
  grpc::ClientContext ctx;
  v1::MaskResponse mask_resp;
  grpc::Status s = client->stub()->Mask(&ctx, mask, &mask_resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("max_parser_steps"));
  EXPECT_TRUE(client->Ping().ok());
}

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
  std::thread thread;

  void Start(Client* client, uint64_t session_id, bool stream, std::atomic<int>* answered) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
    thread = std::thread([this, client, session_id, stream, answered] {
      const v1::StepRequest req = SlowStep(session_id);
      v1::StepResponse resp;
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
  for (int i = 0; i < kSlow; ++i) {
    hostile.push_back(server.Connect("hostile-" + std::to_string(i)));
    auto s =
        hostile.back()->CreateSession(GrammarRequest(kSelfConcatLark, v1::Grammar::FORMAT_LARK));
    ASSERT_TRUE(s.ok()) << s.status();
    slow_sessions.push_back(s->session_id());
  }
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

// All grammar sessions' charts together within --max-grammar-chart-bytes: the
// step past it fails (session unchanged), a fork that would pass it too, and
// closing a session gives its bytes back.
TEST(GrammarServiceLimits, ChartBudgetIsSharedBySessions) {
  MaskdProcess server({"--max-grammar-chart-bytes=6000"});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto client = server.Connect();
  auto compiled = client->Compile(GrammarRequest("root ::= \"x\" [a-z]*\n", v1::Grammar::FORMAT_GBNF));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  constexpr uint32_t kA = 64, kX = 87;  // "a", "x" in Qwen3
  ASSERT_EQ(*client->Detokenize("qwen3", std::vector<uint32_t>{kX}), "x");
  auto step = [&](uint64_t id, std::vector<uint32_t> tokens) {
    v1::StepRequest req;
    auto* e = req.add_entries();
    e->set_session_id(id);
    for (uint32_t t : tokens) e->add_tokens(t);
    v1::StepResponse resp;
    EXPECT_TRUE(client->Step(req, &resp).ok());
    return resp.results(0);
  };
  auto first = client->CreateSession(compiled->index_id());
  ASSERT_TRUE(first.ok());
  const uint64_t a = first->session_id();
  ASSERT_EQ(step(a, {kX}).status().code(), 0);
  uint64_t accepted = 1;
  bool refused = false;
  for (int i = 0; i < 2000 && !refused; ++i) {
    auto r = step(a, {kA});
    if (r.status().code() == 0) {
      accepted = r.num_tokens();
      continue;
    }
    refused = true;
    EXPECT_EQ(r.status().code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
    EXPECT_THAT(r.status().message(), HasSubstr("--max-grammar-chart-bytes"));
    EXPECT_EQ(r.num_tokens(), accepted);
  }
  ASSERT_TRUE(refused);
  EXPECT_GT(accepted, 10u);
  // Full: a fork of it does not fit, a new session at the start neither
  // needs much nor gets refused until its own chart grows.
  EXPECT_EQ(client->ForkSession(a).status().code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(client->Rollback(a, accepted - 2).ok());  // gives bytes back
  auto fork = client->ForkSession(a);
  EXPECT_TRUE(fork.ok()) << fork.status();
  EXPECT_TRUE(client->CloseSession(a).ok());
  EXPECT_TRUE(client->Ping().ok());
}

// Issue #24: sessions on a grammar whose chart grows quadratically, each
// stepped until the chart budget refuses, then rolled back to the start and
// left open. The server's resident memory must follow what is charged: at
// most twice the budget over the start, and back under it once all are
// rolled back. (Charging 12 bytes per live item and keeping what a rollback
// left: 6 sessions here held about 15 times the budget.) Under
// AddressSanitizer freed memory sits in its quarantine: RSS is not asserted.
TEST(GrammarServiceLimits, RolledBackSessionsGiveTheirChartMemoryBack) {
#if defined(__SANITIZE_ADDRESS__)
  constexpr bool kRssMeaningful = false;
#else
  constexpr bool kRssMeaningful = true;
#endif
  constexpr uint64_t kBudget = 8 << 20;
  MaskdProcess server({"--max-grammar-chart-bytes=" + std::to_string(kBudget)});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto client = server.Connect();
  // Not regular, so it stays a grammar; n bytes of "a" make O(n^2) items.
  auto compiled = client->Compile(
      GrammarRequest("root ::= s\ns ::= \"a\" s \"b\" | \"a\" s | \"a\"\n", v1::Grammar::FORMAT_GBNF));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  constexpr uint32_t kA = 64;  // "a" in Qwen3
  ASSERT_EQ(*client->Detokenize("qwen3", std::vector<uint32_t>{kA}), "a");
  auto rss = [&] {
    auto st = client->Stats();
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? st->rss_bytes() : 0;
  };
  const uint64_t base = rss();
  uint64_t peak = base;
  for (int session = 0; session < 6; ++session) {
    auto created = client->CreateSession(compiled->index_id());
    ASSERT_TRUE(created.ok()) << created.status();
    const uint64_t id = created->session_id();
    v1::StepRequest req;
    auto* e = req.add_entries();
    e->set_session_id(id);
    for (int i = 0; i < 20; ++i) e->add_tokens(kA);
    uint64_t accepted = 0;
    bool refused = false;
    for (int step = 0; step < 1000 && !refused; ++step) {
      v1::StepResponse resp;
      ASSERT_TRUE(client->Step(req, &resp).ok());
      if (resp.results(0).status().code() == 0) {
        accepted = resp.results(0).num_tokens();
        continue;
      }
      refused = true;
      EXPECT_THAT(resp.results(0).status().message(), HasSubstr("--max-grammar-chart-bytes"));
    }
    ASSERT_TRUE(refused) << "session " << session;
    EXPECT_GT(accepted, 200u);
    peak = std::max(peak, rss());
    ASSERT_TRUE(client->Rollback(id, static_cast<uint32_t>(accepted)).ok());
  }
  const uint64_t end = rss();
  std::printf("budget %llu MiB: server RSS +%lld MiB at the peaks, +%lld MiB after the rollbacks\n",
              static_cast<unsigned long long>(kBudget >> 20),
              static_cast<long long>((static_cast<int64_t>(peak) - static_cast<int64_t>(base)) >> 20),
              static_cast<long long>((static_cast<int64_t>(end) - static_cast<int64_t>(base)) >> 20));
  if (kRssMeaningful) {
    EXPECT_LE(peak, base + 2 * kBudget);
    EXPECT_LE(end, base + kBudget);
  }
}

}  // namespace
}  // namespace maskd
