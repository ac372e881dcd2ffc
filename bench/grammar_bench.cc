// Grammar engine costs, per (grammar, tokenizer), as a user pays them:
//
//   compile_ms     GrammarIndex::Create (parse, inline regular rules, DFAs);
//   first_mask_ms  compile + GrammarGuide::Create + the first mask, on a
//                  fresh index (empty memo): time to first mask for a new
//                  grammar; the vocabulary is loaded once, before;
//   step_us        WriteMask + Advance per token along random walks on a
//                  fresh index (memo entries filled as the walk meets them):
//                  mean, p50, p99;
//   warm_step_us   the same walks again on the same index: p50, p99;
//   memcpy_us      the baseline in the same run: copying one mask row
//                  (ceil(vocab/32) words; the mean of 64 copies), median.
//
// Then fixed states ("case" lines): a grammar after a prefix text (taken as
// the longest allowed tokens, greedily), one mask on a warm index: mask_us,
// median and minimum of --reps masks, and the mask's size. The prefixes end
// inside a terminal that may end at every byte (a line comment, a long
// name), where a mask's tokens cross terminal ends most.
//
// Medians over --reps compiles; walks: --walks walks of at most --steps
// tokens, each token drawn (seeded) from the current mask, EOS taken with
// probability 1/8 where allowed. One JSON object per line on stdout
// (bench/tables/grammar.py makes the table of docs/benchmarks.md).
//
//   grammar_bench [--tokenizers bundled,llama3,qwen3] [--reps 5] [--walks 4] [--steps 64]
//                 [--grammars json.gbnf,...|none] [--cases all|none]
//
// Tokenizers other than "bundled" come from ../shared/tokenizers and are
// skipped (with a note on stderr) when absent.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_split.h"
#include "grammar/bnf_parser.h"
#include "grammar/grammar_guide.h"
#include "grammar/grammar_index.h"
#include "grammar/lark_parser.h"
#include "tokenizer/token_trie.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"
#include "nlohmann/json.hpp"

namespace maskd::grammar {
namespace {

using Clock = std::chrono::steady_clock;

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// The baseline: microseconds to copy `src` into `dst` (same size), one of 64
// copies timed together (one is below the clock's resolution); `src` changes
// between copies so none is elided.
double MemcpyMicros(std::vector<uint32_t>& src, std::vector<uint32_t>& dst) {
  constexpr int kCopies = 64;
  const auto t0 = Clock::now();
  for (int k = 0; k < kCopies; ++k) {
    src[k % src.size()] ^= 1;
    std::memcpy(dst.data(), src.data(), dst.size() * sizeof(uint32_t));
    asm volatile("" : : "r"(dst.data()) : "memory");
  }
  return Micros(Clock::now() - t0) / kCopies;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<Grammar> ParseFile(const std::string& name) {
  const std::string text = ReadFile(std::string(MASKD_SOURCE_DIR) + "/tests/data/grammars/" + name);
  if (name.size() > 5 && name.substr(name.size() - 5) == ".lark") return ParseLark(text);
  return ParseGbnf(text);
}

// One walk: per step WriteMask then Advance of a drawn token; the times go
// to `steps_us`. Returns false on an engine error (printed).
bool Walk(const std::shared_ptr<const GrammarIndex>& index, uint32_t seed, int max_steps,
          std::vector<double>* steps_us) {
  auto guide = GrammarGuide::Create(index);
  if (!guide.ok()) return false;
  const Vocabulary& vocab = index->vocab();
  std::mt19937 rng(seed);
  std::vector<uint32_t> mask(index->num_words()), allowed;
  for (int step = 0; step < max_steps; ++step) {
    const auto t0 = Clock::now();
    absl::Status s = guide->WriteMask(absl::MakeSpan(mask));
    const auto t1 = Clock::now();
    if (!s.ok()) {
      fprintf(stderr, "mask: %s\n", std::string(s.message()).c_str());
      return false;
    }
    allowed.clear();
    bool eos = false;
    for (uint32_t w = 0; w < mask.size(); ++w) {
      for (uint32_t bits = mask[w]; bits != 0; bits &= bits - 1) {
        const uint32_t t = w * 32 + static_cast<uint32_t>(__builtin_ctz(bits));
        if (vocab.is_eos(t)) eos = true;
        else allowed.push_back(t);
      }
    }
    if (allowed.empty() || (eos && rng() % 8 == 0)) {
      steps_us->push_back(Micros(t1 - t0));
      return true;
    }
    const uint32_t token = allowed[rng() % allowed.size()];
    const auto t2 = Clock::now();
    s = guide->Advance(token);
    const auto t3 = Clock::now();
    if (!s.ok()) {
      fprintf(stderr, "advance: %s\n", std::string(s.message()).c_str());
      return false;
    }
    steps_us->push_back(Micros((t1 - t0) + (t3 - t2)));
  }
  return true;
}

// Advances `guide` over `text`, each step by the longest token the guide
// allows whose bytes are a prefix of the rest. False when none is.
bool AdvanceText(GrammarGuide& guide, std::string_view text) {
  const TokenTrie& trie = guide.index().context().trie();
  const TokenTrie::Node* nodes = trie.nodes();
  std::vector<uint32_t> candidates;
  while (!text.empty()) {
    candidates.clear();
    uint32_t node = trie.root_child(static_cast<uint8_t>(text[0]));
    for (size_t depth = 1; node != 0; ++depth) {
      for (uint32_t k = trie.token_begin()[node]; k < trie.token_begin()[node + 1]; ++k) {
        candidates.push_back(trie.token_ids()[k]);
      }
      if (depth == text.size()) break;
      uint32_t child = 0;
      for (uint32_t c = node + 1; c < nodes[node].next; c = nodes[c].next) {
        if (nodes[c].byte == static_cast<uint8_t>(text[depth])) child = c;
      }
      node = child;
    }
    bool advanced = false;
    for (auto it = candidates.rbegin(); it != candidates.rend() && !advanced; ++it) {
      absl::StatusOr<bool> allowed = guide.IsAllowed(*it);
      if (allowed.ok() && *allowed) {
        advanced = guide.Advance(*it).ok();
        if (advanced) text.remove_prefix(guide.index().vocab().bytes(*it).size());
      }
    }
    if (!advanced) return false;
  }
  return true;
}

struct FixedCase {
  const char* name;
  const char* grammar;
  const char* prefix;
};

constexpr FixedCase kFixedCases[] = {
    {"slash_paths in a // comment", "slash_paths.lark", "foo// hello world /bar"},
    {"slash_paths in a long name", "slash_paths.lark", "foo/some_rather_long_identifier_name"},
    {"settings in a // comment", "settings.lark", "x = 1;\n// see the notes below"},
    {"settings in a /* comment", "settings.lark", "x = 1; /* see the notes"},
    {"settings after an operand", "settings.lark", "x = abc"},
    {"hashtags in a # comment", "hashtags.lark", "word #tag # a comment"},
};

// One line per fixed case on `context`; false on an engine error (printed).
bool RunFixedCases(const std::shared_ptr<const TokenizerContext>& context, const std::string& tok,
                   int reps) {
  for (const FixedCase& c : kFixedCases) {
    auto g = ParseFile(c.grammar);
    if (!g.ok()) return false;
    auto index = GrammarIndex::Create(*g, context);
    if (!index.ok()) return false;
    auto guide = GrammarGuide::Create(*index);
    if (!guide.ok() || !AdvanceText(*guide, c.prefix)) {
      fprintf(stderr, "%s: the prefix is not taken\n", c.name);
      return false;
    }
    std::vector<uint32_t> mask((*index)->num_words());
    std::vector<double> mask_us;
    for (int r = 0; r <= reps; ++r) {
      const auto t0 = Clock::now();
      absl::Status s = guide->WriteMask(absl::MakeSpan(mask));
      const auto t1 = Clock::now();
      if (!s.ok()) {
        fprintf(stderr, "%s: %s\n", c.name, std::string(s.message()).c_str());
        return false;
      }
      if (r > 0) mask_us.push_back(Micros(t1 - t0));  // the first fills the memo
    }
    size_t allowed = 0;
    for (uint32_t w : mask) allowed += static_cast<size_t>(__builtin_popcount(w));
    std::vector<double> memcpy_us;
    std::vector<uint32_t> copy(mask.size());
    for (int r = 0; r < reps; ++r) {
      memcpy_us.push_back(MemcpyMicros(mask, copy));
    }
    nlohmann::json out = {
        {"case", c.name},
        {"grammar", c.grammar},
        {"tokenizer", tok == "bundled" ? "qwen3 (bundled)" : tok},
        {"tokens", guide->num_tokens()},
        {"allowed", allowed},
        {"mask_us", {{"p50", Quantile(mask_us, 0.5)}, {"min", Quantile(mask_us, 0)}}},
        {"memcpy_us", Quantile(memcpy_us, 0.5)},
    };
    printf("%s\n", out.dump().c_str());
    fflush(stdout);
  }
  return true;
}

int Run(int argc, char** argv) {
  std::vector<std::string> tokenizers = {"bundled"};
  int reps = 5, walks = 4, steps = 64;
  std::vector<std::string> grammars = {"json.gbnf",  "arithmetic.gbnf", "c.gbnf",  "chess.gbnf",
                                       "list.gbnf",  "calls.lark",      "sql.lark"};
  bool cases = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--tokenizers") tokenizers = absl::StrSplit(value, ',');
    else if (flag == "--reps") reps = std::stoi(value);
    else if (flag == "--walks") walks = std::stoi(value);
    else if (flag == "--steps") steps = std::stoi(value);
    else if (flag == "--grammars") {
      grammars.clear();
      if (value != "none") grammars = absl::StrSplit(value, ',');
    } else if (flag == "--cases") cases = value != "none";
    else {
      fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  for (const std::string& tok : tokenizers) {
    const std::string path = tok == "bundled"
                                 ? std::string(MASKD_SOURCE_DIR) + "/data/tokenizers/qwen3"
                                 : std::string(MASKD_SHARED_DIR) + "/tokenizers/" + tok;
    auto vocab = Vocabulary::Load(path);
    if (!vocab.ok()) {
      fprintf(stderr, "skipping %s: %s\n", tok.c_str(), std::string(vocab.status().message()).c_str());
      continue;
    }
    const auto context = TokenizerContext::Create(*vocab);
    std::vector<uint32_t> src((*vocab)->size() / 32 + 1, 0x5a5a5a5a), dst(src.size());
    for (const std::string& name : grammars) {
      auto g = ParseFile(name);
      if (!g.ok()) {
        fprintf(stderr, "%s: %s\n", name.c_str(), std::string(g.status().message()).c_str());
        return 1;
      }
      std::vector<double> compile_ms, first_ms, memcpy_us;
      for (int r = 0; r < reps; ++r) {
        const auto t0 = Clock::now();
        auto index = GrammarIndex::Create(*g, context);
        const auto t1 = Clock::now();
        if (!index.ok()) {
          fprintf(stderr, "%s: %s\n", name.c_str(), std::string(index.status().message()).c_str());
          return 1;
        }
        auto guide = GrammarGuide::Create(*index);
        std::vector<uint32_t> mask((*index)->num_words());
        if (!guide.ok() || !guide->WriteMask(absl::MakeSpan(mask)).ok()) return 1;
        const auto t2 = Clock::now();
        compile_ms.push_back(Micros(t1 - t0) / 1000);
        first_ms.push_back(Micros(t2 - t0) / 1000);
        memcpy_us.push_back(MemcpyMicros(src, dst));
      }
      auto index = GrammarIndex::Create(*g, context);
      std::vector<double> cold, warm;
      for (int w = 0; w < walks; ++w) {
        if (!Walk(*index, 1000 + w, steps, &cold)) return 1;
      }
      for (int w = 0; w < walks; ++w) {
        if (!Walk(*index, 1000 + w, steps, &warm)) return 1;
      }
      double mean = 0;
      for (double v : cold) mean += v;
      mean /= std::max<size_t>(1, cold.size());
      nlohmann::json out = {
          {"grammar", name},
          {"tokenizer", tok == "bundled" ? "qwen3 (bundled)" : tok},
          {"vocab", (*vocab)->size()},
          {"compile_ms", Quantile(compile_ms, 0.5)},
          {"first_mask_ms", Quantile(first_ms, 0.5)},
          {"steps", cold.size()},
          {"step_us", {{"mean", mean}, {"p50", Quantile(cold, 0.5)}, {"p99", Quantile(cold, 0.99)}}},
          {"warm_step_us", {{"p50", Quantile(warm, 0.5)}, {"p99", Quantile(warm, 0.99)}}},
          {"memcpy_us", Quantile(memcpy_us, 0.5)},
          {"memo_bytes", (*index)->memo_bytes()},
      };
      printf("%s\n", out.dump().c_str());
      fflush(stdout);
    }
    if (cases && !RunFixedCases(context, tok, reps)) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace maskd::grammar

int main(int argc, char** argv) { return maskd::grammar::Run(argc, argv); }
