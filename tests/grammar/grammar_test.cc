// Normalize, Validate and ToText on grammars built by hand.
#include "grammar/grammar.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "grammar/compiled_grammar.h"
#include "gtest/gtest.h"

namespace maskd::grammar {
namespace {

using ::testing::HasSubstr;

Symbol T(uint32_t id) { return Symbol::Terminal(id); }
Symbol R(uint32_t id) { return Symbol::Rule(id); }

Terminal Term(std::string name, std::string regex) {
  Terminal t;
  t.name = std::move(name);
  t.regex = std::move(regex);
  return t;
}

Rule MakeRule(std::string name, std::vector<std::vector<Symbol>> alts, uint32_t line = 0) {
  Rule r;
  r.name = std::move(name);
  r.alternatives = std::move(alts);
  r.where = {line, 1};
  return r;
}

// C ::= "c" (unreachable) ; A ::= A "a" (derives nothing) ; S ::= A | B "x" ;
// B ::= "b" | A B. Start S, at index 2.
Grammar Sample() {
  Grammar g;
  g.terminals = {Term("\"a\"", "a"), Term("\"b\"", "b"), Term("\"x\"", "x"), Term("\"c\"", "c")};
  g.rules = {MakeRule("C", {{T(3)}}, 1), MakeRule("A", {{R(1), T(0)}}, 2),
             MakeRule("S", {{R(1)}, {R(3), T(2)}}, 3), MakeRule("B", {{T(1)}, {R(1), R(3)}}, 4)};
  g.start = 2;
  return g;
}

TEST(Grammar, NormalizeDropsDeadAlternativesAndUnreachableRules) {
  Grammar g = Sample();
  EXPECT_FALSE(Validate(g).ok());
  ASSERT_TRUE(Normalize(&g).ok());
  ASSERT_EQ(g.rules.size(), 2u);
  EXPECT_EQ(g.rules[0].name, "S");
  EXPECT_EQ(g.rules[1].name, "B");
  EXPECT_EQ(g.start, 0u);
  ASSERT_EQ(g.rules[0].alternatives.size(), 1u);
  EXPECT_EQ(g.rules[0].alternatives[0], (std::vector<Symbol>{R(1), T(2)}));
  ASSERT_EQ(g.rules[1].alternatives.size(), 1u);
  EXPECT_EQ(g.terminals.size(), 4u);  // terminals are kept
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
  // Idempotent.
  Grammar again = g;
  ASSERT_TRUE(Normalize(&again).ok());
  EXPECT_EQ(ToText(again), ToText(g));
}

TEST(Grammar, NormalizeFailsWhenStartDerivesNothing) {
  Grammar g = Sample();
  g.start = 1;
  absl::Status s = Normalize(&g);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "rule 'A' (line 2, column 1) derives no string");
  g = Sample();
  g.rules[0].alternatives[0][0] = T(9);
  EXPECT_THAT(std::string(Normalize(&g).message()), HasSubstr("terminal id 9, out of range"));
}

TEST(Grammar, ValidateNamesWhatIsWrong) {
  Grammar ok = Sample();
  ASSERT_TRUE(Normalize(&ok).ok());
  struct Case {
    std::function<void(Grammar*)> edit;
    const char* message;
  };
  const std::vector<Case> cases = {
      {[](Grammar* g) { g->start = 7; }, "start rule id 7 is out of range (2 rules)"},
      {[](Grammar* g) { g->rules[1].alternatives[0].push_back(R(5)); },
       "rule 'B' (line 4, column 1) uses rule id 5, out of range"},
      {[](Grammar* g) { g->ignore.push_back(4); }, "ignored terminal id 4 is out of range"},
      {[](Grammar* g) { g->rules[1].alternatives = {{R(1), T(1)}}; },
       "rule 'S' (line 3, column 1) derives no string"},
      {[](Grammar* g) { g->rules.push_back(MakeRule("Z", {{}}, 9)); },
       "rule 'Z' (line 9, column 1) is unreachable from the start rule"},
      {[](Grammar* g) { g->terminals[3].regex = "(a"; }, "terminal '\"c\"' (line 0, column 0): "},
      {[](Grammar* g) { g->terminals[3].regex = "(?:)"; }, "matches no non-empty string"},
      {[](Grammar* g) { g->terminals[3].regex = "a{0}(?:)"; }, "matches no non-empty string"},
      {[](Grammar* g) { g->terminals[3].regex = "[^\\x{0}-\\x{10FFFF}]*"; },
       "matches no non-empty string"},
      {[](Grammar* g) { g->terminals[3].regex = "b[^\\x{0}-\\x{10FFFF}]"; },
       "matches no non-empty string"},
  };
  for (const Case& c : cases) {
    Grammar g = ok;
    c.edit(&g);
    absl::Status s = Validate(g);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
    // CompiledGrammar::Create checks the terminals on their DFAs instead
    // (ValidateRules, then each DFA): the same refusals.
    auto compiled = CompiledGrammar::Create(g, RegexLimits{}, DfaOptions{}, nullptr);
    ASSERT_FALSE(compiled.ok()) << c.message;
    EXPECT_EQ(compiled.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(compiled.status().message()), HasSubstr(c.message));
  }
  // Terminals that may also match the empty string are fine.
  for (const char* regex : {"a*", "(?:a|)", "(?:)|b", "(?:a{0})*b?"}) {
    Grammar g = ok;
    g.terminals[3].regex = regex;
    EXPECT_TRUE(Validate(g).ok()) << regex << ": " << Validate(g);
    auto compiled = CompiledGrammar::Create(g, RegexLimits{}, DfaOptions{}, nullptr);
    EXPECT_TRUE(compiled.ok()) << regex << ": " << compiled.status();
  }
}

TEST(Grammar, ToTextIsBnf) {
  Grammar g = Sample();
  ASSERT_TRUE(Normalize(&g).ok());
  g.rules[1].alternatives.push_back({});
  g.terminals[2].priority = 2;
  g.ignore.push_back(3);
  EXPECT_EQ(ToText(g),
            "%start S\n"
            "S ::= B \"x\"\n"
            "B ::= \"b\" | \"\"\n"
            "%terminal \"a\" = /a/\n"
            "%terminal \"b\" = /b/\n"
            "%terminal \"x\" = /x/ priority 2\n"
            "%terminal \"c\" = /c/\n"
            "%ignore \"c\"\n");
}

}  // namespace
}  // namespace maskd::grammar
