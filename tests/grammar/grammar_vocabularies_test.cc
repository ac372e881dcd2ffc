// The grammar token-mask engine (GrammarIndex + GrammarGuide) on the five
// shared tokenizers (../shared/tokenizers: llama2, llama3, qwen3, gemma3,
// gptoss), for the example grammars of tests/data/grammars (five GBNF, two
// Lark, and Outlines' JSON and arithmetic Lark grammars). Label "shared;slow":
// not in the default suite; each case skips when its tokenizer is absent.
//
// Seeded walks advance the guide one token at a time; at every step:
//   - the whole mask equals brute force: every text token of the vocabulary
//     pushed byte by byte on a parser at the walk's text (BruteForceMask:
//     no memo, no look-ahead, no trie), the EOS ids exactly when the parser
//     accepts, no other special token, no bit past the vocabulary;
//   - every allowed token when there are at most kSampled of them (kSampled
//     random ones otherwise) and kSampled random refused text tokens are
//     checked one by one against a fresh parser copy and against the
//     reference recognizer (earley.h, a separate implementation):
//     IsViablePrefix(text + token) must equal the mask bit;
//   - the reference recognizer accepts the text iff the guide is accepting.
// Random walks take a uniform allowed text token, or a one-byte one half the
// time (punctuation moves the walk between rules), and EOS with
// probability 1/16 when allowed; after EOS the mask must be the EOS ids only
// and a text token is refused. Sample walks follow Outlines' CFG samples
// (../shared/corpora/outlines/cfg_samples, texts its grammars accept): every
// vocabulary token that spells a prefix of the rest of the sample must be
// allowed, and the walk takes one of them until the sample is spelled and
// EOS is allowed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/earley.h"
#include "grammar/grammar_guide.h"
#include "grammar/grammar_index.h"
#include "gtest/gtest.h"
#include "tests/grammar/grammar_test_util.h"
#include "tests/index/test_util.h"

namespace maskd::grammar {
namespace {

using ::maskd::testing::Allowed;
using ::maskd::testing::Bit;
using ::maskd::testing::BruteForceMask;
using ::maskd::testing::ParseGrammarFile;
using ::maskd::testing::TakesBytes;
using ::maskd::testing::TextTokensByBytes;

// Tokens per step checked one by one, among the allowed and among the refused.
constexpr int kSampled = 8;

const char* const kGrammars[] = {"json.gbnf",        "arithmetic.gbnf",         "list.gbnf",
                                 "chess.gbnf",       "c.gbnf",                  "calls.lark",
                                 "sql.lark",         "outlines_json.lark",      "outlines_arithmetic.lark"};

// Outlines' CFG samples a grammar accepts (folder under cfg_samples), or "".
std::string SampleFolder(const std::string& grammar) {
  if (grammar == "json.gbnf" || grammar == "outlines_json.lark") return "json";
  if (grammar == "outlines_arithmetic.lark") return "arithmetic";
  return "";
}

struct Case {
  std::string tokenizer;
  std::string grammar;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.tokenizer << " " << c.grammar; }

std::vector<Case> Cases() {
  std::vector<Case> out;
  for (const std::string& tokenizer : testing::SharedTokenizerNames()) {
    for (const char* grammar : kGrammars) out.push_back({tokenizer, grammar});
  }
  return out;
}

// What one case checked.
struct Counts {
  int walks = 0;
  int steps = 0;
  uint64_t brute_force_tokens = 0;  // text tokens decided by brute force (all, each step)
  uint64_t sampled_tokens = 0;      // tokens checked by a fresh parser and the reference
  uint64_t prefix_tokens = 0;       // sample-walk tokens that spell a prefix of the sample
};

class Checker {
 public:
  Checker(std::shared_ptr<const GrammarIndex> index, const EarleyRecognizer* reference,
          uint64_t seed)
      : index_(std::move(index)),
        vocab_(index_->vocab()),
        reference_(reference),
        order_(TextTokensByBytes(vocab_)),
        rng_(seed) {}

  // Checks the guide's mask at `text` (what the guide has taken) and returns
  // it; sets *ok to false on a fatal mismatch.
  std::vector<uint32_t> CheckStep(GrammarGuide& guide, const std::string& text, bool* ok) {
    *ok = false;
    std::vector<uint32_t> mask(index_->num_words());
    auto written = guide.WriteMask(absl::MakeSpan(mask));
    EXPECT_TRUE(written.ok()) << written;
    if (!written.ok()) return mask;
    auto parser = index_->NewParser();
    EXPECT_TRUE(parser.ok()) << parser.status();
    if (!parser.ok()) return mask;
    for (char c : text) {
      auto pushed = parser->Push(static_cast<uint8_t>(c));
      EXPECT_TRUE(pushed.ok() && *pushed) << "the walk's own text is refused: \"" << text << "\"";
      if (!pushed.ok() || !*pushed) return mask;
    }
    const std::vector<uint32_t> expected = BruteForceMask(*index_, *parser, order_);
    counts_.brute_force_tokens += order_.size();
    ++counts_.steps;
    const std::vector<uint32_t> got = Allowed(mask);
    const std::vector<uint32_t> want = Allowed(expected);
    if (got != want) {
      ADD_FAILURE() << Difference(got, want) << " after \"" << text << "\"";
      return mask;
    }
    for (uint32_t t : vocab_.eos_ids()) {
      EXPECT_EQ(Bit(mask, t), guide.IsAccepting()) << "EOS " << t << " after \"" << text << "\"";
    }
    auto accepted = reference_->Accepts(text);
    EXPECT_TRUE(accepted.ok()) << accepted.status();
    if (accepted.ok()) {
      EXPECT_EQ(*accepted, guide.IsAccepting()) << "\"" << text << "\"";
    }

    std::vector<uint32_t> allowed_text, sampled;
    for (uint32_t t : got) {
      if (!vocab_.is_special(t)) allowed_text.push_back(t);
    }
    if (allowed_text.size() <= kSampled) {
      sampled = allowed_text;
    } else {
      for (int k = 0; k < kSampled; ++k) sampled.push_back(allowed_text[rng_() % allowed_text.size()]);
    }
    for (int k = 0, tries = 0; k < kSampled && tries < 64 * kSampled; ++tries) {
      const uint32_t t = order_[rng_() % order_.size()];
      if (Bit(mask, t)) continue;
      sampled.push_back(t);
      ++k;
    }
    for (uint32_t t : sampled) {
      const bool bit = Bit(mask, t);
      EXPECT_EQ(TakesBytes(*parser, vocab_.bytes(t)), bit)
          << "fresh parser, token " << t << " \"" << vocab_.bytes(t) << "\" after \"" << text << "\"";
      auto viable = reference_->IsViablePrefix(text + std::string(vocab_.bytes(t)));
      EXPECT_TRUE(viable.ok()) << viable.status();
      if (viable.ok()) {
        EXPECT_EQ(*viable, bit) << "reference recognizer, token " << t << " \"" << vocab_.bytes(t)
                                << "\" after \"" << text << "\"";
      }
      ++counts_.sampled_tokens;
    }
    *ok = !::testing::Test::HasFailure();
    return mask;
  }

  // Takes an EOS id (allowed): the guide must be finished, with the EOS ids
  // as its only mask, and refuse a text token.
  void CheckEos(GrammarGuide& guide) {
    ASSERT_FALSE(vocab_.eos_ids().empty());
    ASSERT_TRUE(guide.Advance(vocab_.eos_ids()[0]).ok());
    EXPECT_TRUE(guide.IsFinished());
    std::vector<uint32_t> mask(index_->num_words());
    ASSERT_TRUE(guide.WriteMask(absl::MakeSpan(mask)).ok());
    EXPECT_EQ(Allowed(mask), std::vector<uint32_t>(vocab_.eos_ids().begin(), vocab_.eos_ids().end()));
    EXPECT_EQ(guide.Advance(order_[rng_() % order_.size()]).code(),
              absl::StatusCode::kFailedPrecondition);
  }

  void RandomWalk(int steps) {
    auto guide = GrammarGuide::Create(index_);
    ASSERT_TRUE(guide.ok()) << guide.status();
    ++counts_.walks;
    std::string text;
    for (int step = 0; step < steps; ++step) {
      bool ok = false;
      const std::vector<uint32_t> mask = CheckStep(*guide, text, &ok);
      if (!ok) return;
      if (guide->IsAccepting() && rng_() % 16 == 0) return CheckEos(*guide);
      std::vector<uint32_t> all, short_ones;
      for (uint32_t t : Allowed(mask)) {
        if (vocab_.is_special(t)) continue;
        all.push_back(t);
        if (vocab_.bytes(t).size() == 1) short_ones.push_back(t);
      }
      if (all.empty()) {
        EXPECT_TRUE(guide->IsAccepting()) << "no token and not accepting after \"" << text << "\"";
        return;
      }
      const auto& from = !short_ones.empty() && rng_() % 2 == 0 ? short_ones : all;
      const uint32_t t = from[rng_() % from.size()];
      ASSERT_TRUE(guide->Advance(t).ok()) << t;
      text += vocab_.bytes(t);
    }
  }

  // Follows `sample` (a text the grammar accepts) for at most `steps` tokens.
  void SampleWalk(const std::string& sample, int steps) {
    auto guide = GrammarGuide::Create(index_);
    ASSERT_TRUE(guide.ok()) << guide.status();
    ++counts_.walks;
    std::string text;
    for (int step = 0; step < steps; ++step) {
      bool ok = false;
      const std::vector<uint32_t> mask = CheckStep(*guide, text, &ok);
      if (!ok) return;
      if (text.size() == sample.size()) {
        ASSERT_TRUE(guide->IsAccepting()) << "the whole sample is not accepted";
        return CheckEos(*guide);
      }
      const std::vector<uint32_t> prefixes = TokensSpellingPrefixOf(std::string_view(sample).substr(text.size()));
      counts_.prefix_tokens += prefixes.size();
      for (uint32_t t : prefixes) {
        ASSERT_TRUE(Bit(mask, t)) << "token " << t << " \"" << vocab_.bytes(t)
                                  << "\" spells the sample on from \"" << text << "\" but is refused";
      }
      ASSERT_FALSE(prefixes.empty()) << "no token spells the sample on from byte " << text.size();
      // The longest half the time, any other time.
      const uint32_t t = rng_() % 2 == 0 ? prefixes.back() : prefixes[rng_() % prefixes.size()];
      ASSERT_TRUE(guide->Advance(t).ok()) << t;
      text += vocab_.bytes(t);
    }
  }

  const Counts& counts() const { return counts_; }

 private:
  // The text tokens whose bytes are a prefix of `rest`, shortest first.
  std::vector<uint32_t> TokensSpellingPrefixOf(std::string_view rest) const {
    std::vector<uint32_t> out;
    auto less = [&](uint32_t a, std::string_view b) { return vocab_.bytes(a) < b; };
    for (size_t n = 1; n <= rest.size() && n <= 512; ++n) {
      const std::string_view prefix = rest.substr(0, n);
      auto it = std::lower_bound(order_.begin(), order_.end(), prefix, less);
      if (it == order_.end() || vocab_.bytes(*it).substr(0, n) != prefix) break;  // no longer one
      for (; it != order_.end() && vocab_.bytes(*it) == prefix; ++it) out.push_back(*it);
    }
    return out;
  }

  std::string Difference(const std::vector<uint32_t>& got, const std::vector<uint32_t>& want) const {
    std::vector<uint32_t> extra, missing;
    std::set_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(extra));
    std::set_difference(want.begin(), want.end(), got.begin(), got.end(), std::back_inserter(missing));
    std::ostringstream out;
    out << "mask has " << got.size() << " tokens, brute force " << want.size() << "; ";
    auto list = [&](const char* what, const std::vector<uint32_t>& ids) {
      out << ids.size() << " " << what << ":";
      for (size_t i = 0; i < ids.size() && i < 8; ++i) {
        out << " " << ids[i] << " \"" << vocab_.bytes(ids[i]) << "\"";
      }
      out << "; ";
    };
    list("only in the mask", extra);
    list("only in brute force", missing);
    return out.str();
  }

  std::shared_ptr<const GrammarIndex> index_;
  const Vocabulary& vocab_;
  const EarleyRecognizer* reference_;
  const std::vector<uint32_t> order_;
  std::mt19937_64 rng_;
  Counts counts_;
};

// A seed fixed by the case (FNV-1a of its names), the same on every run.
uint64_t SeedOf(const Case& c) {
  uint64_t h = 14695981039346656037ull;
  for (char ch : c.tokenizer + "/" + c.grammar) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  return h;
}

std::vector<std::string> Samples(const std::string& folder) {
  std::vector<std::filesystem::path> paths;
  const std::filesystem::path dir =
      std::filesystem::path(MASKD_SHARED_DIR) / "corpora/outlines/cfg_samples" / folder;
  if (folder.empty() || !std::filesystem::exists(dir)) return {};
  for (const auto& entry : std::filesystem::directory_iterator(dir)) paths.push_back(entry.path());
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> out;
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    std::string text = buf.str();
    // Outlines' arithmetic grammar has no newline; its samples end in one.
    if (folder == "arithmetic") {
      while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    }
    out.push_back(std::move(text));
  }
  return out;
}

class GrammarVocabulariesTest : public ::testing::TestWithParam<Case> {};

TEST_P(GrammarVocabulariesTest, MasksEqualBruteForceAndTheReferenceRecognizer) {
  const Case& c = GetParam();
  std::shared_ptr<const TokenizerContext> tokenizer = testing::SharedTokenizer(c.tokenizer);
  if (tokenizer == nullptr) GTEST_SKIP() << "../shared/tokenizers/" << c.tokenizer << " is absent";
  const auto t0 = std::chrono::steady_clock::now();
  auto g = ParseGrammarFile(c.grammar);
  ASSERT_TRUE(g.ok()) << g.status();
  auto index = GrammarIndex::Create(*g, tokenizer);
  ASSERT_TRUE(index.ok()) << index.status();
  auto reference = EarleyRecognizer::Create(*g);
  ASSERT_TRUE(reference.ok()) << reference.status();
  Checker checker(*index, &*reference, SeedOf(c));
  // sql.lark's Earley sets are the largest (keywords that are also names).
  const bool heavy = c.grammar == "sql.lark";
  const int walks = testing::Scaled(heavy ? 4 : 8, 1);
  const int steps = testing::Scaled(heavy ? 24 : 40, 8);
  for (int w = 0; w < walks && !HasFailure(); ++w) {
    SCOPED_TRACE("random walk " + std::to_string(w));
    checker.RandomWalk(steps);
  }
  for (const std::string& sample : Samples(SampleFolder(c.grammar))) {
    if (HasFailure()) break;
    SCOPED_TRACE("sample walk over \"" + sample.substr(0, 60) + "\"");
    checker.SampleWalk(sample, testing::Scaled(150, 20));
  }
  const Counts& n = checker.counts();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%-7s %-25s walks %2d  steps %4d  brute-force tokens %9llu  sampled %5llu  "
              "prefix tokens %4llu  %.1f s\n",
              c.tokenizer.c_str(), c.grammar.c_str(), n.walks, n.steps,
              static_cast<unsigned long long>(n.brute_force_tokens),
              static_cast<unsigned long long>(n.sampled_tokens),
              static_cast<unsigned long long>(n.prefix_tokens), seconds);
  std::fflush(stdout);
  EXPECT_GT(n.steps, walks);
}

INSTANTIATE_TEST_SUITE_P(Shared, GrammarVocabulariesTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) {
                           std::string name = info.param.tokenizer + "_" + info.param.grammar;
                           for (char& c : name) {
                             if (c == '.') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace maskd::grammar
