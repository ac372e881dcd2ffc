// The reference Earley recognizer: accept/reject cases for the five example
// grammars, and its semantics in detail (%ignore, nullable rules and
// terminals, ambiguity, the item cap, validation, dead states, deep nesting,
// the next bytes).
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
using ::maskd::grammar::earley_test::MustCreate;
using ::maskd::grammar::earley_test::FromGbnfFile;
using ::maskd::grammar::earley_test::Accepts;
using ::maskd::grammar::earley_test::Viable;
using ::maskd::grammar::earley_test::Quoted;
using ::maskd::grammar::earley_test::Builder;
using ::maskd::grammar::earley_test::T;
using ::maskd::grammar::earley_test::R;
using ::maskd::grammar::earley_test::SpanOracle;
using ::maskd::grammar::earley_test::AllStrings;

// --- The example grammars.

TEST(Earley, JsonExamples) {
  auto r = FromGbnfFile("json.gbnf");
  for (const char* yes :
       {"{}", "[]", " 42 ", "-0.5e+10", "\"s\"", "true", "null",
        "{\"a\": [1, 2.5e-3, true, null, \"x\\u00e9\\ud83d\\ude00\"], \"b\": {}}",
        "[\n\t[],\r\n{\"\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}]", "\"\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80\x7F\""}) {
    EXPECT_TRUE(Accepts(r, yes)) << yes;
  }
  for (const char* no : {"", "{\"a\" 1}", "[1,]", "01", "\"\\x\"", "{'a': 1}", "\"\\ud800\"",
                         "\"\\udc00\"", "1.", "-", ".5", "[1 2]", "\"\x01\"", "\"\xC3\"",
                         "\"\xED\xA0\x80\"", "{\"a\":1,}", "tru", "nul", "[", "\"abc"}) {
    EXPECT_FALSE(Accepts(r, no)) << Quoted(no);
  }
  EXPECT_TRUE(Viable(r, "{\"a\": [1, 2"));
  EXPECT_TRUE(Viable(r, "\"\\ud83d"));
  EXPECT_FALSE(Viable(r, "{\"a\": [1, 2}"));
  EXPECT_FALSE(Viable(r, "\"\\ud83d\\u0041"));
}

TEST(Earley, ArithmeticExamples) {
  auto r = FromGbnfFile("arithmetic.gbnf");
  for (const char* yes : {"1+2=3\n", "(a +b)*c = 10\n", "x=y\n1=1\n", "( x1_ ) /7 = q\n"}) {
    EXPECT_TRUE(Accepts(r, yes)) << Quoted(yes);
  }
  for (const char* no : {"1+2=3", "=3\n", "1++2=3\n", "1 + 2=3\n", "A=1\n", "(1=1\n", ""}) {
    EXPECT_FALSE(Accepts(r, no)) << Quoted(no);
  }
}

TEST(Earley, ListExamples) {
  auto r = FromGbnfFile("list.gbnf");
  for (const char* yes : {"- milk\n", "- milk\n- eggs\n", "- caf\xC3\xA9 \xE2\x98\x95\n"}) {
    EXPECT_TRUE(Accepts(r, yes)) << Quoted(yes);
  }
  for (const char* no : {"", "- \n", "milk\n", "- a\xE2\x80\xA8" "b\n", "- a\rb\n", "- a",
                         "- a\n\n"}) {
    EXPECT_FALSE(Accepts(r, no)) << Quoted(no);
  }
}

TEST(Earley, ChessExamples) {
  auto r = FromGbnfFile("chess.gbnf");
  for (const char* yes : {"1. e4 e5\n2. Nf3 Nc6\n", "1. d4 d5\n2. O-O-O Qxd8+\n12. e8=Q# exd5\n",
                          "1. e4 e5\n2. Nbd2 R1e7\n"}) {
    EXPECT_TRUE(Accepts(r, yes)) << Quoted(yes);
  }
  for (const char* no : {"1. e4 e5\n", "1. e9 e5\n2. a3 a6\n", "2. e4 e5\n3. a3 a6\n",
                         "1. e4 e5\n0. a3 a6\n", "1. e4 e5\n2. Pe4 a6\n", "1. e4  e5\n2. a3 a6\n"}) {
    EXPECT_FALSE(Accepts(r, no)) << Quoted(no);
  }
}

TEST(Earley, CExamples) {
  auto r = FromGbnfFile("c.gbnf");
  for (const char* yes :
       {"", "int main(){return 0;}", "int main(){x = 1;while(x<10){x = x+1;}return x;}",
        "float f(int a){// hi\n}char c(){/* c */}",
        "int g(){if(a==b){f (1,\n2);}else{return -( x )*3;}for(int i = 0; i<n; i = i+1){}}"}) {
    EXPECT_TRUE(Accepts(r, yes)) << Quoted(yes);
  }
  for (const char* no : {"int main(){return 0}", "main(){}", "int main(){x=1;}",
                         "int main(){/* unterminated }", "intmain(){}",
                         "int main(){x = (y);}"}) {
    EXPECT_FALSE(Accepts(r, no)) << Quoted(no);
  }
}

// --- Semantics in detail.

TEST(Earley, IgnoreBetweenAndAroundSymbols) {
  Builder b;
  uint32_t num = b.T("[0-9]+"), plus = b.T("\\+"), ws = b.T("[ \\t]+");
  b.g.ignore.push_back(ws);
  uint32_t sum = b.R("sum");
  b.Alt(sum, {R(sum), T(plus), T(num)});  // left recursive
  b.Alt(sum, {T(num)});
  auto r = MustCreate(b.g);
  for (const char* yes : {"1", " 1 ", "1+2", "1 + 2\t+ 3 ", "  12+3"}) EXPECT_TRUE(Accepts(r, yes)) << yes;
  // Ignored strings never split a terminal's match in two symbols that
  // the grammar does not have; "1 2" would need NUM NUM.
  for (const char* no : {"", " ", "1 2", "1+", "+1", "1++2"}) EXPECT_FALSE(Accepts(r, no)) << Quoted(no);
  EXPECT_TRUE(Viable(r, "  "));
  EXPECT_TRUE(Viable(r, "1 + "));
  EXPECT_FALSE(Viable(r, "1 + +"));
}

TEST(Earley, NullableRulesAndTerminals) {
  // A ::= B B "x" ; B ::= "" | C ; C ::= B (cycle through empty rules).
  Builder b;
  uint32_t x = b.T("x"), as = b.T("a*");
  uint32_t a = b.R("A"), bb = b.R("B"), c = b.R("C");
  b.Alt(a, {R(bb), R(bb), T(x), T(as)});
  b.Alt(bb, {});
  b.Alt(bb, {R(c)});
  b.Alt(c, {R(bb)});
  b.Alt(c, {T(as), T(x)});
  auto r = MustCreate(b.g);
  for (const char* yes : {"x", "xa", "xxx", "aaxx", "axaxx", "axxaaa", "xaaa"}) {
    EXPECT_TRUE(Accepts(r, yes)) << yes;
  }
  for (const char* no : {"", "a", "xax", "axaxaxx"}) EXPECT_FALSE(Accepts(r, no)) << no;
  SpanOracle oracle(b.g);
  for (const auto& s : AllStrings("ax", 7)) ASSERT_EQ(Accepts(r, s), oracle.Accepts(s)) << s;
}

TEST(Earley, AmbiguousAndRightRecursive) {
  Builder b;
  uint32_t a = b.T("a");
  uint32_t s = b.R("S"), t = b.R("T");
  b.Alt(s, {R(s), R(s)});  // maximally ambiguous
  b.Alt(s, {T(a)});
  b.Alt(s, {R(t)});
  b.Alt(t, {T(a), R(t)});  // right recursive
  b.Alt(t, {T(a)});
  auto r = MustCreate(b.g);
  EXPECT_TRUE(Accepts(r, std::string(200, 'a')));
  EXPECT_FALSE(Accepts(r, std::string(200, 'a') + "b"));
  EXPECT_FALSE(Accepts(r, ""));
}

TEST(Earley, ItemCapIsAnError) {
  Builder b;
  uint32_t a = b.T("a");
  uint32_t s = b.R("S");
  b.Alt(s, {R(s), R(s)});
  b.Alt(s, {T(a)});
  EarleyOptions options;
  options.max_items_per_position = 100;
  auto r = MustCreate(b.g, options);
  EXPECT_TRUE(Accepts(r, "aaaa"));
  auto big = r.Accepts(std::string(500, 'a'));
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted) << big.status();
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("max_items_per_position"));
  EXPECT_EQ(r.IsViablePrefix(std::string(500, 'a')).status().code(),
            absl::StatusCode::kResourceExhausted);

  // Steps: nested stars revisit whole sets on every completion.
  EarleyOptions steps;
  steps.max_steps_per_position = 2000;
  auto stars = MustCreate(*ParseGbnf("root ::= \"a\"*******"), steps);
  EXPECT_TRUE(Accepts(stars, "aa"));
  auto slow = stars.Accepts(std::string(300, 'a'));
  EXPECT_EQ(slow.status().code(), absl::StatusCode::kResourceExhausted) << slow.status();
  EXPECT_THAT(std::string(slow.status().message()), HasSubstr("max_steps_per_position"));
}

TEST(Earley, CreateValidates) {
  Builder b;
  uint32_t s = b.R("S");
  b.Alt(s, {R(s)});  // derives nothing
  auto r = EarleyRecognizer::Create(b.g);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("rule 'S'"));

  Builder e;
  uint32_t empty = e.T("(?:)");
  uint32_t s2 = e.R("S");
  e.Alt(s2, {T(empty)});
  r = EarleyRecognizer::Create(e.g);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("matches no non-empty string"));
}

TEST(Earley, RejectsEarlyAndStaysDead) {
  auto r = FromGbnfFile("json.gbnf");
  std::string text = "[1, }" + std::string(10000, ' ');
  EXPECT_FALSE(Accepts(r, text));
  EXPECT_FALSE(Viable(r, text));
  auto next = r.NextBytes("[1, }");
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(next->none());
}

TEST(Earley, DeepNestingNeedsNoRecursion) {
  auto r = FromGbnfFile("json.gbnf");
  const int depth = 5000;
  std::string text = std::string(depth, '[') + "{\"a\": 1}" + std::string(depth, ']');
  EXPECT_TRUE(Accepts(r, text));
  EXPECT_FALSE(Accepts(r, text.substr(0, text.size() - 1)));
  EXPECT_TRUE(Viable(r, text.substr(0, text.size() - 1)));
}

TEST(Earley, NextBytesOfJson) {
  auto r = FromGbnfFile("json.gbnf");
  auto next = r.NextBytes("{\"a\":");
  ASSERT_TRUE(next.ok());
  std::string allowed;
  for (int c = 0; c < 256; ++c) {
    if ((*next)[c]) allowed += static_cast<char>(c);
  }
  EXPECT_EQ(allowed, "\t\n\r \"-0123456789[fnt{");
}

}  // namespace
}  // namespace maskd::grammar
