// Deferred terminal DFAs (grammar/deferred_dfa.h): the facts a grammar takes
// from a terminal's regex tree instead of its DFA (grammar/regex_language.h)
// against the DFA itself on random regexes; a deferred DFA built once, on
// first use, from any thread; a failed build read as nothing and counted as
// a refusal; and a lazy-mode grammar index that builds no terminal DFA at
// compile and the DFAs its masks reach, with the masks of whole mode.
#include "grammar/deferred_dfa.h"

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "automaton/dfa.h"
#include "automaton/regex.h"
#include "grammar/grammar_guide.h"
#include "grammar/grammar_index.h"
#include "grammar/regex_language.h"
#include "gtest/gtest.h"
#include "tests/grammar/grammar_test_util.h"
#include "tests/index/test_util.h"

namespace maskd::grammar {
namespace {

// Regexes over ASCII, multi-byte characters and classes (a class of every
// length of UTF-8, an empty one), with every kind of repeat.
std::string RandomRegex(std::mt19937& rng, int depth) {
  static const char* const kLeaves[] = {
      "a", "b", "\\.", "é", "中", "😀", "[a-c]", "[^\"\\\\\\x00-\\x1f]", "[\\x{80}-\\x{7FF}]",
      "[α-ω]", "[\\x{10000}-\\x{10FFFF}]", "[^\\x00-\\x{10FFFF}]", "(?:)", "\\d", "."};
  const int pick = depth <= 0 ? 0 : static_cast<int>(rng() % 6);
  switch (pick) {
    case 0: return kLeaves[rng() % (sizeof(kLeaves) / sizeof(kLeaves[0]))];
    case 1: return RandomRegex(rng, depth - 1) + RandomRegex(rng, depth - 1);
    case 2:
      return absl::StrCat("(?:", RandomRegex(rng, depth - 1), "|", RandomRegex(rng, depth - 1), ")");
    case 3: {
      static const char* const kRepeats[] = {"*", "+", "?", "{2}", "{0,3}", "{1,}", "{2,4}", "{0}"};
      return absl::StrCat("(?:", RandomRegex(rng, depth - 1), ")",
                          kRepeats[rng() % (sizeof(kRepeats) / sizeof(kRepeats[0]))]);
    }
    default: return RandomRegex(rng, depth - 1) + kLeaves[rng() % 6];
  }
}

TEST(RegexLanguage, FactsAgreeWithTheDfa) {
  std::mt19937 rng(7);
  int with_match = 0, nullable = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string pattern = RandomRegex(rng, 1 + static_cast<int>(rng() % 5));
    SCOPED_TRACE(pattern);
    auto re = Regex::Parse(pattern);
    ASSERT_TRUE(re.ok()) << re.status();
    const RegexLanguage facts = AnalyzeRegex(re->root());
    // The NFA fits the bound exactly: a build limited to it succeeds.
    ASSERT_LE(facts.nfa_states, uint64_t{1} << 24);
    DfaOptions options;
    options.max_nfa_states = static_cast<uint32_t>(facts.nfa_states);
    auto dfa = Dfa::Compile(*re, options);
    ASSERT_TRUE(dfa.ok()) << dfa.status() << " with " << facts.nfa_states << " NFA states";
    const Dfa& d = **dfa;
    EXPECT_EQ(facts.any, d.start() != Dfa::kDead);
    EXPECT_EQ(facts.non_empty, MatchesNonEmptyString(d));
    if (!facts.any) {
      EXPECT_EQ(facts.min_bytes, RegexLanguage::kNoMatch);
      continue;
    }
    ++with_match;
    EXPECT_EQ(facts.nullable, d.IsAccepting(d.start()));
    nullable += facts.nullable;
    EXPECT_EQ(facts.min_bytes, d.DistanceToAccept(d.start()));
    const std::bitset<256> live = d.LiveBytes();
    EXPECT_EQ((live & ~facts.ByteSet()).count(), 0u) << "a live byte the facts leave out";
  }
  // The generator reached both kinds of language.
  EXPECT_GT(with_match, 1000);
  EXPECT_GT(nullable, 100);
}

TEST(DeferredDfa, BuildsOnceOnFirstUseFromAnyThread) {
  auto cache = std::make_shared<TerminalDfas>(size_t{1} << 20);
  auto build = std::make_shared<DeferredBuild>(RegexLimits{}, DfaOptions{}, cache);
  const DeferredDfa dfa("\"[a-z]{1,8}\"", build);
  EXPECT_TRUE(dfa.deferred());
  EXPECT_EQ(dfa.IfBuilt(), nullptr);
  EXPECT_EQ(cache->stats().misses, 0u);
  std::vector<const Dfa*> got(8, nullptr);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) threads.emplace_back([&, i] { got[i] = &dfa.Get(); });
  for (auto& t : threads) t.join();
  for (const Dfa* d : got) EXPECT_EQ(d, got[0]);
  EXPECT_EQ(dfa.IfBuilt(), got[0]);
  EXPECT_EQ(cache->stats().misses, 1u);  // one build, kept in the cache
  EXPECT_TRUE(got[0]->Matches("\"abc\""));
  EXPECT_FALSE(got[0]->Matches("\"\""));
  EXPECT_TRUE(build->first_error().ok());
}

TEST(DeferredDfa, AFailedBuildMatchesNothingAndCountsARefusal) {
  RegexLimits limits;
  limits.max_pattern_bytes = 4;  // the pattern below is longer: its parse fails
  auto build = std::make_shared<DeferredBuild>(limits, DfaOptions{}, nullptr);
  const DeferredDfa dfa("[a-z]{1,8}", build);
  for (int i = 0; i < 2; ++i) {  // the failure, then the failure remembered
    const RefusalWatch watch;
    const Dfa& d = dfa.Get();
    EXPECT_EQ(d.start(), Dfa::kDead);
    EXPECT_TRUE(watch.refused());
  }
  EXPECT_EQ(build->first_error().code(), absl::StatusCode::kResourceExhausted) << build->first_error();
  EXPECT_EQ(dfa.IfBuilt(), nullptr);
}

GrammarIndex::Options InMode(TerminalMode mode, std::shared_ptr<TerminalDfas> cache) {
  GrammarIndex::Options options;
  options.earley.terminal_mode = mode;
  options.earley.dfa_options.eager_up_to_states = 64;
  options.terminal_dfas = std::move(cache);
  return options;
}

TEST(DeferredDfa, LazyIndexBuildsWhatItsMasksReachWithWholeModesMasks) {
  auto g = testing::ParseGrammarFile("json.gbnf");
  ASSERT_TRUE(g.ok()) << g.status();
  auto cache = std::make_shared<TerminalDfas>(size_t{64} << 20);
  auto lazy = GrammarIndex::Create(*g, ::maskd::testing::BundledTokenizer(),
                                   InMode(TerminalMode::kLazy, cache));
  auto whole = GrammarIndex::Create(*g, ::maskd::testing::BundledTokenizer(),
                                    InMode(TerminalMode::kWhole, nullptr));
  ASSERT_TRUE(lazy.ok() && whole.ok());
  const CompiledGrammar& grammar = *(*lazy)->grammar();
  const uint32_t n = static_cast<uint32_t>(grammar.num_terminals());
  ASSERT_GT(n, 4u);
  // Compiling built no terminal's DFA (only those of the rules it merged
  // into terminals, to learn that they fit: grammar/regular_rules.h).
  const uint64_t at_compile = cache->stats().misses;
  EXPECT_LT(at_compile, n / 2);
  EXPECT_EQ((*lazy)->num_dfa_states(), 0u);
  auto built = [&] {
    uint32_t count = 0;
    for (uint32_t t = 0; t < n; ++t) count += grammar.built_dfa(t) != nullptr;
    return count;
  };
  auto a = GrammarGuide::Create(*lazy);
  auto b = GrammarGuide::Create(*whole);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<uint32_t> ma((*lazy)->num_words()), mb((*whole)->num_words());
  ASSERT_TRUE(a->WriteMask(absl::MakeSpan(ma)).ok());
  ASSERT_TRUE(b->WriteMask(absl::MakeSpan(mb)).ok());
  EXPECT_EQ(ma, mb);
  // The first mask reached some terminals, not all.
  const uint32_t first = built();
  EXPECT_GT(first, 0u);
  EXPECT_LT(first, n);
  EXPECT_GT((*lazy)->num_dfa_states(), 0u);
  std::mt19937 rng(3);
  for (int step = 0; step < 60 && !a->IsFinished(); ++step) {
    const std::vector<uint32_t> allowed = testing::Allowed(ma);
    ASSERT_FALSE(allowed.empty());
    const uint32_t t = allowed[rng() % allowed.size()];
    ASSERT_TRUE(a->Advance(t).ok());
    ASSERT_TRUE(b->Advance(t).ok());
    ASSERT_TRUE(a->WriteMask(absl::MakeSpan(ma)).ok());
    ASSERT_TRUE(b->WriteMask(absl::MakeSpan(mb)).ok());
    ASSERT_EQ(ma, mb) << "step " << step;
  }
  EXPECT_GE(built(), first);
  // Each built once, through the cache (or taken from it).
  EXPECT_LE(cache->stats().misses, at_compile + built());
}

}  // namespace
}  // namespace maskd::grammar
