// EarleyParser::MinBytesToFinish against a search over byte extensions, on
// random grammars and after Pop and Push.
#include "grammar/earley.h"

#include <bitset>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "automaton/dfa.h"
#include "gmock/gmock.h"
#include "grammar/bnf_parser.h"
#include "grammar/compiled_grammar.h"
#include "grammar/earley_parser.h"
#include "grammar/grammar.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/grammar/grammar_test_util.h"
#include "tests/grammar/earley_test_util.h"

namespace maskd::grammar {
namespace {

using ::maskd::testing::ReadGrammar;
using ::testing::HasSubstr;
using ::maskd::grammar::earley_test::Quoted;
using ::maskd::grammar::earley_test::Builder;
using ::maskd::grammar::earley_test::T;
using ::maskd::grammar::earley_test::R;
using ::maskd::grammar::earley_test::AllStrings;
using ::maskd::grammar::earley_test::RandomGrammar;

// --- EarleyParser::MinBytesToFinish against a search.

// Whether some `d` more bytes (from those Push takes) make `p` accept; `p`
// ends as it began.
bool FinishesIn(EarleyParser& p, size_t d) {
  if (d == 0) return p.IsAccepting();
  const std::bitset<256> next = p.NextBytes();
  for (int b = 0; b < 256; ++b) {
    if (!next[b]) continue;
    auto pushed = p.Push(static_cast<uint8_t>(b));
    EXPECT_TRUE(pushed.ok()) << pushed.status();
    if (!pushed.ok() || !*pushed) continue;
    const bool found = FinishesIn(p, d - 1);
    p.Pop();
    if (found) return true;
  }
  return false;
}

// The fewest bytes that make `p` accept, by iterative deepening up to
// `max_depth`; max_depth + 1 when there is none that short.
uint64_t ShortestFinish(EarleyParser& p, size_t max_depth) {
  for (size_t d = 0; d <= max_depth; ++d) {
    if (FinishesIn(p, d)) return d;
  }
  return max_depth + 1;
}

EarleyParser MustParser(const Grammar& g) {
  auto compiled = CompiledGrammar::Create(g);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  auto parser = EarleyParser::Create(*compiled);
  EXPECT_TRUE(parser.ok()) << parser.status();
  return *std::move(parser);
}

// Pushes `text`; false when a byte is refused (the parser keeps what it took).
bool PushAll(EarleyParser& p, std::string_view text) {
  for (char c : text) {
    auto pushed = p.Push(static_cast<uint8_t>(c));
    EXPECT_TRUE(pushed.ok()) << pushed.status();
    if (!pushed.ok() || !*pushed) return false;
  }
  return true;
}

TEST(EarleyParser, MinBytesToFinishMatchesSearchOnRandomGrammars) {
  std::mt19937 rng(2026);
  constexpr size_t kDepth = 6;
  int grammars = 0, checked = 0, positive = 0, deep = 0;
  while (grammars < 150) {
    Grammar g = RandomGrammar(rng);
    if (!Normalize(&g).ok()) continue;
    ++grammars;
    const EarleyParser start = MustParser(g);
    for (const std::string& prefix : AllStrings("abc", 4)) {
      EarleyParser p = start;
      if (!PushAll(p, prefix)) continue;
      const uint64_t want = ShortestFinish(p, kDepth);
      const uint64_t got = p.MinBytesToFinish();
      if (want <= kDepth) {
        ASSERT_EQ(got, want) << "after " << Quoted(prefix) << "\n" << ToText(g);
      } else {
        ASSERT_GT(got, kDepth) << "after " << Quoted(prefix) << "\n" << ToText(g);
      }
      ++checked;
      positive += want > 0;
      deep += want > 1;
    }
  }
  EXPECT_GT(checked, 2000);
  EXPECT_GT(positive, checked / 4);
  EXPECT_GT(deep, checked / 20);
}

// The memo follows Pop: values after popping and pushing other bytes equal
// those of a parser that never saw the popped ones.
TEST(EarleyParser, MinBytesToFinishAfterPopAndPush) {
  Builder b;
  uint32_t open = b.T("\\("), close = b.T("\\)"), word = b.T("abcdef"), ws = b.T(" +");
  b.g.ignore.push_back(ws);
  uint32_t s = b.R("S"), item = b.R("I");
  b.Alt(s, {R(item), R(s)});  // right recursive
  b.Alt(s, {R(item)});
  b.Alt(item, {T(open), R(s), T(close)});
  b.Alt(item, {T(word)});
  ASSERT_TRUE(Normalize(&b.g).ok());
  EarleyParser p = MustParser(b.g);
  EXPECT_EQ(p.MinBytesToFinish(), 6u);  // "abcdef": every "(" S ")" holds an item too
  ASSERT_TRUE(PushAll(p, "((ab"));
  EXPECT_EQ(p.MinBytesToFinish(), 4u + 2u);  // "cdef" then "))"
  const size_t mark = p.num_sets();
  ASSERT_TRUE(PushAll(p, "cdef ("));
  EXPECT_EQ(p.MinBytesToFinish(), 6u + 1u + 2u);  // "abcdef" ")" then "))"
  p.PopTo(mark - 2);  // back to "(("
  ASSERT_TRUE(PushAll(p, "  ("));
  EarleyParser fresh = MustParser(b.g);
  ASSERT_TRUE(PushAll(fresh, "((  ("));
  EXPECT_EQ(p.MinBytesToFinish(), fresh.MinBytesToFinish());
  EXPECT_EQ(p.MinBytesToFinish(), ShortestFinish(fresh, 12));
}

}  // namespace
}  // namespace maskd::grammar
