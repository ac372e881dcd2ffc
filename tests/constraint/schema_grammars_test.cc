// SchemaGrammars: a lookup gives the lowering it was handed, once per
// (schema, options, limits); errors are not kept; memory stays within
// max_bytes, the least recently used dropped first.
#include "constraint/schema_grammars.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "constraint/schema_grammar.h"
#include "gtest/gtest.h"

namespace maskd {
namespace {

SchemaGrammars::Lower Lowering(const std::string& schema, const JsonSchemaOptions& options,
                               int* calls) {
  return [&schema, &options, calls]() -> absl::StatusOr<grammar::Grammar> {
    ++*calls;
    return JsonSchemaGrammar(schema, options, grammar::GrammarLimits{}, grammar::TerminalLimits{});
  };
}

TEST(SchemaGrammars, LowersEachSchemaOncePerOptions) {
  SchemaGrammars cache(size_t{1} << 20);
  const std::string schema = R"({"type": "object", "properties": {"a": {"type": "integer"}}})";
  JsonSchemaOptions options;
  int calls = 0;
  auto first = cache.Get(schema, options, {}, Lowering(schema, options, &calls));
  auto second = cache.Get(schema, options, {}, Lowering(schema, options, &calls));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ(calls, 1);
  auto direct = JsonSchemaGrammar(schema, options, {}, {});
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(grammar::ToText(**second), grammar::ToText(*direct));
  // Other options, other limits: lowered again.
  JsonSchemaOptions compact;
  compact.whitespace = JsonWhitespace::kCompact;
  ASSERT_TRUE(cache.Get(schema, compact, {}, Lowering(schema, compact, &calls)).ok());
  grammar::GrammarLimits limits;
  limits.max_rules = 500;
  ASSERT_TRUE(cache.Get(schema, options, limits, Lowering(schema, options, &calls)).ok());
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().entries, 3u);
  // An error is returned and not kept.
  const std::string bad = R"({"type": "nonsense"})";
  EXPECT_FALSE(cache.Get(bad, options, {}, Lowering(bad, options, &calls)).ok());
  EXPECT_FALSE(cache.Get(bad, options, {}, Lowering(bad, options, &calls)).ok());
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(cache.stats().entries, 3u);
}

TEST(SchemaGrammars, StaysWithinMaxBytes) {
  JsonSchemaOptions options;
  auto one = JsonSchemaGrammar(R"({"enum": ["k0"]})", options, {}, {});
  ASSERT_TRUE(one.ok());
  const size_t max_bytes = 3 * (GrammarBytes(*one) + 512);
  SchemaGrammars cache(max_bytes);
  int calls = 0;
  for (int i = 0; i < 30; ++i) {
    const std::string schema = absl::StrCat(R"({"enum": ["k)", i % 10, R"("]})");
    ASSERT_TRUE(cache.Get(schema, options, {}, Lowering(schema, options, &calls)).ok());
    EXPECT_LE(cache.stats().bytes, max_bytes);
  }
  EXPECT_GT(cache.stats().evicted, 0u);
  EXPECT_GE(cache.stats().entries, 1u);
  SchemaGrammars tiny(16);
  ASSERT_TRUE(tiny.Get(R"({"enum": ["k0"]})", options, {}, [&]() -> absl::StatusOr<grammar::Grammar> { return *one; }).ok());
  EXPECT_EQ(tiny.stats().entries, 0u);
}

}  // namespace
}  // namespace maskd
