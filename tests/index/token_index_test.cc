// Token index: per-state masks against a brute-force walk of every token, on
// the bundled tokenizer and the five shared ones; random walks whose texts
// must fully match the regex under RE2; lazy and eager masks agree. The
// differential tests run over both DFA modes (TokenIndexModes: eager, and
// lazy states, automaton/dfa.h).
#include "index/token_index.h"

#include <algorithm>
#include <ctime>
#include <atomic>
#include <random>
#include <set>
#include <thread>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "index/guide.h"
#include "index/random_walk.h"
#include "re2/re2.h"
#include "tests/index/test_util.h"
#include "tokenizer/loop_masks.h"

namespace maskd {
namespace {

// The bench regexes (outlines-core's write_mask_into and Outlines'
// logits-processor benchmarks) and a few more shapes.
const std::vector<std::string>& Regexes() {
  static const auto* r = new std::vector<std::string>{
      R"([a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)",
      R"(\+?[1-9][0-9]{7,14})",
      R"(([1-9]|0[1-9]|1[0-9]|2[0-9]|3[0-1])(\.|-|/)([1-9]|0[1-9]|1[0-2])(\.|-|/)([0-9][0-9]|19[0-9][0-9]|20[0-9][0-9])|([0-9][0-9]|19[0-9][0-9]|20[0-9][0-9])(\.|-|/)([1-9]|0[1-9]|1[0-2])(\.|-|/)([1-9]|0[1-9]|1[0-9]|2[0-9]|3[0-1]))",
      R"((?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?))",
      R"((https?:\/\/)?([\da-z\.-]+)\.([a-z\.]{2,6})([\/\w \.-]*)*\/?)",
      R"(\d{3}-\d{2}-\d{4})",
      R"([^Z]*)",
      R"(Z*)",
      R"re(\{"name": "[^"\\]{1,20}", "age": (0|[1-9][0-9]{0,2})\})re",
      R"((true|false|null|-?(0|[1-9][0-9]*)(\.[0-9]+)?))",
      R"(héllo (wörld|世界|🙂)+)",
      R"(.{0,12})",
  };
  return *r;
}

// JSON strings in several contexts: their content is a loop shared between
// states and indexes (tokenizer/loop_masks.h), entered from the opening quote.
// Random walks rarely finish them (strings go on).
const std::vector<std::string>& LoopRegexes() {
  static const auto* r = new std::vector<std::string>{
      R"re(\{"a": "(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*", "b": \[(?:"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"(?:, "(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*")*)?\]\})re",
      // An "other key" string that must not be "name" (open objects).
      R"re(\{"(?:name|(?:[^"n\\]|n(?:[^"a\\]|a(?:[^"m\\]|m(?:[^"e\\]|e[^"\\]))))[^"\\]*)": (?:true|false)\})re",
      R"(x[^"]*"[a-z]{2,}"[^"]*")",
      // Bounded strings: positions that move one step per character (chains).
      R"re(\{"s": "(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]){0,40}"\})re",
      R"([\s\S]{0,30}x)",
      R"(é{0,3}[a-z ]{0,40}\.)",
  };
  return *r;
}

// Regexes() then LoopRegexes().
std::vector<std::string> AllRegexes() {
  std::vector<std::string> all = Regexes();
  all.insert(all.end(), LoopRegexes().begin(), LoopRegexes().end());
  return all;
}

// The parameter of TokenIndexModes: how the DFA is built (automaton/dfa.h).
// Hybrid: lazy unless the whole build fits a few states, so the small
// regexes here come out eager and the larger ones lazy.
enum class DfaMode { kEager, kLazy, kHybrid };

class TokenIndexModes : public ::testing::TestWithParam<DfaMode> {
 protected:
  CompileOptions Options() const {
    CompileOptions o;
    o.lazy_dfa = GetParam() != DfaMode::kEager;
    if (GetParam() == DfaMode::kHybrid) o.dfa.eager_up_to_states = 24;
    return o;
  }
};

INSTANTIATE_TEST_SUITE_P(DfaModes, TokenIndexModes,
                         ::testing::Values(DfaMode::kEager, DfaMode::kLazy, DfaMode::kHybrid),
                         [](const ::testing::TestParamInfo<DfaMode>& info) {
                           return std::string(info.param == DfaMode::kEager  ? "EagerDfa"
                                              : info.param == DfaMode::kLazy ? "LazyDfa"
                                                                             : "HybridDfa");
                         });

bool BruteAllowed(const TokenIndex& index, Dfa::State s, uint32_t t) {
  const Vocabulary& v = index.vocabulary();
  if (v.is_eos(t)) return index.dfa().IsAccepting(s);
  if (!v.has_token(t) || v.is_special(t) || v.bytes(t).empty()) return false;
  return index.dfa().Walk(s, v.bytes(t)) != Dfa::kDead;
}

// Compares the masks of up to `max_states` states reachable through tokens
// (breadth-first from the start) with a brute-force walk of every token id.
void CheckAgainstBruteForce(std::shared_ptr<const TokenizerContext> context,
                            const std::string& regex, int max_states,
                            const CompileOptions& options) {
  const std::shared_ptr<const Vocabulary>& vocab = context->shared_vocabulary();
  auto index = CompileRegex(regex, context, options);
  ASSERT_TRUE(index.ok()) << regex << ": " << index.status();
  const TokenIndex& ix = **index;
  std::vector<uint32_t> mask(ix.num_words());
  std::vector<Dfa::State> queue = {ix.start()};
  std::set<Dfa::State> seen = {ix.start()};  // a lazy DFA's states grow
  for (size_t q = 0; q < queue.size() && static_cast<int>(q) < max_states; ++q) {
    Dfa::State s = queue[q];
    ASSERT_TRUE(ix.WriteMask(s, mask.data()).ok());
    uint32_t count = 0;
    std::mt19937 rng(s);
    std::vector<uint32_t> allowed;
    for (uint32_t t = 0; t < vocab->size(); ++t) {
      bool want = BruteAllowed(ix, s, t);
      bool got = (mask[t >> 5] >> (t & 31)) & 1;
      ASSERT_EQ(got, want) << "regex " << regex << " state " << s << " token " << t;
      ASSERT_EQ(ix.IsAllowed(s, t), want) << "token " << t;
      if (want) {
        ++count;
        if (!vocab->is_eos(t)) allowed.push_back(t);
      }
    }
    // Bits past the vocabulary width are never set.
    for (uint32_t t = vocab->size(); t < ix.num_words() * 32; ++t) {
      ASSERT_FALSE((mask[t >> 5] >> (t & 31)) & 1);
    }
    EXPECT_EQ(ix.CountAllowed(s), count);
    // Explore a few successors.
    std::shuffle(allowed.begin(), allowed.end(), rng);
    for (size_t i = 0; i < allowed.size() && i < 8; ++i) {
      Dfa::State t = ix.NextState(s, allowed[i]);
      ASSERT_NE(t, Dfa::kDead);
      if (seen.insert(t).second) queue.push_back(t);
    }
  }
}

TEST_P(TokenIndexModes, MasksEqualBruteForceOnBundledTokenizer) {
  for (const auto& regex : AllRegexes()) {
    CheckAgainstBruteForce(testing::BundledTokenizer(), regex, 12, Options());
  }
}

TEST_P(TokenIndexModes, MasksEqualBruteForceOnSharedTokenizers) {
  int checked = 0;
  for (const auto& name : testing::SharedTokenizerNames()) {
    auto context = testing::SharedTokenizer(name);
    if (!context) continue;
    ++checked;
    for (const auto& regex : AllRegexes()) {
      SCOPED_TRACE(name);
      CheckAgainstBruteForce(context, regex, testing::Scaled(4, 2), Options());
    }
  }
  if (checked == 0) GTEST_SKIP() << "../shared/tokenizers is absent";
  EXPECT_EQ(checked, 5);
}

TEST(TokenIndex, PaddingIdsAreNeverAllowed) {
  VocabularyOptions options;
  options.vocab_size = 151936;  // Qwen3 models pad logits to this width
  auto vocab = Vocabulary::Load(testing::BundledTokenizerPath(), options);
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  auto index = CompileRegex("[^Z]*", TokenizerContext::Create(*vocab));
  ASSERT_TRUE(index.ok());
  std::vector<uint32_t> mask((*index)->num_words());
  EXPECT_TRUE((*index)->WriteMask((*index)->start(), mask.data()).ok());
  uint32_t highest = 0;
  for (uint32_t t = 0; t < (*vocab)->size(); ++t) {
    if ((*vocab)->has_token(t)) highest = t;
  }
  ASSERT_LT(highest + 1, 151936u);
  for (uint32_t t = highest + 1; t < 151936; ++t) ASSERT_FALSE((mask[t >> 5] >> (t & 31)) & 1) << t;
  // Special tokens other than EOS are never allowed; EOS is (the start accepts "").
  for (uint32_t t = 0; t < (*vocab)->size(); ++t) {
    if ((*vocab)->is_special(t)) {
      EXPECT_EQ(((mask[t >> 5] >> (t & 31)) & 1) != 0, (*vocab)->is_eos(t)) << t;
    }
  }
}

TEST(TokenIndex, EagerAndLazyAgree) {
  auto context = testing::BundledTokenizer();
  for (const auto& regex : AllRegexes()) {
    CompileOptions eager;
    eager.eager = true;
    eager.threads = 2;
    auto a = CompileRegex(regex, context, eager);
    auto b = CompileRegex(regex, context);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_GT((*a)->num_computed_states(), 0u);
    std::vector<uint32_t> ma((*a)->num_words()), mb((*b)->num_words());
    for (Dfa::State s = 1; s < (*a)->dfa().num_states(); ++s) {
      EXPECT_TRUE((*a)->WriteMask(s, ma.data()).ok());
      EXPECT_TRUE((*b)->WriteMask(s, mb.data()).ok());
      ASSERT_EQ(ma, mb) << regex << " state " << s;
    }
  }
}

// Masks from shared loop parts and reference states equal those of one
// whole-trie walk per state, eagerly (successors come from the loops' end
// states) and lazily (in an order where references are computed on demand).
TEST(TokenIndex, SharedLoopsAgreeWithPlainWalks) {
  auto context = testing::BundledTokenizer();
  for (const auto& regex : AllRegexes()) {
    CompileOptions shared, plain;
    shared.eager = plain.eager = true;
    plain.index.share_loops = false;
    auto a = CompileRegex(regex, context, shared);
    auto b = CompileRegex(regex, context, plain);
    auto lazy = CompileRegex(regex, context);
    ASSERT_TRUE(a.ok() && b.ok() && lazy.ok());
    EXPECT_EQ((*a)->num_computed_states(), (*b)->num_computed_states()) << regex;
    std::vector<uint32_t> ma((*a)->num_words()), mb((*b)->num_words()), ml((*b)->num_words());
    for (Dfa::State s = 1; s < (*a)->dfa().num_states(); ++s) {
      EXPECT_TRUE((*a)->WriteMask(s, ma.data()).ok());
      EXPECT_TRUE((*b)->WriteMask(s, mb.data()).ok());
      EXPECT_TRUE((*lazy)->WriteMask(s, ml.data()).ok());
      ASSERT_EQ(ma, mb) << regex << " state " << s;
      ASSERT_EQ(ml, mb) << regex << " state " << s << " (lazy)";
      ASSERT_EQ((*a)->CountAllowed(s), (*b)->CountAllowed(s));
      ASSERT_EQ((*lazy)->CountAllowed(s), (*b)->CountAllowed(s));
    }
  }
}

// A budget keeps the masks kept below its bound, across the indexes that
// share it, and every mask (kept or not, reference states included) equals
// the unbounded index's; an eager build that does not fit fails cleanly.
TEST(TokenIndex, MaskBudgetBoundsKeptMasksAndMasksStayExact) {
  auto context = testing::BundledTokenizer();
  auto budget = std::make_shared<MaskBudget>(64 << 10);  // a few masks
  std::vector<std::shared_ptr<const TokenIndex>> bounded;
  uint32_t unkept_states = 0;
  for (const auto& regex : AllRegexes()) {
    CompileOptions o;
    o.index.budget = budget;
    auto b = CompileRegex(regex, context, o);
    auto free = CompileRegex(regex, context);
    ASSERT_TRUE(b.ok() && free.ok()) << regex;
    std::vector<uint32_t> mb((*b)->num_words()), mf((*b)->num_words());
    for (int round = 0; round < 2; ++round) {  // the second round: unkept masks again
      for (Dfa::State s = (*b)->dfa().num_states() - 1; s >= 1; --s) {
        EXPECT_TRUE((*b)->WriteMask(s, mb.data()).ok());
        EXPECT_TRUE((*free)->WriteMask(s, mf.data()).ok());
        ASSERT_EQ(mb, mf) << regex << " state " << s;
        ASSERT_EQ((*b)->CountAllowed(s), (*free)->CountAllowed(s));
        ASSERT_LE(budget->used(), budget->max_bytes());
      }
    }
    unkept_states += (*free)->num_computed_states() - (*b)->num_computed_states();
    bounded.push_back(*b);
  }
  EXPECT_GT(unkept_states, 0u);  // the budget did refuse masks
  EXPECT_GT(budget->refused(), 0u);
  const uint64_t used = budget->used();
  EXPECT_GT(used, 0u);
  bounded.clear();  // indexes give back what they charged
  EXPECT_EQ(budget->used(), 0u) << "was " << used;

  CompileOptions eager;
  eager.eager = true;
  eager.index.budget = std::make_shared<MaskBudget>(4 << 10);
  auto e = CompileRegex("[a-z]{1,40}", context, eager);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kResourceExhausted) << e.status();
  EXPECT_NE(e.status().message().find("mask budget"), std::string_view::npos) << e.status();
}

// The state after walking `text` from the start, through its bytes.
Dfa::State After(const TokenIndex& index, const std::string& text) {
  return index.dfa().Walk(index.start(), text);
}

// A string's content state takes its mask from its self-loop bytes and the
// per-vocabulary byte index: no loop memo, in any index, and the mask is the
// whole-trie walk's.
TEST(LoopMasks, StringContentNeedsNoMemo) {
  auto vocab = Vocabulary::Load(testing::BundledTokenizerPath());  // a fresh memo
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  auto context = TokenizerContext::Create(*vocab);
  const std::string str = R"re("(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*")re";
  auto first = CompileRegex("\\{\"a\": " + str + "\\}", context);
  auto second = CompileRegex("\\[(?:" + str + "(?:, " + str + ")*)?\\]", context);
  CompileOptions plain_options;
  plain_options.index.share_loops = false;
  auto plain = CompileRegex("\\[(?:" + str + "(?:, " + str + ")*)?\\]", context, plain_options);
  ASSERT_TRUE(first.ok() && second.ok() && plain.ok()) << first.status() << second.status();
  std::vector<uint32_t> mask((*first)->num_words()), want((*first)->num_words());
  const Dfa::State in_first = After(**first, "{\"a\": \"x");
  const Dfa::State in_second = After(**second, "[\"x\", \"y");
  ASSERT_NE(in_first, Dfa::kDead);
  ASSERT_NE(in_second, Dfa::kDead);
  EXPECT_TRUE((*first)->WriteMask(in_first, mask.data()).ok());
  EXPECT_TRUE((*second)->WriteMask(in_second, mask.data()).ok());
  EXPECT_TRUE((*plain)->WriteMask(in_second, want.data()).ok());
  EXPECT_EQ(mask, want);
  const LoopMasks::Stats st = context->loop_masks().stats();
  EXPECT_EQ(st.misses, 0u);
  EXPECT_EQ(st.loops, 0u);
  // Allowed there: text tokens without a quote, backslash or control byte
  // (escapes are checked by the brute-force tests), and tokens that close the
  // string and go on as the array allows.
  EXPECT_GT((*second)->CountAllowed(in_second), (*vocab)->num_tokens() / 2);
}

// Positions of a string with a maxLength are no loop: far from the end they
// are chains (every character moves one position on), near the end plain
// walks; exact at every position, with or without a free string's loop kept.
TEST(LoopMasks, BoundedStringsAreExact) {
  auto vocab = Vocabulary::Load(testing::BundledTokenizerPath());  // a fresh memo
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  auto context = TokenizerContext::Create(*vocab);
  const std::string chr = R"re((?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}))re";
  const std::string regex = "\\{\"a\": \"" + chr + "*\", \"b\": \"" + chr + "{0,40}\"\\}";
  auto shared = CompileRegex(regex, context);
  CompileOptions plain_options;
  plain_options.index.share_loops = false;
  auto plain = CompileRegex(regex, context, plain_options);
  ASSERT_TRUE(shared.ok() && plain.ok()) << shared.status();
  std::vector<uint32_t> ma((*shared)->num_words()), mb((*plain)->num_words());
  EXPECT_TRUE((*shared)->WriteMask(After(**shared, "{\"a\": \"x"), ma.data()).ok());
  std::string text = "{\"a\": \"x\", \"b\": \"";
  for (int i = 0; i <= 40; ++i) {
    const Dfa::State s = After(**shared, text);
    ASSERT_NE(s, Dfa::kDead) << text;
    EXPECT_TRUE((*shared)->WriteMask(s, ma.data()).ok());
    EXPECT_TRUE((*plain)->WriteMask(s, mb.data()).ok());
    ASSERT_EQ(ma, mb) << "after " << i << " characters";
    text += i % 3 ? "y" : "\xc3\xa9";  // 1- and 2-byte characters
  }
}

// A wide state's first mask in a fresh process (a fresh vocabulary: empty
// memos), computed by the shared path (self-loop split, chains, loops), is
// exactly the mask a direct whole-trie walk gives. What it costs is measured,
// not asserted: `maskd_coldpath --scratch-reps` and docs/benchmarks.md, "The
// cold path".
TEST(TokenIndex, FirstMaskOfWideStateInFreshProcessEqualsDirectWalk) {
  const std::string str = R"re("(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*")re";
  for (const std::string& regex : {std::string("[^Z]*"), std::string("[a-z0-9!#$%&'*+/=?^_`{|}~-]+@[a-z]+"),
                                   "x" + str, std::string("[\\s\\S]*y"),
                                   std::string("[\\s\\S]{0,100}")}) {
    std::vector<uint32_t> masks[2];
    for (bool share : {true, false}) {
      auto vocab = Vocabulary::Load(testing::BundledTokenizerPath());  // fresh memos
      ASSERT_TRUE(vocab.ok()) << vocab.status();
      auto context = TokenizerContext::Create(*vocab);
      CompileOptions options;
      options.index.share_loops = share;
      auto index = CompileRegex(regex, context, options);
      ASSERT_TRUE(index.ok()) << index.status();
      // A wide state: the start, or inside the string.
      Dfa::State s = (*index)->start();
      if (regex[0] == 'x') s = (*index)->dfa().Walk(s, "x\"a");
      std::vector<uint32_t>& mask = masks[share ? 0 : 1];
      mask.resize((*index)->num_words());
      EXPECT_TRUE((*index)->WriteMask(s, mask.data()).ok());
      EXPECT_GT((*index)->CountAllowed(s), (*vocab)->num_tokens() / 8) << regex;
    }
    EXPECT_EQ(masks[0], masks[1]) << regex;
  }
}

// Past the memo's bound, loops are computed and used but not kept.
TEST(LoopMasks, MemoBoundIsHonoured) {
  auto vocab = Vocabulary::Load(testing::BundledTokenizerPath());
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  auto context = TokenizerContext::Create(*vocab);
  context->loop_masks().set_max_bytes(1);  // room for one exit trie, no loop
  const std::string& regex = LoopRegexes()[0];
  auto a = CompileRegex(regex, context);
  CompileOptions plain;
  plain.index.share_loops = false;
  auto b = CompileRegex(regex, context, plain);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<uint32_t> ma((*a)->num_words()), mb((*b)->num_words());
  for (Dfa::State s = 1; s < (*a)->dfa().num_states(); ++s) {
    EXPECT_TRUE((*a)->WriteMask(s, ma.data()).ok());
    EXPECT_TRUE((*b)->WriteMask(s, mb.data()).ok());
    ASSERT_EQ(ma, mb) << "state " << s;
  }
  const LoopMasks::Stats st = context->loop_masks().stats();
  EXPECT_GT(st.misses, 0u);
  EXPECT_EQ(st.loops, 0u);
  EXPECT_EQ(st.exit_tries, 1u);
}

// Many threads computing and reading the masks of one lazy index (masks on
// first use; with LazyDfa, states too) at once see exactly the masks of an
// eagerly built one, along the same tokens.
TEST_P(TokenIndexModes, ConcurrentLazyComputationIsConsistent) {
  // A fresh vocabulary, so that the JSON regexes' loops are first computed
  // here, by racing threads, into one shared memo.
  auto loaded = Vocabulary::Load(testing::BundledTokenizerPath());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::shared_ptr<const TokenizerContext> context = TokenizerContext::Create(*loaded);
  // email (several states, large masks), then strings in JSON contexts.
  for (const std::string& regex : {Regexes()[0], LoopRegexes()[0], LoopRegexes()[1]}) {
    CompileOptions plain;
    plain.eager = true;
    plain.index.share_loops = false;
    auto reference = CompileRegex(regex, context, plain);
    auto lazy = CompileRegex(regex, context, Options());
    ASSERT_TRUE(reference.ok() && lazy.ok());
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        std::vector<uint32_t> a((*lazy)->num_words()), b((*lazy)->num_words());
        for (int i = 0; i < testing::Scaled(30, 8); ++i) {
          auto walk = RandomWalk(*lazy, 100 * t + i, 24);
          if (!walk.ok()) {
            mismatches++;
            return;
          }
          Guide g(*lazy), r(*reference);
          for (uint32_t tok : walk->tokens) {
            if (g.IsFinished()) break;
            if (!g.WriteMaskUnchecked(a.data()).ok()) mismatches++;
            if (!r.WriteMaskUnchecked(b.data()).ok()) mismatches++;
            if (a != b) mismatches++;
            if (!g.Advance(tok).ok() || !r.Advance(tok).ok()) mismatches++;
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(mismatches.load(), 0) << regex;
  }
}

// Threads stepping sessions over one lazy index whose DFA is large (so
// they race to build the same states and rows) write, step for step, the
// masks of the eager index along the same tokens. Two threads share each
// seed, so both build and read the same states at once.
TEST(TokenIndex, ThreadsBuildingOneLazyDfaSeeTheEagerMasks) {
  auto loaded = Vocabulary::Load(testing::BundledTokenizerPath());  // fresh memos
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::shared_ptr<const TokenizerContext> context = TokenizerContext::Create(*loaded);
  for (const std::string regex : {"[a-c ]*a[a-c ]{7}", ".{0,60}x", "(?:[a-z]+ ){0,30}[0-9]{2,4}"}) {
    CompileOptions lazy_options;
    lazy_options.lazy_dfa = true;
    auto eager = CompileRegex(regex, context);
    auto lazy = CompileRegex(regex, context, lazy_options);
    ASSERT_TRUE(eager.ok() && lazy.ok()) << regex;
    ASSERT_TRUE((*lazy)->dfa().lazy());
    const uint32_t states_at_compile = (*lazy)->dfa().num_states();
    std::atomic<int> mismatches{0}, steps{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        std::vector<uint32_t> a((*lazy)->num_words()), b((*lazy)->num_words());
        for (int i = 0; i < testing::Scaled(6, 2); ++i) {
          auto walk = RandomWalk(*eager, 31 * (t / 2) + i, 40);
          if (!walk.ok()) {
            mismatches++;
            return;
          }
          Guide g(*lazy), r(*eager);
          for (uint32_t tok : walk->tokens) {
            if (g.IsFinished()) break;
            if (!g.WriteMaskUnchecked(a.data()).ok()) mismatches++;
            (void)r.WriteMaskUnchecked(b.data());
            if (a != b) mismatches++;
            if (!g.Advance(tok).ok() || !r.Advance(tok).ok()) mismatches++;
            steps++;
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(mismatches.load(), 0) << regex;
    EXPECT_GT(steps.load(), 40) << regex;
    EXPECT_GT((*lazy)->dfa().num_states(), states_at_compile) << regex;
  }
}

// A lazy index whose DFA reaches max_states while computing a mask: the
// row comes back all zero with the state-limit error, the mask is not kept
// (the next call refuses again), and NextStateChecked and Precompute report
// the same error where a walk needs a state past the limit.
TEST(TokenIndex, LazyStateLimitRefusalsAreErrorsAndNotKept) {
  CompileOptions o;
  o.lazy_dfa = true;
  o.dfa.max_states = 8;
  auto index = CompileRegex("[a-c ]*a[a-c ]{12}", testing::BundledTokenizer(), o);
  ASSERT_TRUE(index.ok()) << index.status();
  const TokenIndex& ix = **index;
  ASSERT_TRUE(ix.dfa().lazy());
  std::vector<uint32_t> words(ix.num_words(), 0xFFFFFFFFu);
  const absl::Status refused = ix.WriteMask(ix.start(), words.data());
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(refused.message()).find("limit max_states"), std::string::npos) << refused;
  EXPECT_TRUE(std::all_of(words.begin(), words.end(), [](uint32_t w) { return w == 0; }));
  EXPECT_EQ(ix.num_computed_states(), 0u);
  EXPECT_EQ(ix.WriteMask(ix.start(), words.data()).code(), absl::StatusCode::kResourceExhausted);
  int checked_refusals = 0;
  for (uint32_t t = 0; t < ix.vocabulary().size(); ++t) {
    auto next = ix.NextStateChecked(ix.start(), t);
    if (!next.ok()) {
      EXPECT_EQ(next.status().code(), absl::StatusCode::kResourceExhausted);
      ++checked_refusals;
    }
  }
  EXPECT_GT(checked_refusals, 0);
  EXPECT_LE(ix.dfa().num_states(), 8u);
  EXPECT_EQ(ix.Precompute(1).code(), absl::StatusCode::kResourceExhausted);
}

TEST(TokenIndex, PrecomputeHonoursDeadlineAndCancel) {
  auto index = CompileRegex(Regexes()[0], testing::BundledTokenizer());
  ASSERT_TRUE(index.ok());
  EXPECT_EQ((*index)->Precompute(2, absl::Now() - absl::Seconds(1)).code(),
            absl::StatusCode::kDeadlineExceeded);
  std::atomic<bool> cancel{true};
  EXPECT_EQ((*index)->Precompute(1, absl::InfiniteFuture(), &cancel).code(),
            absl::StatusCode::kCancelled);
  EXPECT_TRUE((*index)->Precompute(2).ok());
}

TEST(TokenIndex, EmptyLanguageIsAnError) {
  auto index = CompileRegex("[^\\x00-\\x{10FFFF}]", testing::BundledTokenizer());
  ASSERT_FALSE(index.ok());
  EXPECT_EQ(index.status().code(), absl::StatusCode::kInvalidArgument);
}

// Random walks: every step's token was allowed (Advance checks it) and every
// finished text fully matches the regex under RE2, an independent matcher.
void CheckRandomWalks(std::shared_ptr<const TokenizerContext> context, int walks_per_regex,
                      const CompileOptions& options) {
  int finished = 0, total = 0;
  for (const auto& regex : AllRegexes()) {
    auto index = CompileRegex(regex, context, options);
    ASSERT_TRUE(index.ok());
    RE2 oracle(regex);
    ASSERT_TRUE(oracle.ok()) << regex;
    for (int i = 0; i < walks_per_regex; ++i) {
      auto walk = RandomWalk(*index, 1000 * i + 17, 48);
      ASSERT_TRUE(walk.ok()) << regex << ": " << walk.status();
      const bool loop_regex = std::find(LoopRegexes().begin(), LoopRegexes().end(), regex) !=
                              LoopRegexes().end();
      total += !loop_regex;
      if (walk->finished) {
        finished += !loop_regex;
        ASSERT_TRUE(RE2::FullMatch(walk->text, oracle)) << regex << " text: " << walk->text;
      }
      // Every prefix walked is still a prefix of the language.
      ASSERT_NE((*index)->dfa().Walk((*index)->start(), walk->text), Dfa::kDead);
    }
  }
  EXPECT_GT(finished, total * 8 / 10) << "most walks should reach EOS";
}

TEST_P(TokenIndexModes, RandomWalksMatchRe2OnBundledTokenizer) {
  CheckRandomWalks(testing::BundledTokenizer(), testing::Scaled(250, 40), Options());
}

TEST_P(TokenIndexModes, RandomWalksMatchRe2OnSharedTokenizers) {
  int checked = 0;
  for (const auto& name : testing::SharedTokenizerNames()) {
    auto context = testing::SharedTokenizer(name);
    if (!context) continue;
    if (context->vocabulary().eos_ids().empty()) continue;
    ++checked;
    SCOPED_TRACE(name);
    CheckRandomWalks(context, testing::Scaled(170, 20), Options());
  }
  if (checked == 0) GTEST_SKIP() << "../shared/tokenizers is absent";
}

}  // namespace
}  // namespace maskd
