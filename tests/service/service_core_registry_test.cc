// Unit tests of the gRPC-free service classes, part 1: TokenizerRegistry
// (loading, registration, the per-client share) and the Metrics exposition.
#include <atomic>
#include <bit>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "index/guide.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/index_cache.h"
#include "service/metrics.h"
#include "service/session_table.h"
#include "service/tokenizer_registry.h"
#include "tokenizer/loop_masks.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"
#include "tests/service/service_core_test_util.h"

namespace maskd {
namespace {

using ::testing::HasSubstr;

TEST(TokenizerRegistryTest, LoadDirAndRegister) {
  TokenizerRegistry reg(2, /*loop_mask_bytes=*/12345);
  std::vector<std::string> errors;
  auto names = reg.LoadDir(std::string(MASKD_SOURCE_DIR) + "/data/tokenizers",
                           {{"qwen3", 151936}}, &errors);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(*names, ::testing::Contains("qwen3"));
  EXPECT_TRUE(errors.empty());
  auto q = reg.Get("qwen3");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->vocab().size(), 151936u);  // --vocab-size override: padding ids
  EXPECT_EQ(q->context->loop_masks().max_bytes(), 12345u);  // --loop-mask-bytes
  EXPECT_EQ(reg.Get("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(reg.LoadDir("/nonexistent", {}, &errors).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(TokenizerRegistry::ValidName("a/b"));
  EXPECT_FALSE(TokenizerRegistry::ValidName(""));
  EXPECT_FALSE(TokenizerRegistry::ValidName(".."));
  EXPECT_TRUE(TokenizerRegistry::ValidName("llama-3.1_8B"));
  const std::string json = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []},
      "added_tokens": [], "decoder": {"type": "ByteLevel"}})";
  auto t = reg.Register("tiny", json, "", VocabularyOptions{});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->source, "registered");
  EXPECT_EQ(reg.Register("tiny2", json, "", {}).status().code(),
            absl::StatusCode::kResourceExhausted);  // max 2
  EXPECT_EQ(reg.List().size(), 2u);
}

// Issue #24 finding 3: one client registers at most max_per_client
// tokenizers; the refusal names the share, the flag and the client, comes
// before the document is parsed, and leaves other clients' registrations
// and same-content re-registrations served.
TEST(TokenizerRegistryTest, RegistrationsPerClientShare) {
  TokenizerRegistry reg(/*max_tokenizers=*/10, LoopMasks::kDefaultMaxBytes,
                        /*max_per_client=*/1);
  const std::string json = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []},
      "added_tokens": [], "decoder": {"type": "ByteLevel"}})";
  ASSERT_TRUE(reg.Register("mine", json, "", {}, "conn:1").ok());
  auto refused = reg.Register("more", json, "", {}, "conn:1");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("client conn:1 holds 1 registered tokenizers, its whole share "
                        "(--max-tokenizers-per-client=1"));
  // Refused before parsing: a broken document gets the same answer.
  EXPECT_EQ(reg.Register("broken", "{", "", {}, "conn:1").status().code(),
            absl::StatusCode::kResourceExhausted);
  // The same name and content again charges nothing.
  EXPECT_TRUE(reg.Register("mine", json, "", {}, "conn:1").ok());
  // Another client registers its own.
  auto other = reg.Register("theirs", json, "", {}, "conn:2");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(reg.List().size(), 2u);
}

TEST(MetricsTest, ExpositionNamesAndUnits) {
  Metrics m("1.2.3");
  m.ObserveStep(25e-6, 64);
  m.ObserveStep(1e-3, 1);
  m.TokensAdvanced(65);
  m.RpcError("Step", 8);
  m.StepEntryError(5);
  m.ObserveCompile(0.01, "regex", "ok");
  m.SetCacheBytes(1234);
  std::string text = m.Serialize();
  EXPECT_THAT(text, HasSubstr("maskd_build_info{version=\"1.2.3\"} 1"));
  EXPECT_THAT(text, HasSubstr("maskd_step_seconds_count 2"));
  EXPECT_THAT(text, HasSubstr("maskd_step_seconds_bucket{le=\"5e-05\"} 1"));
  EXPECT_THAT(text, HasSubstr("maskd_step_batch_size_sum 65"));
  EXPECT_THAT(text, HasSubstr("maskd_tokens_advanced_total 65"));
  EXPECT_THAT(text, HasSubstr("maskd_rpc_errors_total{code=\"RESOURCE_EXHAUSTED\",method=\"Step\"} 1"));
  EXPECT_THAT(text, HasSubstr("maskd_step_entry_errors_total{code=\"NOT_FOUND\"} 1"));
  EXPECT_THAT(text, HasSubstr("maskd_index_cache_bytes 1234"));
  EXPECT_EQ(StatusCodeName(16), "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(99), "UNKNOWN");
}

}  // namespace
}  // namespace maskd
