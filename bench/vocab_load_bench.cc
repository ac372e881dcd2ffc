// Vocabulary::Load and TokenizerContext::Create (trie, loop-mask byte index)
// on the shared tokenizers (and the bundled .gz one): the work every maskd
// start does per tokenizer. Arguments index kTokenizers; a tokenizer that
// is absent (no ../shared) reports an error instead of a time.
//   build/bin/vocab_load_bench --benchmark_min_time=2
#include <filesystem>
#include <string>

#include "benchmark/benchmark.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"

namespace {

struct Tokenizer {
  const char* name;
  std::string path;
};

const Tokenizer kTokenizers[] = {
    {"llama2", std::string(MASKD_SHARED_DIR) + "/tokenizers/llama2"},
    {"llama3", std::string(MASKD_SHARED_DIR) + "/tokenizers/llama3"},
    {"qwen3", std::string(MASKD_SHARED_DIR) + "/tokenizers/qwen3"},
    {"gemma3", std::string(MASKD_SHARED_DIR) + "/tokenizers/gemma3"},
    {"gptoss", std::string(MASKD_SHARED_DIR) + "/tokenizers/gptoss"},
    {"qwen3_bundled_gz", std::string(MASKD_SOURCE_DIR) + "/data/tokenizers/qwen3"},
};

void BM_VocabLoad(benchmark::State& state) {
  const Tokenizer& t = kTokenizers[state.range(0)];
  state.SetLabel(t.name);
  if (!std::filesystem::exists(t.path)) {
    state.SkipWithError((t.path + " is absent").c_str());
    return;
  }
  uint32_t tokens = 0;
  for (auto _ : state) {
    auto v = maskd::Vocabulary::Load(t.path);
    if (!v.ok()) {
      state.SkipWithError(std::string(v.status().message()).c_str());
      return;
    }
    auto context = maskd::TokenizerContext::Create(*std::move(v));
    tokens = context->vocabulary().num_tokens();
    benchmark::DoNotOptimize(context);
  }
  state.counters["tokens"] = tokens;
}
BENCHMARK(BM_VocabLoad)->DenseRange(0, 5)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
