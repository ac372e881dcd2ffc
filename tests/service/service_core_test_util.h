// Shared by the unit tests of the gRPC-free service classes
// (tests/service/service_core_*_test.cc): the bundled qwen3 tokenizer, a
// regex CompileSpec on it, and a compile that waits for its index.
#ifndef MASKD_TESTS_SERVICE_SERVICE_CORE_TEST_UTIL_H_
#define MASKD_TESTS_SERVICE_SERVICE_CORE_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "service/index_cache.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"

namespace maskd::service_core_test {

constexpr uint32_t kOne = 16, kTwo = 17, kA = 64;

inline std::shared_ptr<const TokenizerContext> Qwen() {
  static auto* v = new std::shared_ptr<const TokenizerContext>(TokenizerContext::Create(
      *Vocabulary::Load(std::string(MASKD_SOURCE_DIR) + "/data/tokenizers/qwen3")));
  return *v;
}

inline CompileSpec Spec(const std::string& regex, bool eager = false) {
  CompileSpec s;
  s.tokenizer = "qwen3";
  s.constraint = Constraint::Regex(regex, Qwen());
  s.constraint.options.eager = eager;
  return s;
}

// Compiles and waits; the entry's final snapshot, with cache_hit as the
// request found it. An empty IndexInfo (and a test failure) when refused.
inline IndexInfo CompileWait(IndexCache& cache, const CompileSpec& spec) {
  absl::Notification done;
  IndexInfo out;
  auto snap = cache.Compile(spec, [&](const IndexInfo& info) {
    out = info;
    done.Notify();
  });
  EXPECT_TRUE(snap.ok()) << snap.status();
  if (!snap.ok()) return {};
  if (snap->state != IndexState::kCompiling) return *snap;
  done.WaitForNotification();
  out.cache_hit = snap->cache_hit;
  return out;
}

}  // namespace maskd::service_core_test

#endif  // MASKD_TESTS_SERVICE_SERVICE_CORE_TEST_UTIL_H_
