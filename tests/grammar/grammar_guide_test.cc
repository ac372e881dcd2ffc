// The grammar token-mask engine (GrammarIndex + GrammarGuide) against two
// oracles on the bundled Qwen3 vocabulary (151,643 text tokens):
//   - brute force: every token's bytes pushed one by one on a copy of the
//     guide's parser (the definition of the mask, without the memo, the
//     completion look-ahead or the trie);
//   - the reference recognizer (earley.h, a separate implementation): for
//     sampled tokens, IsViablePrefix(text + token) must equal the mask bit.
// Random walks over the five example GBNF grammars, two Lark grammars with
// %ignore (tests/data/grammars), and an ambiguous left-recursive grammar; then the Guide API
// (advance, rollback, fork, EOS, errors, limits, forced continuations).
#include "grammar/grammar_guide.h"

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "automaton/interrupt.h"
#include "gmock/gmock.h"
#include "grammar/bnf_parser.h"
#include "grammar/earley.h"
#include "grammar/grammar_index.h"
#include "grammar/lark_parser.h"
#include "tokenizer/token_trie.h"
#include "gtest/gtest.h"
#include "tests/grammar/grammar_test_util.h"
#include "tests/index/test_util.h"

namespace maskd::grammar {
namespace {

using ::maskd::testing::Allowed;
using ::maskd::testing::Bit;
using ::maskd::testing::BruteForceMask;
using ::testing::HasSubstr;

// Ambiguous and left-recursive: s s splits every way.
constexpr char kAmbiguous[] = R"gbnf(
root ::= s "."
s ::= s s | "a" | "ab" | "b" | "ba"
)gbnf";

Grammar Parse(const std::string& name) {
  absl::StatusOr<Grammar> g =
      name == "ambiguous.gbnf" ? ParseGbnf(kAmbiguous) : testing::ParseGrammarFile(name);
  EXPECT_TRUE(g.ok()) << name << ": " << g.status();
  return g.ok() ? *g : Grammar();
}

std::shared_ptr<const GrammarIndex> MustIndex(const Grammar& g,
                                              const GrammarIndex::Options& options = {}) {
  auto index = GrammarIndex::Create(g, testing::BundledTokenizer(), options);
  EXPECT_TRUE(index.ok()) << index.status();
  return index.ok() ? *index : nullptr;
}

// Every terminal's DFA whole, or lazy from its start state
// (eager_up_to_states 0: even the smallest is built as walks reach it).
GrammarIndex::Options WithTerminals(TerminalMode mode, GrammarIndex::Options options = {}) {
  options.earley.terminal_mode = mode;
  options.earley.dfa_options.eager_up_to_states = 0;
  return options;
}

class GrammarWalkTest : public ::testing::TestWithParam<std::tuple<std::string, TerminalMode>> {};

TEST_P(GrammarWalkTest, MasksEqualBruteForceAndTheReferenceRecognizer) {
  const auto& [name, mode] = GetParam();
  const Grammar g = Parse(name);
  auto index = MustIndex(g, WithTerminals(mode));
  ASSERT_NE(index, nullptr);
  ASSERT_EQ(index->has_lazy_terminals(), mode == TerminalMode::kLazy);
  const uint32_t states_at_start = index->num_dfa_states();
  auto reference = EarleyRecognizer::Create(g);  // whole DFAs of its own
  ASSERT_TRUE(reference.ok()) << reference.status();
  const Vocabulary& vocab = index->vocab();
  const std::vector<uint32_t> order = testing::TextTokensByBytes(vocab);
  std::mt19937 rng(1234);
  // sql.lark's Earley sets are large (keywords that are also names): its
  // steps are the slowest.
  const bool heavy = name == "sql.lark";
  const int walks = heavy ? 1 : testing::Scaled(3, 1);
  const int steps = heavy ? testing::Scaled(12, 4) : testing::Scaled(25, 8);
  for (int walk = 0; walk < walks; ++walk) {
    auto guide = GrammarGuide::Create(index);
    ASSERT_TRUE(guide.ok()) << guide.status();
    std::string text;
    std::vector<uint32_t> mask(index->num_words());
    for (int step = 0; step < steps; ++step) {
      ASSERT_TRUE(guide->WriteMask(absl::MakeSpan(mask)).ok());
      auto parser = index->NewParser();
      ASSERT_TRUE(parser.ok());
      for (char c : text) ASSERT_TRUE(*parser->Push(static_cast<uint8_t>(c)));
      const std::vector<uint32_t> expected = BruteForceMask(*index, *parser, order);
      ASSERT_EQ(Allowed(mask), Allowed(expected))
          << name << " walk " << walk << " step " << step << " after \"" << text << "\"";
      // The reference recognizer on sampled tokens, allowed ones and any.
      const std::vector<uint32_t> allowed = Allowed(mask);
      for (int k = 0; k < 20; ++k) {
        uint32_t t = k % 2 == 0 && !allowed.empty()
                         ? allowed[rng() % allowed.size()]
                         : static_cast<uint32_t>(rng() % vocab.size());
        if (!vocab.has_token(t) || vocab.is_special(t)) continue;
        auto viable = reference->IsViablePrefix(text + std::string(vocab.bytes(t)));
        ASSERT_TRUE(viable.ok()) << viable.status();
        EXPECT_EQ(*viable, Bit(mask, t)) << "token " << t << " \"" << vocab.bytes(t)
                                          << "\" after \"" << text << "\"";
      }
      auto accepted = reference->Accepts(text);
      ASSERT_TRUE(accepted.ok());
      EXPECT_EQ(*accepted, guide->IsAccepting()) << "\"" << text << "\"";
      // Take a random allowed text token (EOS ends the walk).
      std::vector<uint32_t> text_tokens;
      for (uint32_t t : allowed) {
        if (!vocab.is_special(t)) text_tokens.push_back(t);
      }
      if (text_tokens.empty()) break;
      const uint32_t t = text_tokens[rng() % text_tokens.size()];
      ASSERT_TRUE(guide->Advance(t).ok()) << t;
      text += vocab.bytes(t);
    }
  }
  // Whole terminals were built at compile (lazy ones grow with walks, or
  // were numbered whole by the compile's look at their start rows).
  if (mode == TerminalMode::kWhole) EXPECT_EQ(index->num_dfa_states(), states_at_start);
}

INSTANTIATE_TEST_SUITE_P(Grammars, GrammarWalkTest,
                         ::testing::Combine(::testing::Values("json.gbnf", "arithmetic.gbnf",
                                                              "list.gbnf", "chess.gbnf", "c.gbnf",
                                                              "calls.lark", "sql.lark",
                                                              "ambiguous.gbnf"),
                                            ::testing::Values(TerminalMode::kWhole,
                                                              TerminalMode::kLazy)),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param);
                           for (char& c : name) {
                             if (c == '.') c = '_';
                           }
                           const bool lazy = std::get<1>(info.param) == TerminalMode::kLazy;
                           return name + (lazy ? "_lazy" : "_whole");
                         });

// Token ids of `text`'s pieces (each must be one token of the vocabulary).
uint32_t TokenOf(const Vocabulary& vocab, std::string_view bytes) {
  for (uint32_t t = 0; t < vocab.size(); ++t) {
    if (vocab.has_token(t) && !vocab.is_special(t) && vocab.bytes(t) == bytes) return t;
  }
  ADD_FAILURE() << "no token \"" << bytes << "\"";
  return 0;
}

TEST(GrammarGuideTest, AdvanceRollbackForkAndEos) {
  auto index = MustIndex(Parse("calls.lark"));
  ASSERT_NE(index, nullptr);
  const Vocabulary& vocab = index->vocab();
  ASSERT_FALSE(vocab.eos_ids().empty());
  const uint32_t eos = vocab.eos_ids()[0];
  auto guide = GrammarGuide::Create(index);
  ASSERT_TRUE(guide.ok());
  EXPECT_FALSE(guide->IsAccepting());
  EXPECT_FALSE(*guide->IsAllowed(eos));
  EXPECT_EQ(guide->Advance(eos).code(), absl::StatusCode::kFailedPrecondition);

  const uint32_t f = TokenOf(vocab, "f"), open = TokenOf(vocab, "("), x = TokenOf(vocab, "x"),
                 close = TokenOf(vocab, ")"), plus = TokenOf(vocab, " +");
  ASSERT_TRUE(guide->Advance(std::vector<uint32_t>{f, open, x}).ok());
  EXPECT_FALSE(guide->IsAccepting());
  GrammarGuide fork = guide->Fork();
  ASSERT_TRUE(guide->Advance(close).ok());
  EXPECT_TRUE(guide->IsAccepting());
  EXPECT_TRUE(*guide->IsAllowed(eos));
  EXPECT_FALSE(fork.IsAccepting());  // independent

  // A refused token leaves everything as it was.
  EXPECT_EQ(guide->Advance(open).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(guide->num_tokens(), 4u);
  EXPECT_EQ(guide->Advance(vocab.size()).code(), absl::StatusCode::kInvalidArgument);
  auto bad = guide->Advance(std::vector<uint32_t>{plus, close});
  EXPECT_EQ(bad.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("tokens[1]"));
  EXPECT_EQ(guide->num_tokens(), 4u);

  ASSERT_TRUE(guide->Advance(eos).ok());
  EXPECT_TRUE(guide->IsFinished());
  std::vector<uint32_t> mask(index->num_words() + 3, 0xFFFFFFFFu);
  ASSERT_TRUE(guide->WriteMask(absl::MakeSpan(mask)).ok());
  EXPECT_EQ(Allowed(mask), std::vector<uint32_t>(vocab.eos_ids().begin(), vocab.eos_ids().end()));
  EXPECT_EQ(guide->Advance(x).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(guide->Advance(eos).ok());  // EOS after EOS

  // Rolling back past the EOS reopens the sequence; rolling back to "f(x"
  // gives the fork's mask.
  ASSERT_TRUE(guide->Rollback(3).ok());
  EXPECT_FALSE(guide->IsFinished());
  std::vector<uint32_t> a(index->num_words()), b(index->num_words());
  ASSERT_TRUE(guide->WriteMask(absl::MakeSpan(a)).ok());
  ASSERT_TRUE(fork.WriteMask(absl::MakeSpan(b)).ok());
  EXPECT_EQ(a, b);
  EXPECT_EQ(guide->Rollback(4).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(guide->Rollback(3).ok());
  EXPECT_EQ(guide->num_bytes(), 0u);

  std::vector<uint32_t> small(index->num_words() - 1);
  EXPECT_EQ(guide->WriteMask(absl::MakeSpan(small)).code(), absl::StatusCode::kInvalidArgument);
}

TEST(GrammarGuideTest, ForcedContinuation) {
  auto g = ParseGbnf(R"gbnf(root ::= "{\"name\": \"" ("get" | "got") "\"}")gbnf");
  ASSERT_TRUE(g.ok()) << g.status();
  auto index = MustIndex(*g);
  auto guide = GrammarGuide::Create(index);
  ASSERT_TRUE(guide.ok());
  EXPECT_EQ(*guide->ForcedContinuation(), "{\"name\": \"g");
  EXPECT_EQ(*guide->ForcedContinuation(3), "{\"n");
  EXPECT_EQ(guide->num_bytes(), 0u);  // looking ahead changes nothing
}

// Budget mode on a grammar: every token kept leaves MinBytesToFinish() + 2
// within the budget and every token cleared does not (checked on a fork that
// takes the token); a sequence that always takes a random token of the budget
// mask ends with EOS within the budget, for budgets from the smallest
// possible; a budget below that never empties a mask.
TEST(GrammarGuideTest, TokenBudgetAlwaysEndsInTime) {
  auto index = MustIndex(Parse("json.gbnf"));
  ASSERT_NE(index, nullptr);
  const Vocabulary& vocab = index->vocab();
  auto start = GrammarGuide::Create(index);
  ASSERT_TRUE(start.ok());
  // The shortest JSON text is one byte ("0"); inside "[[[" it is three more.
  EXPECT_EQ(start->MinBytesToFinish(), 1u);
  {
    GrammarGuide g = start->Fork();
    ASSERT_TRUE(g.Advance(std::vector<uint32_t>{TokenOf(vocab, "[[")}).ok());
    ASSERT_TRUE(g.Advance(std::vector<uint32_t>{TokenOf(vocab, "[")}).ok());
    EXPECT_EQ(g.MinBytesToFinish(), 3u);
  }
  std::mt19937_64 rng(7);
  int checked_steps = 0;
  for (uint32_t budget : {3u, 4u, 8u, 20u}) {
    for (int run = 0; run < 6; ++run) {
      GrammarGuide g = start->Fork();
      uint32_t used = 0;
      while (!g.IsFinished()) {
        ASSERT_LT(used, budget) << "budget " << budget << " exceeded";
        const uint32_t left = budget - used;
        std::vector<uint32_t> full(index->num_words()), m(index->num_words());
        ASSERT_TRUE(g.WriteMask(absl::MakeSpan(full)).ok());
        m = full;
        ASSERT_TRUE(g.ApplyTokenBudget(left, absl::MakeSpan(m)).ok());
        const std::vector<uint32_t> kept = Allowed(m);
        ASSERT_FALSE(kept.empty());
        if (run == 0 && checked_steps < 8) {
          // Every token of the full mask against the definition.
          ++checked_steps;
          uint64_t best = ~uint64_t{0};
          bool any_in_budget = false;
          for (uint32_t t : Allowed(full)) {
            if (vocab.is_eos(t)) {
              ASSERT_TRUE(Bit(m, t));
              any_in_budget = true;
              continue;
            }
            GrammarGuide f = g.Fork();
            ASSERT_TRUE(f.Advance(t).ok());
            const uint64_t d = f.MinBytesToFinish();
            best = std::min(best, d);
            any_in_budget = any_in_budget || d + 2 <= left;
            if (d + 2 <= left) {
              ASSERT_TRUE(Bit(m, t)) << "token " << t << " cleared, d " << d;
            }
          }
          for (uint32_t t : kept) {
            if (vocab.is_eos(t)) continue;
            GrammarGuide f = g.Fork();
            ASSERT_TRUE(f.Advance(t).ok());
            const uint64_t d = f.MinBytesToFinish();
            if (any_in_budget) {
              ASSERT_LE(d + 2, left) << "token " << t << " kept over budget";
            } else {
              ASSERT_EQ(d, best) << "fallback kept token " << t;
            }
          }
        }
        ASSERT_TRUE(g.Advance(kept[rng() % kept.size()]).ok());
        ++used;
      }
      EXPECT_LE(used, budget);
    }
  }
  EXPECT_GT(checked_steps, 3);
}

TEST(GrammarGuideTest, MemoBudgetChangesNoMask) {
  const Grammar g = Parse("json.gbnf");
  auto kept = MustIndex(g);
  GrammarIndex::Options none;
  none.max_memo_bytes = 0;
  auto unkept = MustIndex(g, none);
  auto a = GrammarGuide::Create(kept);
  auto b = GrammarGuide::Create(unkept);
  ASSERT_TRUE(a.ok() && b.ok());
  const Vocabulary& vocab = kept->vocab();
  std::vector<uint32_t> ma(kept->num_words()), mb(kept->num_words());
  for (std::string_view piece : {"{\"", "key", "\":", " [", "1", ",", " true"}) {
    ASSERT_TRUE(a->WriteMask(absl::MakeSpan(ma)).ok());
    ASSERT_TRUE(b->WriteMask(absl::MakeSpan(mb)).ok());
    EXPECT_EQ(ma, mb) << "before " << piece;
    const uint32_t t = TokenOf(vocab, piece);
    ASSERT_TRUE(a->Advance(t).ok()) << piece;
    ASSERT_TRUE(b->Advance(t).ok()) << piece;
  }
  EXPECT_GT(kept->memo_bytes(), 0u);
  EXPECT_EQ(unkept->memo_bytes(), 0u);
}

// The memo entries filled from the byte index (ComputeSelfLoop: a string's
// content, a comment) equal those of a walk of the whole trie, for every
// terminal state of grammars with strings, comments and identifiers.
// Crossings::Build against a scan of each end's children's subtrees, with
// few ends and with more than kManyEnds (where it reads the token slots once
// instead): random ends over the bundled vocabulary's trie, random covered
// sets, and one covering every token but a few deep ones.
TEST(CrossingsTest, BuildEqualsTheSubtreeScan) {
  const TokenTrie& trie = testing::BundledTokenizer()->trie();
  const TokenTrie::Node* nodes = trie.nodes();
  const uint32_t* begin = trie.token_begin();
  const uint32_t* ids = trie.token_ids();
  const uint32_t num_words = static_cast<uint32_t>((testing::BundledTokenizer()->vocabulary().size() + 31) / 32);
  std::mt19937 rng(7);
  for (int round = 0; round < 12; ++round) {
    std::vector<uint32_t> covered(num_words, 0), never(num_words, 0);
    for (uint32_t& w : covered) w = round % 3 == 0 ? 0xFFFFFFFFu : static_cast<uint32_t>(rng());
    if (round % 3 == 0) {  // all covered but a few tokens
      for (int k = 0; k < 20; ++k) {
        const uint32_t t = ids[rng() % trie.num_tokens()];
        covered[t >> 5] &= ~(1u << (t & 31));
      }
    }
    for (uint32_t& w : never) w = static_cast<uint32_t>(rng()) & static_cast<uint32_t>(rng());
    const size_t num_ends = round % 2 == 0 ? 40 : Crossings::kManyEnds * 20;
    std::vector<uint32_t> ends;
    for (size_t k = 0; k < num_ends; ++k) ends.push_back(1 + rng() % (trie.num_nodes() - 1));
    Crossings got;
    got.Build(trie, ends, covered.data(), never.data());
    std::sort(ends.begin(), ends.end());
    ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
    std::vector<uint32_t> want;
    for (uint32_t e : ends) {
      for (uint32_t c = e + 1; c < nodes[e].next; c = nodes[c].next) {
        bool open = false;
        for (uint32_t k = begin[c]; k < begin[nodes[c].next] && !open; ++k) {
          const uint32_t t = ids[k];
          open = ((covered[t >> 5] | never[t >> 5]) >> (t & 31) & 1) == 0;
        }
        if (open) want.push_back(c);
      }
    }
    std::vector<uint32_t> have = got.crossings;
    std::sort(want.begin(), want.end());
    std::sort(have.begin(), have.end());
    EXPECT_EQ(have, want) << "round " << round;
    if (!want.empty()) {
      ASSERT_EQ(got.crossing_begin.size(), 257u);
      for (int x = 0; x < 256; ++x) {
        for (uint32_t i = got.crossing_begin[x]; i < got.crossing_begin[x + 1]; ++i) {
          EXPECT_EQ(nodes[got.crossings[i]].byte, x);
        }
      }
    }
  }
}

// Free text that may stop at any byte (an accepting state that loops on
// most bytes): a structural tag's text before its trigger, a comment to the
// end of a line, bytes that kill the text (a control byte; tokens of
// malformed UTF-8 die inside any character-level loop).
constexpr char kFreeTextLark[] = R"lark(
start: TEXT? (CALL TEXT?)*
TEXT: /[^<\x00-\x08]+/
CALL: /<f=[a-z]+>/ COMMENT?
COMMENT: /#[^\n]*\n/
)lark";

TEST(GrammarGuideTest, SelfLoopEntriesEqualTrieWalks) {
  size_t shortcut = 0, accepting_shortcut = 0, near_shortcut = 0;
  for (const char* name : {"json.gbnf", "c.gbnf", "calls.lark", "sql.lark", "free_text"}) {
    absl::StatusOr<Grammar> free_text = ParseLark(kFreeTextLark);
    ASSERT_TRUE(free_text.ok()) << free_text.status();
    const Grammar g = std::string(name) == "free_text" ? *free_text : Parse(name);
    auto fast = MustIndex(g);
    GrammarIndex::Options walk_options;
    walk_options.self_loop_entries = false;
    auto walk = MustIndex(g, walk_options);
    ASSERT_TRUE(fast != nullptr && walk != nullptr);
    ASSERT_EQ(fast->grammar()->num_terminals(), walk->grammar()->num_terminals());
    MaskScratch scratch;
    const uint32_t nw = fast->num_words();
    for (uint32_t t = 0; t < fast->grammar()->num_terminals(); ++t) {
      const Dfa& dfa = fast->grammar()->dfa(t);
      for (uint32_t q = 1; q < dfa.num_states(); ++q) {
        TerminalStateTokens direct;
        bool used = fast->ComputeSelfLoop(t, q, &direct);
        shortcut += used;
        accepting_shortcut += used && dfa.IsAccepting(q);
        if (!used) {
          used = fast->ComputeNearLoop(t, q, scratch, &direct);
          near_shortcut += used;
        }
        const TerminalStateTokens& a = fast->Tokens(t, q, scratch);
        const TerminalStateTokens& b = walk->Tokens(t, q, scratch);
        std::vector<uint32_t> wa(nw, 0), wb(nw, 0), wd(nw, 0);
        a.inside.MarkInto(wa.data(), nw);
        b.inside.MarkInto(wb.data(), nw);
        ASSERT_EQ(Allowed(wa), Allowed(wb)) << name << " terminal " << t << " state " << q;
        EXPECT_EQ(a.crossings.crossings, b.crossings.crossings) << name << " " << t << " " << q;
        EXPECT_EQ(a.crossings.crossing_begin, b.crossings.crossing_begin) << name << " " << t;
        if (used) {
          direct.inside.MarkInto(wd.data(), nw);
          EXPECT_EQ(wd, wb) << name << " terminal " << t << " state " << q;  // against the walk
          EXPECT_EQ(direct.crossings.crossings, b.crossings.crossings) << name << " " << t;
          EXPECT_EQ(direct.crossings.crossing_begin, b.crossings.crossing_begin) << name << " " << t;
        }
      }
    }
  }
  EXPECT_GT(shortcut, 0u);            // a string's content at least
  EXPECT_GT(accepting_shortcut, 0u);  // the free text and the comment
  EXPECT_GT(near_shortcut, 0u);       // the free text after '<', a C comment after '*'
}

TEST(GrammarGuideTest, ChartLimitIsResourceExhaustedAndChangesNothing) {
  GrammarIndex::Options options;
  options.earley.max_chart_items = 400;
  auto index = MustIndex(Parse("json.gbnf"), options);
  auto guide = GrammarGuide::Create(index);
  ASSERT_TRUE(guide.ok());
  const uint32_t open = TokenOf(index->vocab(), "[");
  absl::Status s;
  size_t advanced = 0;
  while ((s = guide->Advance(open)).ok()) ++advanced;
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_chart_items"));
  EXPECT_EQ(guide->num_tokens(), advanced);
  EXPECT_GT(advanced, 0u);
  ASSERT_TRUE(guide->Rollback(1).ok());  // room again after a rollback
  EXPECT_TRUE(guide->Advance(open).ok());
}

// A text token of at least `min_bytes` bytes, all lowercase ASCII letters.
uint32_t LowercaseTokenOfAtLeast(const Vocabulary& vocab, size_t min_bytes) {
  for (uint32_t t = 0; t < vocab.size(); ++t) {
    if (!vocab.has_token(t) || vocab.is_special(t)) continue;
    const std::string_view b = vocab.bytes(t);
    if (b.size() >= min_bytes && b.find_first_not_of("abcdefghijklmnopqrstuvwxyz") == b.npos) {
      return t;
    }
  }
  ADD_FAILURE() << "no lowercase token of " << min_bytes << " bytes";
  return 0;
}

// Issue #26 (1): a lazy terminal DFA builds its states as walks reach them,
// max_states bounding them there. A walk the limit refuses never reads as a
// rejected token: the mask and the advance fail with ResourceExhausted, the
// guide unchanged, and the memo keeps nothing the refusal cut short. Where
// the states fit, the masks are the whole DFA's.
TEST(GrammarGuideTest, LazyTerminalStateLimitIsResourceExhaustedAndChangesNothing) {
  // One state per letter read: 42 states whole, the dead one included.
  absl::StatusOr<Grammar> g = ParseLark("start: /[a-z]{0,40}!/\n");
  ASSERT_TRUE(g.ok()) << g.status();
  GrammarIndex::Options small = WithTerminals(TerminalMode::kLazy);
  small.earley.dfa_options.max_states = 12;
  GrammarIndex::Options whole_small = WithTerminals(TerminalMode::kWhole, small);
  auto refused = GrammarIndex::Create(*g, testing::BundledTokenizer(), whole_small);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();

  auto index = MustIndex(*g, small);
  ASSERT_NE(index, nullptr);
  auto guide = GrammarGuide::Create(index);
  ASSERT_TRUE(guide.ok()) << guide.status();
  std::vector<uint32_t> mask(index->num_words());
  absl::Status s = guide->WriteMask(absl::MakeSpan(mask));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_states"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("reached while walking"));
  EXPECT_EQ(index->memo_bytes(), 0u);  // nothing cut short was kept
  EXPECT_LE(index->num_dfa_states(), 12u);

  const Vocabulary& vocab = index->vocab();
  const uint32_t long_word = LowercaseTokenOfAtLeast(vocab, 13);
  s = guide->Advance(long_word);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(guide->num_tokens(), 0u);
  EXPECT_EQ(guide->num_bytes(), 0u);
  const uint32_t a = TokenOf(vocab, "a");
  ASSERT_TRUE(guide->Advance(a).ok());  // a state within the limit
  EXPECT_EQ(guide->num_bytes(), 1u);

  // Room for every state: the lazy masks are the whole DFA's.
  auto lazy = MustIndex(*g, WithTerminals(TerminalMode::kLazy));
  auto whole = MustIndex(*g, WithTerminals(TerminalMode::kWhole));
  ASSERT_TRUE(lazy != nullptr && whole != nullptr);
  const size_t lazy_bytes = lazy->MemoryBytes() - lazy->memo_bytes();
  const uint32_t lazy_states = lazy->num_dfa_states();
  auto lazy_guide = GrammarGuide::Create(lazy);
  auto whole_guide = GrammarGuide::Create(whole);
  ASSERT_TRUE(lazy_guide.ok() && whole_guide.ok());
  std::vector<uint32_t> want(whole->num_words());
  for (uint32_t t : {long_word, a, long_word}) {
    ASSERT_TRUE(whole_guide->WriteMask(absl::MakeSpan(want)).ok());
    ASSERT_TRUE(lazy_guide->WriteMask(absl::MakeSpan(mask)).ok());
    EXPECT_EQ(mask, want);
    ASSERT_TRUE(whole_guide->Advance(t).ok());
    ASSERT_TRUE(lazy_guide->Advance(t).ok());
  }
  // What the walks built is counted and charged (the index cache re-reads
  // it).
  EXPECT_GT(lazy->num_dfa_states(), lazy_states);
  EXPECT_GT(lazy->MemoryBytes() - lazy->memo_bytes(), lazy_bytes);
}

// Issue #26 (1): sessions on several threads over one index of lazy
// terminals build its states and memo entries concurrently; each thread's
// masks along its own walk equal a whole-DFA index's.
TEST(GrammarGuideTest, ConcurrentGuidesOverLazyTerminalsEqualWholeOnes) {
  const Grammar g = Parse("json.gbnf");
  auto lazy = MustIndex(g, WithTerminals(TerminalMode::kLazy));
  auto whole = MustIndex(g, WithTerminals(TerminalMode::kWhole));
  ASSERT_TRUE(lazy != nullptr && whole != nullptr);
  constexpr int kThreads = 4;
  const int steps = testing::Scaled(30, 10);
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      std::mt19937 rng(100 + k);
      auto a = GrammarGuide::Create(lazy);
      auto b = GrammarGuide::Create(whole);
      if (!a.ok() || !b.ok()) {
        failures[k] = "create";
        return;
      }
      std::vector<uint32_t> got(lazy->num_words()), want(whole->num_words());
      for (int step = 0; step < steps; ++step) {
        if (!a->WriteMask(absl::MakeSpan(got)).ok() || !b->WriteMask(absl::MakeSpan(want)).ok()) {
          failures[k] = absl::StrCat("mask failed at step ", step);
          return;
        }
        if (got != want) {
          failures[k] = absl::StrCat("masks differ at step ", step);
          return;
        }
        std::vector<uint32_t> text;
        for (uint32_t t : Allowed(want)) {
          if (!lazy->vocab().is_special(t)) text.push_back(t);
        }
        if (text.empty()) return;
        const uint32_t t = text[rng() % text.size()];
        if (!a->Advance(t).ok() || !b->Advance(t).ok()) {
          failures[k] = absl::StrCat("advance failed at step ", step);
          return;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int k = 0; k < kThreads; ++k) EXPECT_EQ(failures[k], "") << "thread " << k;
}

// Issue #24 (1): an ambiguous grammar of two short rules costs seconds of
// CPU per mask (one Earley set of it, millions of steps, while max_mask_work
// counts sets). The Lark rule that concatenates itself, over any byte.
constexpr char kSelfConcatLark[] = "start: start start | /./\n";
constexpr int kSelfConcatTokens = 6;  // "a" tokens before the measured mask

// The guide over `index` after kSelfConcatTokens "a" tokens.
GrammarGuide SelfConcatGuide(std::shared_ptr<const GrammarIndex> index) {
  auto guide = GrammarGuide::Create(index);
  EXPECT_TRUE(guide.ok()) << guide.status();
  const uint32_t a = TokenOf(index->vocab(), "a");
  for (int i = 0; i < kSelfConcatTokens; ++i) EXPECT_TRUE(guide->Advance(a).ok());
  return *std::move(guide);
}

// max_parser_steps bounds each call in parser steps: the mask past it is
// RESOURCE_EXHAUSTED naming the limit and changes nothing (the guide masks
// under a larger bound as before); an advance past it is refused whole.
TEST(GrammarGuideTest, ParserStepLimitBoundsEachCallAndChangesNothing) {
  absl::StatusOr<Grammar> g = ParseLark(kSelfConcatLark);
  ASSERT_TRUE(g.ok()) << g.status();
  auto free_index = MustIndex(*g);
  GrammarGuide free = SelfConcatGuide(free_index);
  std::vector<uint32_t> want(free_index->num_words());
  ASSERT_TRUE(free.WriteMask(absl::MakeSpan(want)).ok());
  const size_t mask_steps = free.parser_steps();
  ASSERT_GT(mask_steps, size_t{1} << 20) << "the mask is not expensive: the test shows nothing";
  EXPECT_EQ(free_index->options().max_parser_steps, size_t{1} << 26);
  // The mask after one token costs fewer steps: the bound lies between.
  GrammarGuide short_free = free.Fork();
  ASSERT_TRUE(short_free.Rollback(kSelfConcatTokens - 1).ok());
  ASSERT_TRUE(short_free.WriteMask(absl::MakeSpan(want)).ok());
  const size_t short_steps = short_free.parser_steps();
  ASSERT_LT(short_steps, mask_steps);

  GrammarIndex::Options options;
  options.max_parser_steps = (short_steps + mask_steps) / 2;
  auto index = MustIndex(*g, options);
  GrammarGuide bounded = SelfConcatGuide(index);
  ASSERT_EQ(bounded.num_tokens(), static_cast<size_t>(kSelfConcatTokens));
  std::vector<uint32_t> mask(index->num_words(), 7);
  absl::Status s = bounded.WriteMask(absl::MakeSpan(mask));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_parser_steps"));
  EXPECT_EQ(bounded.parser_steps(), options.max_parser_steps + 1);
  // Unchanged and usable: the same tokens and state; rolled back to one
  // token, where a mask is cheaper, the same mask as without the bound.
  EXPECT_EQ(bounded.num_tokens(), static_cast<size_t>(kSelfConcatTokens));
  EXPECT_EQ(bounded.num_bytes(), free.num_bytes());
  EXPECT_EQ(bounded.IsAccepting(), free.IsAccepting());
  ASSERT_TRUE(bounded.Rollback(kSelfConcatTokens - 1).ok());
  s = bounded.WriteMask(absl::MakeSpan(mask));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(mask, want);

  // A bound below one advance's steps refuses the advance, all of it.
  options.max_parser_steps = 50;
  auto tiny = MustIndex(*g, options);
  auto fresh = GrammarGuide::Create(tiny);
  ASSERT_TRUE(fresh.ok());
  const uint32_t a = TokenOf(tiny->vocab(), "a");
  std::vector<uint32_t> many(kSelfConcatTokens, a);
  s = fresh->Advance(absl::MakeConstSpan(many));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_parser_steps"));
  EXPECT_EQ(fresh->num_tokens(), 0u);
}

// Issue #24 (1b): an Interrupt stops a call that has become unwanted with its
// status, and the guide is as before the call; without it the call finishes.
TEST(GrammarGuideTest, InterruptStopsACallAndChangesNothing) {
  absl::StatusOr<Grammar> g = ParseLark(kSelfConcatLark);
  ASSERT_TRUE(g.ok()) << g.status();
  auto index = MustIndex(*g);
  GrammarGuide guide = SelfConcatGuide(index);
  std::vector<uint32_t> want(index->num_words()), mask(index->num_words());
  {
    GrammarGuide copy = guide.Fork();
    ASSERT_TRUE(copy.WriteMask(absl::MakeSpan(want)).ok());
  }
  FlagInterrupt cancel;
  cancel.Cancel();
  guide.SetInterrupt(&cancel);
  absl::Status s = guide.WriteMask(absl::MakeSpan(mask));
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_LE(guide.parser_steps(), EarleyParser::kInterruptPollSteps);
  FlagInterrupt late(absl::Now() - absl::Seconds(1));
  guide.SetInterrupt(&late);
  s = guide.WriteMask(absl::MakeSpan(mask));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_EQ(guide.num_tokens(), static_cast<size_t>(kSelfConcatTokens));
  guide.SetInterrupt(nullptr);
  ASSERT_TRUE(guide.WriteMask(absl::MakeSpan(mask)).ok());
  EXPECT_EQ(mask, want);
}

}  // namespace
}  // namespace maskd::grammar
