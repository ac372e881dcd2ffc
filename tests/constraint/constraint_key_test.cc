// Constraint::CacheKey(): equal for equal constraints, different when any one
// field differs (every field: ConstraintVariants), blind to what the compiler
// owns (the schema budget's deadline and cancel flag).
#include "constraint/constraint.h"

#include <atomic>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/constraint/constraint_variants.h"
#include "tests/index/test_util.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"

namespace maskd {
namespace {

using ::maskd::testing::BundledTokenizer;
using ::maskd::testing::ConstraintVariants;
using ::maskd::testing::VariantBase;

// A vocabulary of two tokens ("a", "b"): content unlike the bundled one's.
std::shared_ptr<const TokenizerContext> TinyTokenizer() {
  auto vocab = Vocabulary::FromJson(
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []},
          "added_tokens": [], "decoder": {"type": "ByteLevel"}})",
      "", VocabularyOptions{}, "tiny");
  EXPECT_TRUE(vocab.ok()) << vocab.status();
  return TokenizerContext::Create(*std::move(vocab));
}

TEST(ConstraintKey, EqualConstraintsShareAKey) {
  const Constraint a = VariantBase(BundledTokenizer());
  const Constraint b = VariantBase(BundledTokenizer());
  EXPECT_EQ(a.CacheKey(), b.CacheKey());
  EXPECT_TRUE(a == b);
  EXPECT_THAT(a.CacheKey(), ::testing::MatchesRegex("[0-9a-f]{32}"));
  // The tokenizer counts by content: another context over an equal
  // vocabulary is the same tokenizer.
  Constraint c = a;
  c.tokenizer = TokenizerContext::Create(BundledTokenizer()->shared_vocabulary());
  ASSERT_NE(c.tokenizer, a.tokenizer);
  EXPECT_EQ(c.CacheKey(), a.CacheKey());
}

TEST(ConstraintKey, EveryFieldIsPartOfTheKey) {
  const auto variants = ConstraintVariants(TinyTokenizer());
  // One variant per field: a field added to Constraint, ConstraintOptions or
  // JsonSchemaOptions changes this count until a variant of it is added.
  ASSERT_EQ(variants.size(), testing::kExpectedVariants);
  absl::flat_hash_map<std::string, std::string> seen;  // key -> field
  for (const auto& v : variants) {
    SCOPED_TRACE(v.field);
    Constraint before = VariantBase(BundledTokenizer());
    if (v.prepare) v.prepare(before);
    Constraint after = before;
    v.change(after);
    EXPECT_NE(before.CacheKey(), after.CacheKey());
    EXPECT_FALSE(before == after);
    // No two changes give one key either.
    auto [it, inserted] = seen.emplace(after.CacheKey(), v.field);
    EXPECT_TRUE(inserted) << "same key as " << it->second;
  }
}

TEST(ConstraintKey, TheCompilersBudgetIsNotPartOfTheKey) {
  const Constraint a = VariantBase(BundledTokenizer());
  Constraint b = a;
  std::atomic<bool> cancel{false};
  b.options.json_schema.budget.deadline = absl::Now() + absl::Seconds(1);
  b.options.json_schema.budget.cancel = &cancel;
  EXPECT_EQ(a.CacheKey(), b.CacheKey());
}

}  // namespace
}  // namespace maskd
