// ConstraintFromRequest (the one place a CompileRequest becomes a Constraint)
// and the IndexCache keyed on it: every CompileOptions field that chooses the
// index is part of the key, found by reflection over the message so that a
// field added later and not read fails here; every field of the Constraint
// gets its own cache entry and index; identical requests share one.
#include "service/constraint_request.h"

#include <memory>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "gtest/gtest.h"
#include "service/index_cache.h"
#include "service/tokenizer_registry.h"
#include "tests/constraint/constraint_variants.h"
#include "tests/service/service_core_test_util.h"

namespace maskd {
namespace {

using ::google::protobuf::FieldDescriptor;
using ::testing::HasSubstr;

constexpr char kSchema[] = R"({"type":"object","properties":{"a":{"type":"integer"}}})";
constexpr char kTinyTokenizer[] = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1},
    "merges": []}, "added_tokens": [], "decoder": {"type": "ByteLevel"}})";

// qwen3 (bundled), and "tiny" and "tiny-too": two names of one two-token vocabulary.
const TokenizerRegistry& Tokenizers() {
  static const TokenizerRegistry* registry = [] {
    auto* r = new TokenizerRegistry();
    std::vector<std::string> errors;
    auto loaded = r->LoadDir(std::string(MASKD_SOURCE_DIR) + "/data/tokenizers", {}, &errors);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_TRUE(r->Register("tiny", kTinyTokenizer, "", {}).ok());
    EXPECT_TRUE(r->Register("tiny-too", kTinyTokenizer, "", {}).ok());
    return r;
  }();
  return *registry;
}

v1::CompileRequest SchemaRequest() {
  v1::CompileRequest req;
  req.set_tokenizer("qwen3");
  req.set_json_schema(kSchema);
  return req;
}

absl::StatusOr<Constraint> Convert(const v1::CompileRequest& req) {
  return ConstraintFromRequest(req, Tokenizers(), RequestTextLimits());
}

std::string KeyOf(const v1::CompileRequest& req) {
  auto c = Convert(req);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? c->CacheKey() : "";
}

// Sets `field` of `m` to a value other than its default (an enum's second
// value). False for a type this test does not know: teach it.
bool SetNonDefault(google::protobuf::Message* m, const FieldDescriptor* field) {
  const auto* r = m->GetReflection();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_BOOL: r->SetBool(m, field, true); return true;
    case FieldDescriptor::CPPTYPE_UINT32: r->SetUInt32(m, field, 1); return true;
    case FieldDescriptor::CPPTYPE_INT32: r->SetInt32(m, field, 1); return true;
    case FieldDescriptor::CPPTYPE_UINT64: r->SetUInt64(m, field, 1); return true;
    case FieldDescriptor::CPPTYPE_INT64: r->SetInt64(m, field, 1); return true;
    case FieldDescriptor::CPPTYPE_STRING: r->SetString(m, field, "x"); return true;
    case FieldDescriptor::CPPTYPE_ENUM:
      r->SetEnum(m, field, field->enum_type()->value(1));
      return true;
    default: return false;
  }
}

TEST(ConstraintFromRequest, EveryCompileOptionIsPartOfTheKey) {
  const std::string base = KeyOf(SchemaRequest());
  const auto* options = v1::CompileOptions::descriptor();
  ASSERT_GE(options->field_count(), 4);
  for (int i = 0; i < options->field_count(); ++i) {
    const FieldDescriptor* field = options->field(i);
    SCOPED_TRACE(field->name());
    v1::CompileRequest req = SchemaRequest();
    ASSERT_TRUE(SetNonDefault(req.mutable_options(), field));
    if (field->name() == "timeout_ms") {
      // How long to wait, not what to compile (docs/api.md).
      EXPECT_EQ(KeyOf(req), base);
    } else {
      EXPECT_NE(KeyOf(req), base);
    }
  }
}

// Two requests that differ only in eager_dfa name two cache entries (whole
// DFAs and lazy ones), for a regex and for a grammar, whose terminals' DFAs
// it builds whole (grammar::TerminalMode).
TEST(ConstraintFromRequest, EagerDfaIsPartOfTheKey) {
  v1::CompileRequest regex;
  regex.set_tokenizer("tiny");
  regex.set_regex("a+b{0,40}");
  v1::CompileRequest lark;
  lark.set_tokenizer("tiny");
  lark.mutable_grammar()->set_text("start: /a+b{0,40}/");
  lark.mutable_grammar()->set_format(v1::Grammar::FORMAT_LARK);
  for (const v1::CompileRequest& lazy : {regex, lark}) {
    v1::CompileRequest whole = lazy;
    whole.mutable_options()->set_eager_dfa(true);
    EXPECT_NE(KeyOf(lazy), KeyOf(whole));
    auto c = Convert(whole);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(c->options.eager_dfa);
    auto l = Convert(lazy);
    ASSERT_TRUE(l.ok()) << l.status();
    EXPECT_FALSE(l->options.eager_dfa);
  }
}

TEST(ConstraintFromRequest, KindFormatAndVocabularyArePartOfTheKey) {
  v1::CompileRequest regex;
  regex.set_tokenizer("tiny");
  regex.set_regex("a+");
  v1::CompileRequest lark;
  lark.set_tokenizer("tiny");
  lark.mutable_grammar()->set_text("a+");
  lark.mutable_grammar()->set_format(v1::Grammar::FORMAT_LARK);
  v1::CompileRequest gbnf = lark;
  gbnf.mutable_grammar()->set_format(v1::Grammar::FORMAT_GBNF);
  EXPECT_NE(KeyOf(regex), KeyOf(lark));
  EXPECT_NE(KeyOf(lark), KeyOf(gbnf));
  v1::CompileRequest qwen = regex;
  qwen.set_tokenizer("qwen3");
  EXPECT_NE(KeyOf(regex), KeyOf(qwen));
  // Two names of one vocabulary are one tokenizer.
  v1::CompileRequest other_name = regex;
  other_name.set_tokenizer("tiny-too");
  EXPECT_EQ(KeyOf(regex), KeyOf(other_name));
}

TEST(ConstraintFromRequest, OptionsThatDoNotApplyKeepTheirDefaults) {
  v1::CompileRequest regex;
  regex.set_tokenizer("tiny");
  regex.set_regex("a+");
  v1::CompileRequest routed = regex;
  routed.mutable_options()->set_schema_route(v1::SCHEMA_ROUTE_GRAMMAR);
  routed.mutable_options()->set_any_property_order(true);
  EXPECT_EQ(KeyOf(regex), KeyOf(routed));
  auto c = Convert(routed);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->options.schema_route, SchemaRoute::kAuto);
  EXPECT_FALSE(c->options.json_schema.any_property_order);
}

TEST(ConstraintFromRequest, ErrorsNameTheProblem) {
  v1::CompileRequest none;
  none.set_tokenizer("qwen3");
  EXPECT_THAT(Convert(none).status().message(), HasSubstr("no constraint"));
  v1::CompileRequest big = SchemaRequest();
  big.set_json_schema(std::string(100, ' '));
  auto over = ConstraintFromRequest(big, Tokenizers(), {.max_constraint_bytes = 99});
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(), HasSubstr("--max-regex-bytes"));
  // A structural tag (a tool list) has its own bound, not --max-regex-bytes.
  v1::CompileRequest tools;
  tools.set_tokenizer("qwen3");
  tools.set_structural_tag(std::string(100, ' '));
  EXPECT_TRUE(ConstraintFromRequest(tools, Tokenizers(), {.max_constraint_bytes = 99}).ok());
  auto long_list = ConstraintFromRequest(
      tools, Tokenizers(), {.max_constraint_bytes = 1000, .max_structural_tag_bytes = 99});
  EXPECT_EQ(long_list.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(long_list.status().message(), HasSubstr("--max-structural-tag-bytes"));
  v1::CompileRequest unknown = SchemaRequest();
  unknown.set_tokenizer("nope");
  EXPECT_EQ(Convert(unknown).status().code(), absl::StatusCode::kNotFound);
  v1::CompileRequest format;
  format.set_tokenizer("qwen3");
  format.mutable_grammar()->set_format(static_cast<v1::Grammar::Format>(9));
  EXPECT_THAT(Convert(format).status().message(), HasSubstr("grammar.format 9"));
  v1::CompileRequest whitespace = SchemaRequest();
  whitespace.mutable_options()->set_json_whitespace(static_cast<v1::JsonWhitespace>(7));
  EXPECT_THAT(Convert(whitespace).status().message(), HasSubstr("options.json_whitespace 7"));
}

TEST(ConstraintFromRequest, JsonWhitespaceReachesTheConverter) {
  const ConstraintCompiler compiler;
  for (auto [whitespace, spaced, compact] :
       {std::tuple{v1::JSON_WHITESPACE_PYTHON, true, false},
        std::tuple{v1::JSON_WHITESPACE_COMPACT, false, true},
        std::tuple{v1::JSON_WHITESPACE_FLEXIBLE, true, true}}) {
    SCOPED_TRACE(v1::JsonWhitespace_Name(whitespace));
    v1::CompileRequest req = SchemaRequest();
    req.mutable_options()->set_json_whitespace(whitespace);
    auto c = Convert(req);
    ASSERT_TRUE(c.ok()) << c.status();
    auto compiled = compiler.Compile(*c);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    const Dfa& dfa = compiled->index->token_index()->dfa();
    EXPECT_EQ(dfa.Matches(R"({"a": 1})"), spaced);
    EXPECT_EQ(dfa.Matches(R"({"a":1})"), compact);
  }
}

// Compiles `c` in `cache` and waits.
IndexInfo CompileWait(IndexCache& cache, const Constraint& c) {
  CompileSpec spec;
  spec.constraint = c;
  spec.tokenizer = "test";
  return service_core_test::CompileWait(cache, spec);
}

TEST(IndexCacheKey, EveryFieldGetsItsOwnIndexAndEqualOnesShareOne) {
  auto qwen = Tokenizers().Get("qwen3");
  auto tiny = Tokenizers().Get("tiny");
  ASSERT_TRUE(qwen.ok() && tiny.ok());
  IndexCache cache({}, nullptr);
  const Constraint base = testing::VariantBase(qwen->context);
  const IndexInfo first = CompileWait(cache, base);
  ASSERT_EQ(first.state, IndexState::kReady) << first.status;
  EXPECT_FALSE(first.cache_hit);
  const IndexInfo again = CompileWait(cache, testing::VariantBase(qwen->context));
  EXPECT_TRUE(again.cache_hit);
  EXPECT_EQ(again.id, first.id);
  EXPECT_EQ(again.index, first.index);  // one index

  const auto variants = testing::ConstraintVariants(tiny->context);
  ASSERT_EQ(variants.size(), testing::kExpectedVariants);
  size_t both_ready = 0;
  for (const auto& v : variants) {
    SCOPED_TRACE(v.field);
    Constraint before = base;
    if (v.prepare) v.prepare(before);
    Constraint after = before;
    v.change(after);
    const IndexInfo b = CompileWait(cache, before);
    const IndexInfo a = CompileWait(cache, after);
    EXPECT_NE(a.id, b.id);
    EXPECT_FALSE(a.cache_hit);  // compiled on its own
    if (a.state == IndexState::kReady && b.state == IndexState::kReady) {
      EXPECT_NE(a.index, b.index);
      ++both_ready;
    }
  }
  // Only the changed kind fails to compile (the schema is no structural tag).
  EXPECT_EQ(both_ready, variants.size() - 1);
}

}  // namespace
}  // namespace maskd
