#include "tests/index/test_util.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace maskd::testing {

std::string BundledTokenizerPath() { return std::string(MASKD_SOURCE_DIR) + "/data/tokenizers/qwen3"; }

std::string SharedTokenizerPath(const std::string& name) {
  std::string p = std::string(MASKD_SHARED_DIR) + "/tokenizers/" + name;
  return std::filesystem::exists(p + "/tokenizer.json") ? p : "";
}

const std::vector<std::string>& SharedTokenizerNames() {
  static const auto* names =
      new std::vector<std::string>{"llama2", "llama3", "qwen3", "gemma3", "gptoss"};
  return *names;
}

std::shared_ptr<const TokenizerContext> SharedTokenizer(const std::string& name) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* cache = new std::map<std::string, std::shared_ptr<const TokenizerContext>>();
  absl::MutexLock lock(&mu);
  auto it = cache->find(name);
  if (it != cache->end()) return it->second;
  std::string path = SharedTokenizerPath(name);
  std::shared_ptr<const TokenizerContext> context;
  if (!path.empty()) {
    auto loaded = Vocabulary::Load(path);
    if (!loaded.ok()) {
      std::fprintf(stderr, "loading %s: %s\n", path.c_str(), loaded.status().ToString().c_str());
      std::abort();
    }
    context = TokenizerContext::Create(*std::move(loaded));
  }
  (*cache)[name] = context;
  return context;
}

std::shared_ptr<const Vocabulary> SharedVocabulary(const std::string& name) {
  std::shared_ptr<const TokenizerContext> context = SharedTokenizer(name);
  return context == nullptr ? nullptr : context->shared_vocabulary();
}

std::shared_ptr<const TokenizerContext> BundledTokenizer() {
  static std::shared_ptr<const TokenizerContext> context = [] {
    auto loaded = Vocabulary::Load(BundledTokenizerPath());
    if (!loaded.ok()) {
      std::fprintf(stderr, "loading bundled tokenizer: %s\n", loaded.status().ToString().c_str());
      std::abort();
    }
    return TokenizerContext::Create(*std::move(loaded));
  }();
  return context;
}

std::shared_ptr<const Vocabulary> BundledVocabulary() {
  return BundledTokenizer()->shared_vocabulary();
}

int Scaled(int full, int quick) { return std::getenv("MASKD_TEST_QUICK") != nullptr ? quick : full; }

}  // namespace maskd::testing
