// Core engine benchmarks over ../shared/corpora/bench-regexes.json x the
// tokenizers llama3, qwen3, gemma3 (from ../shared/tokenizers):
//
//   CompileFirstMaskWarmMemo  regex -> first mask, the vocabulary's loop memo
//                             (tokenizer/loop_masks.h) warm from earlier iterations:
//                             what a repeated constraint pays in a long process.
//   CompileFirstMaskColdMemo  the same with the memo emptied before every
//                             iteration (untimed): what a new constraint pays
//                             on a fresh vocabulary, as in a new process.
//   CompileFirstMaskFreshVocab  the same on a vocabulary loaded for each
//                             iteration (untimed; 10 iterations): the check
//                             that emptying the memo stands for a new load.
//   FirstVisitWriteMask       a fresh lazy index and an empty memo per iteration
//                             (untimed), then the mask of every step of a fixed
//                             seeded walk: every first visit of the walk timed.
//   CompileReady, CompileReady2T  eager build of every reachable state.
//   WriteMaskReady            a ready (eagerly computed) state's mask, cycling
//                             over walked states; Memcpy the same bytes.
//   NextState, GuideAdvance   one token advanced (DFA walk of its bytes).
//   DfaFromPattern, DfaBaselineParse, DfaBaselineMemcpy  DFA construction.
//   FirstStringMask           a JSON string state's first mask, shared loops
//                             or a whole-trie walk.
//
//   build/bin/index_bench [--benchmark_filter=...]
//
// bench/tables/index_bench.py and bench/tables/dfa_construction.py turn its
// JSON output into the tables of docs/benchmarks.md.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "automaton/dfa.h"
#include "automaton/regex.h"
#include "benchmark/benchmark.h"
#include "constraint/constraint_compiler.h"
#include "index/guide.h"
#include "index/random_walk.h"
#include "index/token_index.h"
#include "tokenizer/loop_masks.h"
#include "tokenizer/tokenizer_context.h"

namespace maskd {
namespace {

std::map<std::string, std::string> BenchRegexes() {
  std::ifstream in(std::string(MASKD_SHARED_DIR) + "/corpora/bench-regexes.json");
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, false);
  std::map<std::string, std::string> out;
  if (j.is_discarded()) return out;
  for (auto& [name, re] : j["regexes"].items()) out[name] = re.get<std::string>();
  return out;
}

std::shared_ptr<const TokenizerContext> LoadShared(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const TokenizerContext>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  auto v = Vocabulary::Load(std::string(MASKD_SHARED_DIR) + "/tokenizers/" + name);
  if (!v.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), v.status().ToString().c_str());
    std::exit(1);
  }
  return cache[name] = TokenizerContext::Create(*std::move(v));
}

// A regex's index through the compile path the service takes
// (constraint/constraint_compiler.h); eager: on `threads` threads.
absl::StatusOr<std::shared_ptr<const TokenIndex>> CompileIndex(
    const std::string& regex, std::shared_ptr<const TokenizerContext> context, bool eager = false,
    int threads = 1) {
  Constraint constraint = Constraint::Regex(regex, std::move(context));
  constraint.options.eager = eager;
  CompileLimits limits;
  limits.precompute_threads = threads;
  auto compiled = ConstraintCompiler(std::move(limits)).Compile(constraint);
  if (!compiled.ok()) return compiled.status();
  return compiled->index->token_index();
}

// The timed part of the CompileFirstMask benchmarks: regex -> index -> the
// start state's mask into `mask`, the index kept in `*index` (destroyed by the
// caller outside the timed region). False (the benchmark skipped) on error.
bool TimedFirstMask(benchmark::State& state, const std::string& regex,
                    std::shared_ptr<const TokenizerContext> context,
                    std::shared_ptr<const TokenIndex>* index, std::vector<uint32_t>* mask) {
  auto compiled = CompileIndex(regex, std::move(context));
  if (!compiled.ok()) {
    state.SkipWithError(std::string(compiled.status().message()).c_str());
    return false;
  }
  *index = *std::move(compiled);
  (void)(*index)->WriteMask((*index)->start(), mask->data());
  benchmark::DoNotOptimize(mask->data());
  return true;
}

// Regex -> first mask. `cold_memo`: the vocabulary's loop memo is emptied
// before each iteration, outside the timed region, and the previous index is
// destroyed there too (loops handed out point into the memo). Counters: the
// memo's hits and misses per iteration (tokenizer/loop_masks.h), which show
// whether the memo was warm.
void CompileFirstMask(benchmark::State& state, std::string tokenizer, std::string regex,
                      bool cold_memo) {
  auto context = LoadShared(tokenizer);
  LoopMasks& memo = context->loop_masks();
  std::vector<uint32_t> mask((context->vocabulary().size() + 31) / 32);
  std::shared_ptr<const TokenIndex> index;
  if (!cold_memo) {  // warm the memo with this very regex, untimed
    auto warm = CompileIndex(regex, context);
    if (warm.ok()) (void)(*warm)->WriteMask((*warm)->start(), mask.data());  // untimed warm-up
  }
  uint64_t hits = 0, misses = 0;
  const LoopMasks::Stats before = memo.stats();
  for (auto _ : state) {
    if (cold_memo) {
      state.PauseTiming();
      index.reset();
      const LoopMasks::Stats last = memo.stats();
      hits += last.hits;
      misses += last.misses;
      memo.Clear();
      state.ResumeTiming();
    }
    if (!TimedFirstMask(state, regex, context, &index, &mask)) return;
  }
  const LoopMasks::Stats after = memo.stats();
  if (cold_memo) {
    hits += after.hits;
    misses += after.misses;
  } else {
    hits = after.hits - before.hits;
    misses = after.misses - before.misses;
  }
  const double n = static_cast<double>(std::max<benchmark::IterationCount>(1, state.iterations()));
  state.counters["memo_hits"] = static_cast<double>(hits) / n;
  state.counters["memo_misses"] = static_cast<double>(misses) / n;
}

// Regex -> first mask on a Vocabulary loaded (and its TokenizerContext built)
// for this iteration alone (untimed): nothing of the vocabulary (memo, trie
// pages) was used before.
// Loading costs 10-200 ms, so this runs a fixed, small number of iterations;
// it checks that CompileFirstMaskColdMemo (Clear() instead of a new load)
// measures the same thing.
void CompileFirstMaskFreshVocab(benchmark::State& state, std::string tokenizer, std::string regex) {
  const std::string path = std::string(MASKD_SHARED_DIR) + "/tokenizers/" + tokenizer;
  std::shared_ptr<const TokenizerContext> context;
  std::shared_ptr<const TokenIndex> index;
  std::vector<uint32_t> mask;
  for (auto _ : state) {
    state.PauseTiming();
    index.reset();
    auto loaded = Vocabulary::Load(path);
    if (!loaded.ok()) {
      state.SkipWithError(std::string(loaded.status().message()).c_str());
      return;
    }
    context = TokenizerContext::Create(*std::move(loaded));
    mask.assign((context->vocabulary().size() + 31) / 32, 0);
    state.ResumeTiming();
    if (!TimedFirstMask(state, regex, context, &index, &mask)) return;
  }
}

void CompileReady(benchmark::State& state, std::string tokenizer, std::string regex, int threads) {
  auto context = LoadShared(tokenizer);
  size_t bytes = 0, states = 0;
  for (auto _ : state) {
    auto index = CompileIndex(regex, context, /*eager=*/true, threads);
    if (!index.ok()) {
      state.SkipWithError(std::string(index.status().message()).c_str());
      return;
    }
    bytes = (*index)->MemoryBytes();
    states = (*index)->num_computed_states();
  }
  state.counters["index_bytes"] = static_cast<double>(bytes);
  state.counters["ready_states"] = static_cast<double>(states);
}

// An eagerly built index, or null after marking the benchmark skipped.
std::shared_ptr<const TokenIndex> EagerIndex(benchmark::State& state, const std::string& tokenizer,
                                             const std::string& regex) {
  auto index = CompileIndex(regex, LoadShared(tokenizer), /*eager=*/true);
  if (!index.ok()) {
    state.SkipWithError(std::string(index.status().message()).c_str());
    return nullptr;
  }
  return *index;
}

// (state, text token) pairs met by 16 random walks: the states and tokens a
// generation really meets.
std::vector<std::pair<Dfa::State, uint32_t>> WalkSteps(const std::shared_ptr<const TokenIndex>& index) {
  std::vector<std::pair<Dfa::State, uint32_t>> steps;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    auto walk = RandomWalk(index, seed, 32);
    if (!walk.ok()) continue;
    Guide g(index);
    for (uint32_t t : walk->tokens) {
      if (index->vocabulary().is_eos(t)) break;
      steps.emplace_back(g.state(), t);
      if (!g.Advance(t).ok()) break;
    }
  }
  return steps;
}

// The states of one seeded walk (seed 1, at most 32 tokens, EOS excluded),
// in walk order, from `index`'s start: the states whose masks a generation
// asks for. Empty when the walk fails.
std::vector<Dfa::State> SampleWalkStates(const std::shared_ptr<const TokenIndex>& index) {
  std::vector<Dfa::State> states;
  auto walk = RandomWalk(index, 1, 32);
  if (!walk.ok()) return states;
  Dfa::State s = index->start();
  for (uint32_t t : walk->tokens) {
    states.push_back(s);
    if (index->vocabulary().is_eos(t)) break;
    s = index->NextState(s, t);
    if (s == Dfa::kDead) break;
  }
  return states;
}

// Every mask of a fixed seeded walk, on a fresh lazy index over a vocabulary
// whose loop memo is empty (both made outside the timed region): the whole
// first walk a new constraint pays, every first visit included (a state met
// twice is computed once, as in serving). Time per walk; counters: steps and
// the distinct states among them.
void FirstVisitWriteMask(benchmark::State& state, std::string tokenizer, std::string regex) {
  auto context = LoadShared(tokenizer);
  auto dfa = Dfa::FromPattern(regex);
  if (!dfa.ok()) {
    state.SkipWithError(std::string(dfa.status().message()).c_str());
    return;
  }
  const std::vector<Dfa::State> states = SampleWalkStates(TokenIndex::Create(*dfa, context));
  if (states.empty()) {
    state.SkipWithError("the sample walk failed");
    return;
  }
  std::vector<uint32_t> mask((context->vocabulary().size() + 31) / 32);
  std::shared_ptr<const TokenIndex> index;
  for (auto _ : state) {
    state.PauseTiming();
    index.reset();
    context->loop_masks().Clear();
    index = TokenIndex::Create(*dfa, context);
    state.ResumeTiming();
    for (Dfa::State s : states) {
      (void)index->WriteMask(s, mask.data());
      benchmark::DoNotOptimize(mask.data());
    }
  }
  std::vector<Dfa::State> distinct = states;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  state.counters["steps"] = static_cast<double>(states.size());
  state.counters["distinct_states"] = static_cast<double>(distinct.size());
}

// A ready state's mask (eager index: every mask computed before timing),
// cycling over the states met by WalkSteps; Memcpy is its baseline.
void WriteMaskReady(benchmark::State& state, std::string tokenizer, std::string regex) {
  auto index = EagerIndex(state, tokenizer, regex);
  if (!index) return;
  auto steps = WalkSteps(index);
  std::vector<uint32_t> mask(index->num_words());
  size_t i = 0;
  for (auto _ : state) {
    (void)index->WriteMask(steps[i].first, mask.data());
    benchmark::DoNotOptimize(mask.data());
    benchmark::ClobberMemory();
    if (++i == steps.size()) i = 0;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * mask.size() * 4);
}

void Memcpy(benchmark::State& state, std::string tokenizer) {
  auto context = LoadShared(tokenizer);
  const size_t words = (context->vocabulary().size() + 31) / 32;
  // Several sources, as WriteMask reads several distinct masks.
  std::vector<std::vector<uint32_t>> src(8, std::vector<uint32_t>(words, 0x5a5a5a5a));
  std::vector<uint32_t> dst(words);
  size_t i = 0;
  for (auto _ : state) {
    std::memcpy(dst.data(), src[i].data(), words * 4);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
    i = (i + 1) & 7;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * words * 4);
}

void Advance(benchmark::State& state, std::string tokenizer, std::string regex) {
  auto index = EagerIndex(state, tokenizer, regex);
  if (!index) return;
  auto steps = WalkSteps(index);
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(index->NextState(steps[i].first, steps[i].second));
    if (++i == steps.size()) i = 0;
  }
}

void GuideAdvance(benchmark::State& state, std::string tokenizer, std::string regex) {
  auto index = EagerIndex(state, tokenizer, regex);
  if (!index) return;
  // The text tokens of one walk, advanced in order and replayed from the start.
  auto walk = RandomWalk(index, 1, 32);
  std::vector<uint32_t> tokens;
  if (walk.ok()) {
    for (uint32_t t : walk->tokens) {
      if (!index->vocabulary().is_eos(t)) tokens.push_back(t);
    }
  }
  if (tokens.empty()) {
    state.SkipWithError("the random walk produced no text token");
    return;
  }
  Guide g(index);
  size_t i = 0;
  for (auto _ : state) {
    if (i == tokens.size()) {
      state.PauseTiming();
      g.Reset();
      i = 0;
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(g.Advance(tokens[i++]));
  }
}

// DFA construction (Regex::Parse + Dfa::Compile) on fixed JSON-Schema regexes
// from bench/data, with two baselines over the same bytes in the same process:
// a memcpy of the pattern and Regex::Parse alone. docs/benchmarks.md records
// the ratios ("DFA construction speed").
std::string ReadBenchData(const std::string& name) {
  std::ifstream in(std::string(MASKD_SOURCE_DIR) + "/bench/data/" + name, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void DfaFromPattern(benchmark::State& state, std::string regex) {
  uint32_t states = 0;
  for (auto _ : state) {
    auto dfa = Dfa::FromPattern(regex);
    if (!dfa.ok()) {
      state.SkipWithError(std::string(dfa.status().message()).c_str());
      return;
    }
    states = (*dfa)->num_states();
    benchmark::DoNotOptimize(states);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * regex.size());
  state.counters["dfa_states"] = static_cast<double>(states);
}

void RegexParseOnly(benchmark::State& state, std::string regex) {
  for (auto _ : state) {
    auto re = Regex::Parse(regex);
    if (!re.ok()) {
      state.SkipWithError(std::string(re.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(re->expanded_size());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * regex.size());
}

void RegexMemcpy(benchmark::State& state, std::string regex) {
  std::string dst(regex.size(), '\0');
  for (auto _ : state) {
    std::memcpy(dst.data(), regex.data(), regex.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * regex.size());
}

// The first mask of a JSON string's content state, on a fresh index each
// iteration (so always a first visit): `shared` takes the loop part from the
// tokenizer context's LoopMasks (warm after the first iteration), `plain` walks the
// whole trie (the baseline, same process).
void FirstStringMask(benchmark::State& state, std::string tokenizer, std::string regex,
                     bool shared) {
  auto context = LoadShared(tokenizer);
  auto dfa = Dfa::FromPattern(regex);
  if (!dfa.ok()) {
    state.SkipWithError(std::string(dfa.status().message()).c_str());
    return;
  }
  // A string content state: loops on 'a', and a quote leaves it alive.
  Dfa::State s = Dfa::kDead;
  for (Dfa::State q = 1; q < (*dfa)->num_states() && s == Dfa::kDead; ++q) {
    if ((*dfa)->Next(q, 'a') == q && (*dfa)->Next(q, '"') != Dfa::kDead) s = q;
  }
  if (s == Dfa::kDead) {
    state.SkipWithError("no string content state");
    return;
  }
  TokenIndex::Options options;
  options.share_loops = shared;
  std::vector<uint32_t> mask((context->vocabulary().size() + 31) / 32);
  for (auto _ : state) {
    auto index = TokenIndex::Create(*dfa, context, options);
    (void)index->WriteMask(s, mask.data());
    benchmark::DoNotOptimize(mask.data());
  }
}

}  // namespace
}  // namespace maskd

int main(int argc, char** argv) {
  if (!std::filesystem::exists(std::string(MASKD_SHARED_DIR) + "/tokenizers/llama3")) {
    std::fprintf(stderr, "index_bench needs ../shared (tokenizers and corpora/bench-regexes.json)\n");
    return 1;
  }
  auto regexes = maskd::BenchRegexes();
  for (const char* tok : {"llama3", "qwen3", "gemma3"}) {
    std::string t = tok;
    benchmark::RegisterBenchmark(("Memcpy/" + t).c_str(), maskd::Memcpy, t);
    for (const auto& [name, re] : regexes) {
      std::string suffix = t + "/" + name;
      benchmark::RegisterBenchmark(("CompileFirstMaskWarmMemo/" + suffix).c_str(),
                                   maskd::CompileFirstMask, t, re, false)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("CompileFirstMaskColdMemo/" + suffix).c_str(),
                                   maskd::CompileFirstMask, t, re, true)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("CompileFirstMaskFreshVocab/" + suffix).c_str(),
                                   maskd::CompileFirstMaskFreshVocab, t, re)
          ->Unit(benchmark::kMillisecond)
          ->Iterations(10);
      benchmark::RegisterBenchmark(("FirstVisitWriteMask/" + suffix).c_str(),
                                   maskd::FirstVisitWriteMask, t, re)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("CompileReady/" + suffix).c_str(), maskd::CompileReady, t, re, 1)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("CompileReady2T/" + suffix).c_str(), maskd::CompileReady, t, re, 2)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("WriteMaskReady/" + suffix).c_str(), maskd::WriteMaskReady, t, re);
      benchmark::RegisterBenchmark(("NextState/" + suffix).c_str(), maskd::Advance, t, re);
      benchmark::RegisterBenchmark(("GuideAdvance/" + suffix).c_str(), maskd::GuideAdvance, t, re);
    }
  }
  for (const char* name : {"dfa_jme_0.re", "dfa_washingtonpost_49.re", "dfa_bfcl_java_12.re"}) {
    std::string re = maskd::ReadBenchData(name);
    std::string suffix = std::string(name).substr(4, std::strlen(name) - 7);  // "dfa_X.re" -> "X"
    benchmark::RegisterBenchmark(("DfaFromPattern/" + suffix).c_str(), maskd::DfaFromPattern, re)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("DfaBaselineParse/" + suffix).c_str(), maskd::RegexParseOnly, re)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("DfaBaselineMemcpy/" + suffix).c_str(), maskd::RegexMemcpy, re)
        ->Unit(benchmark::kMicrosecond);
  }
  for (const char* tok : {"llama3", "qwen3", "gemma3"}) {
    std::string t = tok;
    std::string re = maskd::ReadBenchData("dfa_jme_0.re");
    benchmark::RegisterBenchmark(("FirstStringMask/" + t + "/shared").c_str(),
                                 maskd::FirstStringMask, t, re, true)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("FirstStringMask/" + t + "/plain").c_str(),
                                 maskd::FirstStringMask, t, re, false)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
