// GrammarFromRegexRules: regexes naming each other, lowered to a Grammar.
// The oracle for non-recursive rules is the regex route itself: a reference
// replaced by its rule's text in a group must give the same language, checked
// with maskd's DFA against the reference Earley recognizer on random strings.
// Recursive rules are checked against languages decided by hand-written code.

#include "grammar/regex_rules.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "automaton/dfa.h"
#include "automaton/regex.h"
#include "gmock/gmock.h"
#include "grammar/earley.h"
#include "grammar/regular_rules.h"
#include "grammar/terminal_dfas.h"
#include "gtest/gtest.h"

namespace maskd::grammar {
namespace {

using ::testing::HasSubstr;

EarleyRecognizer Recognizer(const std::vector<RegexRule>& rules) {
  auto g = GrammarFromRegexRules(rules, 0, GrammarLimits{});
  EXPECT_TRUE(g.ok()) << g.status();
  auto r = EarleyRecognizer::Create(*g);
  EXPECT_TRUE(r.ok()) << r.status();
  return *std::move(r);
}

bool Accepts(const EarleyRecognizer& r, std::string_view text) {
  auto a = r.Accepts(text);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() && *a;
}

// Balanced parentheses, possibly empty: the classic non-regular language.
bool Balanced(std::string_view s) {
  int depth = 0;
  for (char c : s) {
    if (c == '(') ++depth;
    else if (c == ')' && --depth < 0) return false;
    else if (c != '(' && c != ')') return false;
  }
  return depth == 0;
}

TEST(RegexRules, RecursionIsExact) {
  // 0 := (?:\((?&0)\))*  — balanced parentheses.
  const EarleyRecognizer r = Recognizer({{"balanced", "(?:\\((?&0)\\))*"}});
  std::mt19937 rng(7);
  int balanced = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s(rng() % 13, ' ');
    for (char& c : s) c = rng() % 2 ? '(' : ')';
    balanced += Balanced(s);
    EXPECT_EQ(Accepts(r, s), Balanced(s)) << s;
  }
  EXPECT_GT(balanced, 50);  // the sample reaches both verdicts
  EXPECT_TRUE(Accepts(r, std::string(200, '(') + std::string(200, ')')));
  EXPECT_FALSE(Accepts(r, std::string(200, '(') + std::string(199, ')')));
}

TEST(RegexRules, MutualRecursionAndTerminalsAroundReferences) {
  // A JSON-like list of numbers or nested lists.
  const EarleyRecognizer r = Recognizer({{"value", "[0-9]+|(?&1)"},
                                         {"list", "\\[(?:(?&0)(?:, (?&0))*)?\\]"}});
  for (const char* ok : {"7", "[]", "[1, 22]", "[[], [3, [4]]]", "[[[[[[[[1]]]]]]]]"}) {
    EXPECT_TRUE(Accepts(r, ok)) << ok;
  }
  for (const char* bad : {"", "[", "[1,2]", "[1, ]", "[[]", "a", "[1] "}) {
    EXPECT_FALSE(Accepts(r, bad)) << bad;
  }
}

TEST(RegexRules, ReferenceFreeRunsBecomeOneTerminal) {
  auto g = GrammarFromRegexRules({{"r", "ab[cd]*(?&1)e{2}|x"}, {"s", "y"}}, 0, GrammarLimits{});
  ASSERT_TRUE(g.ok()) << g.status();
  // "ab[cd]*", "e{2}", "x", "y": one terminal each; the literal ones marked.
  std::vector<std::string> regexes;
  for (const Terminal& t : g->terminals) regexes.push_back(t.regex);
  EXPECT_THAT(regexes, ::testing::UnorderedElementsAre("ab[cd]*", "e{2}", "x", "y"));
  for (const Terminal& t : g->terminals) {
    if (t.regex == "x" || t.regex == "y") {
      EXPECT_EQ(t.literal, t.regex);
    }
    if (t.regex == "ab[cd]*") {
      EXPECT_FALSE(t.literal.has_value());
    }
  }
}

TEST(RegexRules, EscapesClassesAndQuantifiersAreNotStructure) {
  // '(' '|' ')' inside classes and escapes, a leading ']' in a class, a
  // counted repeat of a reference, a lazy quantifier.
  const EarleyRecognizer r =
      Recognizer({{"r", "[]()|]\\((?&1){2,3}\\|[^)]??"}, {"s", "\\x41|\\u0042"}});
  EXPECT_TRUE(Accepts(r, "](AB|"));
  EXPECT_TRUE(Accepts(r, "|(AAA|x"));
  EXPECT_FALSE(Accepts(r, "](A|"));
  EXPECT_FALSE(Accepts(r, "](AAAA|"));
  EXPECT_FALSE(Accepts(r, "](AB|)"));
}

TEST(RegexRules, RuleWithoutStringsDropsItsAlternatives) {
  // Rule 1 matches nothing; rule 2 only the empty string.
  const EarleyRecognizer r =
      Recognizer({{"r", "a(?&1)|b(?&2)c"}, {"nothing", "[^\\x00-\\x{10FFFF}]"}, {"empty", "(?:)"}});
  EXPECT_TRUE(Accepts(r, "bc"));
  EXPECT_FALSE(Accepts(r, "a"));
  auto none = GrammarFromRegexRules({{"r", "a(?&1)"}, {"nothing", "[^\\x00-\\x{10FFFF}]"}}, 0,
                                    GrammarLimits{});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("derives no string"));
}

TEST(RegexRules, ErrorsNameTheRuleAndOffset) {
  struct Case {
    std::vector<RegexRule> rules;
    absl::StatusCode code;
    const char* says;
  } cases[] = {
      {{{"a", "x(?&3)"}}, absl::StatusCode::kInvalidArgument, "regex rule 'a' at byte 1: reference to rule 3 of 1"},
      {{{"a", "x(?&)"}}, absl::StatusCode::kInvalidArgument, "bad rule reference"},
      {{{"a", "(x(?&0)"}}, absl::StatusCode::kInvalidArgument, "at byte 0: missing ')'"},
      {{{"a", "x)"}}, absl::StatusCode::kInvalidArgument, "at byte 1: unbalanced ')'"},
      {{{"a", "[x"}}, absl::StatusCode::kInvalidArgument, "missing ']'"},
      {{{"a", "(?i)x(?&0)?"}}, absl::StatusCode::kInvalidArgument, "inline flag group beside a rule reference"},
      {{{"a", "(?i:x(?&0))?"}}, absl::StatusCode::kInvalidArgument, "inline flag group around"},
      {{{"a", "(?&0){2000}"}}, absl::StatusCode::kResourceExhausted, "max_repeat"},
      {{{"a", "x{"}, {"b", "(?&0"}}, absl::StatusCode::kInvalidArgument, "regex rule 'b'"},
      {{{"a", "(x"}}, absl::StatusCode::kInvalidArgument, "missing ')'"},
      {{{"a", "x(?&0)\\"}}, absl::StatusCode::kInvalidArgument, "at byte 6: unterminated escape"},
      {{{"a", "(?&0)\\p{L"}}, absl::StatusCode::kInvalidArgument, "at byte 5: unterminated escape"},
      {{{"a", "[(?&0)"}}, absl::StatusCode::kInvalidArgument, "at byte 0: missing ']'"},
  };
  for (const Case& c : cases) {
    auto g = GrammarFromRegexRules(c.rules, 0, GrammarLimits{});
    ASSERT_FALSE(g.ok()) << c.rules[0].regex;
    EXPECT_EQ(g.status().code(), c.code) << g.status();
    EXPECT_THAT(g.status().message(), HasSubstr(c.says));
  }
  EXPECT_EQ(GrammarFromRegexRules({{"a", "x"}}, 1, GrammarLimits{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RegexRules, LimitsAreEnforced) {
  GrammarLimits few;
  few.max_rules = 3;
  auto g = GrammarFromRegexRules({{"a", "(?:x(?&0)y)*(?:z(?&0))*(?:w(?&0))*"}}, 0, few);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(g.status().message(), HasSubstr("max_rules"));
  GrammarLimits small;
  small.max_text_bytes = 8;
  EXPECT_EQ(GrammarFromRegexRules({{"a", "0123456789"}}, 0, small).status().code(),
            absl::StatusCode::kResourceExhausted);
  GrammarLimits shallow;
  shallow.max_nesting = 4;
  auto deep = GrammarFromRegexRules({{"a", "((((((x))))))"}}, 0, shallow);
  EXPECT_EQ(deep.status().code(), absl::StatusCode::kResourceExhausted) << deep.status();
}

// Random regexes over {a, b} built from classes, groups, alternation and
// quantifiers, some naming rule 1 (itself a random reference-free regex);
// long_counts adds counted repeats up to {0,9} and {5}.
std::string RandomRegex(std::mt19937& rng, int depth, bool refs, bool long_counts = false) {
  switch (depth <= 0 ? rng() % 3 : rng() % 8) {
    case 0: return "a";
    case 1: return "[ab]";
    case 2: return refs && rng() % 2 ? "(?&1)" : "b";
    case 3:
    case 4: return RandomRegex(rng, depth - 1, refs, long_counts) + RandomRegex(rng, depth - 1, refs, long_counts);
    case 5:
      return absl::StrCat("(?:", RandomRegex(rng, depth - 1, refs, long_counts), "|",
                          RandomRegex(rng, depth - 1, refs, long_counts), ")");
    case 6: {
      static const char* kQuantifiers[] = {"*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}",
                                           "{3,7}", "{0,9}", "{5}", "{4,}", "{1,6}"};
      return absl::StrCat("(?:", RandomRegex(rng, depth - 1, refs, long_counts), ")",
                          kQuantifiers[rng() % (long_counts ? 12 : 7)]);
    }
    default:
      return absl::StrCat(RandomRegex(rng, depth - 1, refs, long_counts), "|",
                          RandomRegex(rng, depth - 1, refs, long_counts));
  }
}

TEST(RegexRules, SameLanguageAsTheInlinedRegex) {
  std::mt19937 rng(2026);
  int compared = 0, accepted = 0;
  for (int round = 0; round < 150; ++round) {
    const std::string inner = RandomRegex(rng, 2, false);
    const std::string outer = RandomRegex(rng, 4, true);
    const std::string inlined = absl::StrReplaceAll(outer, {{"(?&1)", absl::StrCat("(?:", inner, ")")}});
    auto dfa = Dfa::FromPattern(inlined);
    ASSERT_TRUE(dfa.ok()) << inlined << ": " << dfa.status();
    auto g = GrammarFromRegexRules({{"outer", outer}, {"inner", inner}}, 0, GrammarLimits{});
    ASSERT_TRUE(g.ok()) << outer << " / " << inner << ": " << g.status();
    auto r = EarleyRecognizer::Create(*g);
    ASSERT_TRUE(r.ok()) << r.status();
    for (int i = 0; i < 60; ++i) {
      std::string s(rng() % 9, 'a');
      for (char& c : s) c = rng() % 2 ? 'a' : 'b';
      const bool want = (*dfa)->Matches(s);
      auto got = r->Accepts(s);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(*got, want) << "outer " << outer << " inner " << inner << " text '" << s << "'";
      ++compared;
      accepted += want;
    }
  }
  EXPECT_GT(accepted, compared / 20);  // both verdicts are exercised
  EXPECT_LT(accepted, compared);
}

// Reference-free parts over small TerminalLimits are split into rules: the
// language must still be the inlined regex's, by the same DFA oracle.
TEST(RegexRules, OversizedPartsSplitIntoRulesWithTheSameLanguage) {
  std::mt19937 rng(15);
  int compared = 0, accepted = 0, split = 0;
  for (int round = 0; round < 300; ++round) {
    TerminalLimits small;
    small.regex.max_nodes = 3 + rng() % 10;
    small.dfa.max_states = round % 3 == 0 ? 5 + rng() % 6 : 100000;
    const std::string inner = RandomRegex(rng, 2, false, true);
    const std::string outer = RandomRegex(rng, 4, round % 2 == 0, true);
    const std::string inlined = absl::StrReplaceAll(outer, {{"(?&1)", absl::StrCat("(?:", inner, ")")}});
    auto dfa = Dfa::FromPattern(inlined);
    ASSERT_TRUE(dfa.ok()) << inlined << ": " << dfa.status();
    auto g = GrammarFromRegexRules({{"outer", outer}, {"inner", inner}}, 0, GrammarLimits{}, small);
    ASSERT_TRUE(g.ok()) << outer << " / " << inner << ": " << g.status();
    auto whole = GrammarFromRegexRules({{"outer", outer}, {"inner", inner}}, 0, GrammarLimits{});
    ASSERT_TRUE(whole.ok()) << whole.status();
    split += g->terminals.size() != whole->terminals.size();
    auto r = EarleyRecognizer::Create(*g);
    ASSERT_TRUE(r.ok()) << r.status();
    for (int i = 0; i < 60; ++i) {
      std::string s(rng() % 15, 'a');
      for (char& c : s) c = rng() % 2 ? 'a' : 'b';
      const bool want = (*dfa)->Matches(s);
      auto got = r->Accepts(s);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(*got, want) << "outer " << outer << " inner " << inner << " text '" << s << "' limits "
                            << small.regex.max_nodes << " nodes, " << small.dfa.max_states << " states";
      ++compared;
      accepted += want;
    }
  }
  EXPECT_GT(split, 100);  // the limits split most rounds
  EXPECT_GT(accepted, compared / 20);
  EXPECT_LT(accepted, compared);
}

// X{m,n} for a body over the limits: exact at m-1, m, n, n+1 copies, with
// O(log n) rules, against the inlined regex's DFA.
TEST(RegexRules, OversizedCountedRepeatIsExactAtItsBounds) {
  const uint32_t kUnbounded = ~uint32_t{0};
  struct Bounds {
    uint32_t min, max;
  } cases[] = {{0, 1}, {1, 1}, {2, 5}, {3, 3}, {0, 1000}, {1, 1000}, {2, 1000}, {999, 1000},
               {1000, 1000}, {0, kUnbounded}, {5, kUnbounded}, {7, 77}};
  TerminalLimits small;
  small.regex.max_nodes = 30;
  for (const Bounds& b : cases) {
    const std::string count = b.max == kUnbounded ? absl::StrCat("{", b.min, ",}")
                                                  : absl::StrCat("{", b.min, ",", b.max, "}");
    // A separator, so that each count has one spelling.
    const std::string regex = absl::StrCat("<(?:;(?:a[bc]?d|e)f)", count, ">");
    auto g = GrammarFromRegexRules({{"r", regex}}, 0, GrammarLimits{}, small);
    ASSERT_TRUE(g.ok()) << regex << ": " << g.status();
    EXPECT_LT(g->rules.size(), 40u) << regex;
    std::vector<std::string> terminals;
    for (const Terminal& t : g->terminals) terminals.push_back(t.regex);
    if (b.max != kUnbounded && b.max >= 4) {  // over 30 nodes inlined
      EXPECT_THAT(terminals, ::testing::Contains("(?:;(?:a[bc]?d|e)f)")) << regex;
    }
    auto dfa = Dfa::FromPattern(regex);
    ASSERT_TRUE(dfa.ok()) << dfa.status();
    auto r = EarleyRecognizer::Create(*g);
    ASSERT_TRUE(r.ok()) << r.status();
    std::vector<uint32_t> counts = {b.min, b.min + 1};
    if (b.min > 0) counts.push_back(b.min - 1);
    if (b.max != kUnbounded) counts.insert(counts.end(), {b.max - 1, b.max, b.max + 1});
    else counts.push_back(b.min + 40);
    for (uint32_t k : counts) {
      std::string text = "<";
      for (uint32_t i = 0; i < k; ++i) text += i % 3 == 0 ? ";acdf" : i % 3 == 1 ? ";adf" : ";ef";
      text += ">";
      const bool want = k >= b.min && k <= b.max;
      ASSERT_EQ((*dfa)->Matches(text), want) << regex << " " << k;
      EXPECT_EQ(Accepts(*r, text), want) << regex << " with " << k << " copies";
      if (k > 0) {
        std::string broken = text;
        broken[broken.size() - 2] = 'x';  // the last copy spoiled
        EXPECT_FALSE(Accepts(*r, broken)) << regex << " " << broken;
      }
    }
  }
}

TEST(RegexRules, PartsThatFitAreUnchangedByTheTerminalLimits) {
  const std::vector<RegexRule> rules = {{"r", "\\[(?:x{3}(?:,x{3}){0,999})?\\](?&1)"}, {"s", "y|z"}};
  auto g = GrammarFromRegexRules(rules, 0, GrammarLimits{});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ToText(*g), ToText(*GrammarFromRegexRules(rules, 0, GrammarLimits{}, TerminalLimits{})));
  ASSERT_EQ(g->terminals.size(), 2u);
  EXPECT_EQ(g->terminals[0].regex, "\\[(?:x{3}(?:,x{3}){0,999})?\\]");
}

// A body too big for a terminal under the default limits: a JSON-like array
// of 1 to 1000 objects whose inlined regex expands past 2^20 nodes.
TEST(RegexRules, GenuinelyBigRepeatBecomesRules) {
  const std::string item = "\\{\"s\": \"[a-z]{0,600}\", \"t\": \"[a-z]{0,600}\"\\}";
  const std::string regex = absl::StrCat("\\[", item, "(?:, ", item, "){0,999}\\]");
  auto whole = Regex::Parse(regex);
  ASSERT_FALSE(whole.ok());
  EXPECT_EQ(whole.status().code(), absl::StatusCode::kResourceExhausted);
  auto g = GrammarFromRegexRules({{"array", regex}}, 0, GrammarLimits{});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_LT(g->rules.size(), 40u);
  auto r = EarleyRecognizer::Create(*g);
  ASSERT_TRUE(r.ok()) << r.status();
  auto array = [](int n, const std::string& last) {
    std::string out = "[";
    for (int i = 0; i < n; ++i) {
      absl::StrAppend(&out, i ? ", " : "", "{\"s\": \"", i + 1 == n ? last : std::string(i % 7, 'q'),
                      "\", \"t\": \"", std::string(i % 5, 'p'), "\"}");
    }
    return out + "]";
  };
  EXPECT_FALSE(Accepts(*r, array(0, "")));
  for (int n : {1, 2, 999, 1000}) EXPECT_TRUE(Accepts(*r, array(n, "abc"))) << n;
  EXPECT_TRUE(Accepts(*r, array(3, std::string(600, 'z'))));
  EXPECT_FALSE(Accepts(*r, array(3, std::string(601, 'z'))));
  EXPECT_FALSE(Accepts(*r, array(1001, "abc")));
  EXPECT_FALSE(Accepts(*r, array(5, "A")));
}

// A part far larger than the DFA limit allows (PresumedOverStateLimit: over
// 2 expanded nodes per state) is split from its size alone, without building
// its DFA, even where the lowering does not check DFAs (a failed build costs
// max_states states' work, and the parts around it would each pay it). The
// language is the same.
TEST(RegexRules, PartPresumedOverTheStateLimitIsSplitWithoutItsDfa) {
  const std::string regex = R"(\[(?:"[a-z]{0,255}"(?:, "[a-z]{0,255}"){0,99})?\])";
  auto parsed = Regex::Parse(regex);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  TerminalLimits unchecked;
  unchecked.check_dfa = false;
  unchecked.dfa.max_states = 1000;
  ASSERT_TRUE(PresumedOverStateLimit(parsed->expanded_size(), unchecked.dfa));
  auto g = GrammarFromRegexRules({{"array", regex}}, 0, GrammarLimits{}, unchecked);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_GT(g->terminals.size(), 1u);
  for (const Terminal& t : g->terminals) EXPECT_NE(t.regex, regex);
  auto r = EarleyRecognizer::Create(*g);
  ASSERT_TRUE(r.ok()) << r.status();
  auto array = [](int n, size_t len) {
    std::string out = "[";
    for (int i = 0; i < n; ++i) absl::StrAppend(&out, i ? ", " : "", "\"", std::string(len, 'k'), "\"");
    return out + "]";
  };
  EXPECT_TRUE(Accepts(*r, "[]"));
  EXPECT_TRUE(Accepts(*r, array(1, 0)));
  EXPECT_TRUE(Accepts(*r, array(100, 255)));
  EXPECT_FALSE(Accepts(*r, array(101, 3)));
  EXPECT_FALSE(Accepts(*r, array(2, 256)));
  // Under the presumption's bound, the part stays one terminal.
  TerminalLimits roomy = unchecked;
  roomy.dfa.max_states = 100000;
  auto whole = GrammarFromRegexRules({{"array", regex}}, 0, GrammarLimits{}, roomy);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->terminals.size(), 1u);
  EXPECT_EQ(whole->terminals[0].regex, regex);
}

TEST(RegexRules, OversizedPartWithoutAnOperatorKeepsTheLimitsError) {
  TerminalLimits small;
  small.regex.max_nodes = 4;
  // A flag group's scope would be cut by a split; a class is one atom.
  for (const char* regex : {"(?i)abcdefgh", "(?i:abcdefgh)", "(?:(?i)ab|cdefgh)"}) {
    auto g = GrammarFromRegexRules({{"r", regex}}, 0, GrammarLimits{}, small);
    ASSERT_FALSE(g.ok()) << regex;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kResourceExhausted) << g.status();
    EXPECT_THAT(g.status().message(), HasSubstr("regex rule 'r': regex: pattern expands")) << regex;
  }
  TerminalLimits few_states;
  few_states.dfa.max_states = 3;
  auto g = GrammarFromRegexRules({{"r", "[a-c][d-f]+"}}, 0, GrammarLimits{}, few_states);
  ASSERT_TRUE(g.ok()) << g.status();  // split into [a-c] and [d-f]+
  // After a part over the DFA limit, a part as large is presumed over it
  // too and split; one that cannot be split is still tried whole.
  TerminalLimits four_states;
  four_states.dfa.max_states = 4;
  auto after = GrammarFromRegexRules({{"r", "[a-c][d-f]{3}(?&1)[g-i]{2}|(?i:xy)"}, {"s", "[j-l]"}}, 0,
                                     GrammarLimits{}, four_states);
  ASSERT_TRUE(after.ok()) << after.status();
  auto recognizer = EarleyRecognizer::Create(*after);
  ASSERT_TRUE(recognizer.ok()) << recognizer.status();
  for (const char* ok : {"adddjgh", "bfefkii", "XY", "xY"}) EXPECT_TRUE(Accepts(*recognizer, ok)) << ok;
  for (const char* bad : {"addjgh", "adddjg", "adddjghi", "xyz", "dddjgh"}) {
    EXPECT_FALSE(Accepts(*recognizer, bad)) << bad;
  }
  auto h = GrammarFromRegexRules({{"r", "x\\p{L}"}}, 0, GrammarLimits{}, few_states);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kResourceExhausted) << h.status();
  EXPECT_THAT(h.status().message(), HasSubstr("max_states"));
}


// InlineRegularRules keeps a merged terminal only within max_terminal_nodes
// expanded nodes: a repeat over a reference (lowered to rules over binary
// powers, all regular) merges into one terminal without the cap, and into
// terminals under it with the cap. The language is the same either way.
TEST(RegexRules, InlinedTerminalsStayUnderTheirNodeCap) {
  const std::vector<RegexRule> rules = {{"array", "\\[(?:(?&1)(?:,(?&1)){0,39})?\\]"},
                                        {"item", "\"[a-z]{1,20}\""}};
  auto g = GrammarFromRegexRules(rules, 0, GrammarLimits{});
  ASSERT_TRUE(g.ok()) << g.status();
  auto largest_terminal = [](const Grammar& grammar) {
    size_t largest = 0;
    for (const Terminal& t : grammar.terminals) {
      auto re = Regex::Parse(t.regex);
      EXPECT_TRUE(re.ok()) << re.status();
      if (re.ok()) largest = std::max(largest, re->expanded_size());
    }
    return largest;
  };
  InlineOptions uncapped;
  uncapped.max_terminal_nodes = 0;
  const Grammar whole = InlineRegularRules(*g, uncapped);
  InlineOptions capped;
  capped.max_terminal_nodes = 500;
  const Grammar split = InlineRegularRules(*g, capped);
  EXPECT_GT(largest_terminal(whole), 500u);
  EXPECT_LE(largest_terminal(split), 500u);
  EXPECT_GT(split.terminals.size(), g->terminals.size());  // some rules still merged
  auto a = EarleyRecognizer::Create(whole);
  auto b = EarleyRecognizer::Create(split);
  ASSERT_TRUE(a.ok() && b.ok());
  std::mt19937 rng(11);
  int accepted = 0;
  for (int i = 0; i < 400; ++i) {
    const int n = static_cast<int>(rng() % 44);
    std::string text = "[";
    for (int k = 0; k < n; ++k) {
      absl::StrAppend(&text, k ? "," : "", "\"", std::string(rng() % 22, "ab"[rng() % 2]), "\"");
    }
    text += rng() % 10 ? "]" : ",]";
    const bool want = Accepts(*a, text);
    accepted += want;
    EXPECT_EQ(Accepts(*b, text), want) << text;
  }
  EXPECT_GT(accepted, 50);
  EXPECT_LT(accepted, 350);
}

}  // namespace
}  // namespace maskd::grammar
