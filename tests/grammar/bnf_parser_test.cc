// The GBNF and XGrammar-EBNF front ends: the example grammars, lexical
// details of each dialect, errors with their positions, limits, and a
// differential test of the lowering of groups and operators against maskd's
// regex engine (a GBNF expression without rule references is a regular
// language; the same expression as a regex must accept the same strings).
#include "grammar/bnf_parser.h"

#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "automaton/dfa.h"
#include "gmock/gmock.h"
#include "grammar/earley.h"
#include "grammar/grammar.h"
#include "gtest/gtest.h"
#include "tests/grammar/grammar_test_util.h"

namespace maskd::grammar {
namespace {

using ::maskd::testing::ReadGrammar;
using ::testing::HasSubstr;


EarleyRecognizer MustRecognizer(const absl::StatusOr<Grammar>& g) {
  EXPECT_TRUE(g.ok()) << g.status();
  auto r = EarleyRecognizer::Create(*g);
  EXPECT_TRUE(r.ok()) << r.status();
  return std::move(*r);
}

bool Accepts(const EarleyRecognizer& r, std::string_view text) {
  auto a = r.Accepts(text);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() && *a;
}

// The error of parsing `text`, or OK.
absl::Status GbnfError(std::string_view text, const GrammarLimits& limits = {}) {
  return ParseGbnf(text, limits).status();
}
absl::Status EbnfError(std::string_view text, const GrammarLimits& limits = {}) {
  return ParseXgrammarEbnf(text, limits).status();
}

TEST(BnfParser, ExampleGrammarsParseAndValidate) {
  for (const char* name : {"json.gbnf", "arithmetic.gbnf", "list.gbnf", "chess.gbnf", "c.gbnf"}) {
    std::string text = ReadGrammar(name);
    ASSERT_FALSE(text.empty()) << name;
    auto g = ParseGbnf(text);
    ASSERT_TRUE(g.ok()) << name << ": " << g.status();
    EXPECT_TRUE(Validate(*g).ok()) << name << ": " << Validate(*g);
    EXPECT_EQ(g->rules[g->start].name, "root") << name;
    EXPECT_TRUE(g->ignore.empty());
    // Deterministic lowering and printing.
    auto again = ParseGbnf(text);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(ToText(*g), ToText(*again)) << name;
    // The XGrammar dialect reads these too (its layout rules are looser and
    // its escapes a superset of what these files use), to the same grammar.
    auto ebnf = ParseXgrammarEbnf(text);
    ASSERT_TRUE(ebnf.ok()) << name << ": " << ebnf.status();
    EXPECT_EQ(ToText(*g), ToText(*ebnf)) << name;
  }
}

// The shape of llama.cpp's own JSON example: a rule starting with an empty
// alternative, counted repeats, an object-only root, one-space whitespace.
TEST(BnfParser, LlamaCppStyleJson) {
  const char* text = R"(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# optional space after a token
ws ::= | " " | "\n" [ \t]{0,20}
)";
  auto r = MustRecognizer(ParseGbnf(text));
  for (const char* yes : {"{}", "{\"a\": 1}", "{\"a\":[1, -2.5e3, \"x\\u00e9\"]}\n\t\t", "{ }"}) {
    EXPECT_TRUE(Accepts(r, yes)) << yes;
  }
  for (const char* no : {"1", "{\"a\":  1}", "{\"a\": 12345678901234567}", "{\"a\": \"\x7F\"}"}) {
    EXPECT_FALSE(Accepts(r, no)) << no;
  }
}

TEST(BnfParser, LiteralEscapesGbnf) {
  auto g = ParseGbnf(R"(root ::= "a\x41\u03b1\U0001F600\t\n\r\\\"\[\]")");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->terminals.size(), 1u);
  ASSERT_TRUE(g->terminals[0].literal.has_value());
  EXPECT_EQ(*g->terminals[0].literal, "aA\xCE\xB1\xF0\x9F\x98\x80\t\n\r\\\"[]");
  auto r = MustRecognizer(g);
  EXPECT_TRUE(Accepts(r, "aA\xCE\xB1\xF0\x9F\x98\x80\t\n\r\\\"[]"));
  EXPECT_FALSE(Accepts(r, "aA"));
  // \x is a code point, encoded as UTF-8 (llama.cpp matches code points).
  auto hi = ParseGbnf(R"(root ::= "\xE9")");
  ASSERT_TRUE(hi.ok());
  EXPECT_EQ(*hi->terminals[0].literal, "\xC3\xA9");
}

TEST(BnfParser, LiteralEscapesEbnf) {
  auto g = ParseXgrammarEbnf(R"(root ::= "\'\"\?\\\a\b\f\n\r\t\v\0\e\x41\x3b1\u03b1")");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->terminals.size(), 1u);
  EXPECT_EQ(*g->terminals[0].literal,
            std::string("'\"?\\\a\b\f\n\r\t\v") + std::string(1, '\0') +
                "\x1B" "A\xCE\xB1\xCE\xB1");
  // GBNF does not know the C escapes.
  EXPECT_THAT(GbnfError(R"(root ::= "\e")").message(), HasSubstr("bad escape \\e"));
}

TEST(BnfParser, ClassesOverCodePoints) {
  auto r = MustRecognizer(ParseGbnf("root ::= [α-ω]+"));
  EXPECT_TRUE(Accepts(r, "αβγω"));
  EXPECT_FALSE(Accepts(r, "a"));
  EXPECT_FALSE(Accepts(r, "\xCE"));  // half a character
  auto viable = r.IsViablePrefix("\xCE");
  ASSERT_TRUE(viable.ok());
  EXPECT_TRUE(*viable);
  EXPECT_FALSE(Accepts(r, "Ω"));  // capital omega is outside
  auto neg = MustRecognizer(ParseGbnf(R"(root ::= [^a\n]*)"));
  EXPECT_TRUE(Accepts(neg, "bé中😀"));
  EXPECT_FALSE(Accepts(neg, "ba"));
  EXPECT_FALSE(Accepts(neg, "\n"));
  EXPECT_FALSE(Accepts(neg, "\xED\xA0\x80"));  // an encoded surrogate is not UTF-8
  // '-' first or last is itself; escapes in classes.
  auto dash = MustRecognizer(ParseGbnf(R"(root ::= [-a] [b-] [\x30-\x39] [\]\[\\])"));
  EXPECT_TRUE(Accepts(dash, "--5]"));
  EXPECT_TRUE(Accepts(dash, "ab0\\"));
  EXPECT_FALSE(Accepts(dash, "ac0["));
  // '.' is any character, newline included.
  auto any = MustRecognizer(ParseGbnf("root ::= \"<\" . \">\""));
  EXPECT_TRUE(Accepts(any, "<\n>"));
  EXPECT_TRUE(Accepts(any, "<😀>"));
  EXPECT_FALSE(Accepts(any, "<>"));
  // A class matching nothing makes its alternative dead, as in llama.cpp.
  auto empty = MustRecognizer(ParseGbnf("root ::= [] \"x\" | \"y\""));
  EXPECT_TRUE(Accepts(empty, "y"));
  EXPECT_FALSE(Accepts(empty, "x"));
  EXPECT_THAT(GbnfError("root ::= []").message(), HasSubstr("derives no string"));
}

TEST(BnfParser, EbnfClassEscapes) {
  auto r = MustRecognizer(ParseXgrammarEbnf(R"(root ::= [\-\]\^\.\*\x41-\x43]+)"));
  EXPECT_TRUE(Accepts(r, "-]^.*ABC"));
  EXPECT_FALSE(Accepts(r, "D"));
  EXPECT_THAT(EbnfError(R"(root ::= [\d])").message(),
              HasSubstr("line 1, column 11: class escape \\d is not supported"));
}

TEST(BnfParser, Repetitions) {
  struct Case {
    const char* gbnf;
    std::vector<const char*> yes, no;
  };
  std::vector<Case> cases = {
      {R"(root ::= "a"{2,4})", {"aa", "aaa", "aaaa"}, {"", "a", "aaaaa"}},
      {R"(root ::= "ab"{3})", {"ababab"}, {"abab", "abababab"}},
      {R"(root ::= "a"{2,} "b")", {"aab", "aaaaaab"}, {"ab", "b"}},
      {R"(root ::= ("a" | "bc"){0,3})", {"", "a", "bca", "abcbc"}, {"aaaa", "b"}},
      {R"(root ::= ("a" "b"?){7,9})", {"aaaaaaa", "abababababababab"}, {"aaaaaa", "aaaaaaaaaa"}},
      {R"(root ::= "x"? "y"* "z"+)", {"z", "xz", "yyzz", "xyzzz"}, {"", "x", "xy", "zx"}},
      {R"(root ::= ("a"*)*)", {"", "a", "aaaa"}, {"b"}},
      {R"(root ::= ""* "a")", {"a"}, {"", "aa"}},
      {R"(root ::= "a"{0})", {""}, {"a"}},
      {R"(root ::= ([0-9]{3}){2})", {"123456"}, {"12345", "1234567"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.gbnf);
    auto r = MustRecognizer(ParseGbnf(c.gbnf));
    for (const char* s : c.yes) EXPECT_TRUE(Accepts(r, s)) << '"' << s << '"';
    for (const char* s : c.no) EXPECT_FALSE(Accepts(r, s)) << '"' << s << '"';
  }
  EXPECT_THAT(GbnfError("root ::= \"a\"{3,2}").message(),
              HasSubstr("line 1, column 13: bad repeat range {3,2}"));
  EXPECT_THAT(GbnfError("root ::= \"a\"{,2}").message(),
              HasSubstr("line 1, column 14: expecting an integer"));
  EXPECT_THAT(GbnfError("root ::= * \"a\"").message(),
              HasSubstr("line 1, column 10: expecting an item before '*'"));
}

TEST(BnfParser, RepeatedTerminalsBecomeOneTerminal) {
  auto g = ParseGbnf("root ::= [0-9]+ \"ab\"{3}");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->rules.size(), 1u);
  ASSERT_EQ(g->rules[0].alternatives.size(), 1u);
  ASSERT_EQ(g->rules[0].alternatives[0].size(), 2u);
  const Terminal& digits = g->terminals[g->rules[0].alternatives[0][0].id];
  const Terminal& abs = g->terminals[g->rules[0].alternatives[0][1].id];
  EXPECT_EQ(digits.name, "[0-9]+");
  EXPECT_FALSE(digits.literal.has_value());
  ASSERT_TRUE(abs.literal.has_value());
  EXPECT_EQ(*abs.literal, "ababab");
}

TEST(BnfParser, TerminalsAreShared) {
  auto g = ParseGbnf("root ::= \"a\" b \"a\" [a]\nb ::= \"a\"");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->terminals.size(), 1u);
}

TEST(BnfParser, GbnfLayout) {
  // A rule ends at a newline outside groups; inside groups and after '|' or
  // '::=' newlines are blanks; '#' comments anywhere.
  const char* text =
      "# comment\n"
      "root ::= a # trailing\n"
      "  # comment line\n"
      "a ::= (\n"
      "  \"x\"   # inside\n"
      "  | \"y\"\n"
      ") b |\n"
      "  \"z\"\n"
      "b ::=\n"
      "  \"!\"\n";
  auto r = MustRecognizer(ParseGbnf(text));
  EXPECT_TRUE(Accepts(r, "x!"));
  EXPECT_TRUE(Accepts(r, "y!"));
  EXPECT_TRUE(Accepts(r, "z"));
  EXPECT_FALSE(Accepts(r, "x"));
  // A continuation line starting with '|' (not accepted by llama.cpp).
  auto cont = MustRecognizer(ParseGbnf("root ::= \"a\"\n     | \"b\"\n"));
  EXPECT_TRUE(Accepts(cont, "b"));
  // CRLF line ends; names with '-' and digits.
  auto crlf = MustRecognizer(ParseGbnf("root ::= my-rule2\r\nmy-rule2 ::= \"q\"\r\n"));
  EXPECT_TRUE(Accepts(crlf, "q"));
  // Without a group the newline ends the rule, so the next line is a rule.
  EXPECT_THAT(GbnfError("root ::= \"a\"\n\"b\"\n").message(),
              HasSubstr("line 2, column 1: expecting a rule name"));
}

TEST(BnfParser, EbnfLayout) {
  const char* text =
      "root ::= a\n"
      "  b   # a rule runs up to the next 'name ::='\n"
      "  | ()\n"
      "a ::= \"x\" | Regex(\"[0-9]{2}\")\n"
      "b.c_d ::= \"y\"\n"
      "b ::= b.c_d+\n";
  auto r = MustRecognizer(ParseXgrammarEbnf(text));
  EXPECT_TRUE(Accepts(r, "xy"));
  EXPECT_TRUE(Accepts(r, "42yy"));
  EXPECT_TRUE(Accepts(r, ""));
  EXPECT_FALSE(Accepts(r, "x"));
  EXPECT_FALSE(Accepts(r, "4y"));
  EXPECT_THAT(EbnfError("root ::= \"a\" b ::= \"c\"").message(),
              HasSubstr("line 1, column 14: a rule definition must start a line"));
  EXPECT_THAT(EbnfError("root ::= \"a\" (= \"b\")").message(),
              HasSubstr("line 1, column 14: lookahead assertions (= ...) are not supported"));
  EXPECT_THAT(EbnfError("root ::= TagDispatch((\"<t>\", a))\na ::= \"x\"").message(),
              HasSubstr("line 1, column 10: XGrammar's TagDispatch(...) is not supported"));
  EXPECT_THAT(EbnfError("root[max_tokens=3] ::= \"x\"").message(),
              HasSubstr("line 1, column 5: rule attributes"));
  EXPECT_THAT(EbnfError("root ::= \"a\"**").message(),
              HasSubstr("line 1, column 14: unexpected '*'"));
  EXPECT_THAT(EbnfError("root ::= \"a\nb\"").message(),
              HasSubstr("line 1, column 10: unterminated literal"));
  EXPECT_THAT(EbnfError("root ::= Regex(\"(a\")").message(), HasSubstr("line 1, column 16:"));
  // Regex("") is the empty string and a Regex matching nothing kills its
  // alternative (grammar_fuzzer found a Regex("") terminal failing Validate).
  auto empty_re = MustRecognizer(ParseXgrammarEbnf(
      "root ::= \"a\" Regex(\"\") \"b\" | \"c\" Regex(\"[^\\\\x00-\\\\x{10FFFF}]\")\n"));
  EXPECT_TRUE(Accepts(empty_re, "ab"));
  EXPECT_FALSE(Accepts(empty_re, "c"));
  auto nullable_re = MustRecognizer(ParseXgrammarEbnf("root ::= \"a\" Regex(\"x*\") \"b\"\n"));
  EXPECT_TRUE(Accepts(nullable_re, "ab"));
  EXPECT_TRUE(Accepts(nullable_re, "axxb"));
  // A user rule named like a helper rule keeps its name; the helper yields.
  auto clash = ParseXgrammarEbnf("root ::= (\"a\" | \"c\")* root__1\nroot__1 ::= \"b\"\n");
  ASSERT_TRUE(clash.ok()) << clash.status();
  std::set<std::string> names;
  for (const Rule& rule : clash->rules) EXPECT_TRUE(names.insert(rule.name).second) << rule.name;
  EXPECT_TRUE(names.count("root__1"));
  auto cr = MustRecognizer(clash);
  EXPECT_TRUE(Accepts(cr, "acab"));
  EXPECT_TRUE(Accepts(cr, "b"));
  EXPECT_FALSE(Accepts(cr, "a"));
  // '.' is a name character in EBNF, not "any character".
  EXPECT_THAT(EbnfError("root ::= .").message(), HasSubstr("undefined rule '.'"));
}

TEST(BnfParser, ErrorPositions) {
  struct Case {
    const char* text;
    absl::StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {"root ::= foo\n", absl::StatusCode::kInvalidArgument, "line 1, column 10: undefined rule 'foo'"},
      {"root ::= a\na ::= \"x\" bar baz\n", absl::StatusCode::kInvalidArgument,
       "line 2, column 11: undefined rule 'bar'"},
      {"root ::= \"abc", absl::StatusCode::kInvalidArgument, "line 1, column 10: unterminated literal"},
      {"root ::=\n  \"a\\q\"", absl::StatusCode::kInvalidArgument, "line 2, column 5: bad escape \\q"},
      {"root ::= \"\\x4\"", absl::StatusCode::kInvalidArgument,
       "line 1, column 11: bad escape: expecting 2 hex digits"},
      {"root ::= \"\\uD800\"", absl::StatusCode::kInvalidArgument,
       "line 1, column 11: bad escape: U+D800 is not a Unicode scalar value"},
      {"root ::= [z-a]", absl::StatusCode::kInvalidArgument,
       "line 1, column 11: bad range z-a (end before start)"},
      {"root ::= [abc", absl::StatusCode::kInvalidArgument,
       "line 1, column 10: unterminated character class"},
      {"foo ::= \"a\"", absl::StatusCode::kInvalidArgument,
       "line 1, column 1: no rule named 'root'"},
      {"root ::= \"a\"\nroot ::= \"b\"", absl::StatusCode::kInvalidArgument,
       "line 2, column 1: rule 'root' is defined twice (first at line 1, column 1)"},
      {"root ::= <think> \"a\"", absl::StatusCode::kInvalidArgument,
       "line 1, column 10: token references"},
      {"root = \"a\"", absl::StatusCode::kInvalidArgument, "line 1, column 6: expecting '::='"},
      {"root ::= \"a\")", absl::StatusCode::kInvalidArgument, "line 1, column 13: unexpected ')'"},
      {"root ::= (\"a\"", absl::StatusCode::kInvalidArgument,
       "line 1, column 10: unterminated group"},
      {"root ::= (\"a\" ]", absl::StatusCode::kInvalidArgument, "line 1, column 15: unexpected ']'"},
      {"root ::= \"\xC3\"", absl::StatusCode::kInvalidArgument, "line 1, column 11: invalid UTF-8"},
      {"root ::= \"a\" @", absl::StatusCode::kInvalidArgument, "line 1, column 14: unexpected '@'"},
  };
  for (const Case& c : cases) {
    absl::Status s = GbnfError(c.text);
    EXPECT_EQ(s.code(), c.code) << c.text << " -> " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message)) << c.text;
  }
}

TEST(BnfParser, DeepNestingIsACleanError) {
  std::string text = "root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')');
  for (uint32_t nesting : {256u, 1u << 30}) {
    GrammarLimits limits;
    limits.max_nesting = nesting;
    absl::Status s = GbnfError(text, limits);
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("max_nesting"));
    s = EbnfError(text, limits);
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  }
  // Within the limit, nesting is fine.
  std::string ok = "root ::= " + std::string(200, '(') + "\"a\"" + std::string(200, ')');
  auto r = MustRecognizer(ParseGbnf(ok));
  EXPECT_TRUE(Accepts(r, "a"));
}

TEST(BnfParser, Limits) {
  GrammarLimits small;
  small.max_text_bytes = 10;
  EXPECT_THAT(GbnfError("root ::= \"abcdef\"", small).message(), HasSubstr("max_text_bytes"));
  EXPECT_EQ(GbnfError("root ::= \"abcdef\"", small).code(), absl::StatusCode::kResourceExhausted);

  small = {};
  small.max_repeat = 10;
  absl::Status s = GbnfError("root ::= \"a\"{11}", small);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("line 1, column 13: repeat count 11 is more than 10 (max_repeat)"));
  EXPECT_TRUE(GbnfError("root ::= \"a\"{10}", small).ok());
  // A count too large for any integer type is the same error.
  EXPECT_EQ(GbnfError("root ::= \"a\"{99999999999999999999999}").code(),
            absl::StatusCode::kResourceExhausted);

  small = {};
  small.max_rules = 3;
  s = GbnfError("root ::= a b c\na ::= \"1\"\nb ::= \"2\"\nc ::= \"3\"", small);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_rules"));

  small = {};
  small.max_terminals = 2;
  s = GbnfError("root ::= \"1\" \"2\" \"3\"", small);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("line 1, column 18: more than 2 terminals (max_terminals)"));

  small = {};
  small.max_symbols = 3;
  s = GbnfError("root ::= \"1\" \"2\" \"3\" \"4\"", small);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_symbols"));
}

TEST(BnfParser, HelperRulesGrowLinearly) {
  // n groups with operators: O(n) rules and symbols.
  std::string text = "root ::=";
  const int n = 2000;
  for (int i = 0; i < n; ++i) absl::StrAppend(&text, " (\"a\" | r", i % 7, ")*");
  for (int i = 0; i < 7; ++i) absl::StrAppend(&text, "\nr", i, " ::= \"b\" r", i, "?");
  auto g = ParseGbnf(text);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_LE(g->rules.size(), 3u * n);
  size_t symbols = 0;
  for (const Rule& r : g->rules) {
    for (const auto& a : r.alternatives) symbols += a.size();
  }
  EXPECT_LE(symbols, 8u * n);
  // A counted repeat of a group costs O(log n) helper rules.
  auto big = ParseGbnf("root ::= (\"a\" | \"bc\"){0,1000} (\"d\" \"e\"?){999}");
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_LE(big->rules.size(), 60u);
  auto r = MustRecognizer(big);
  std::string text999;
  for (int i = 0; i < 999; ++i) text999 += (i % 3 == 0) ? "de" : "d";
  EXPECT_TRUE(Accepts(r, "abca" + text999));
  EXPECT_FALSE(Accepts(r, "abca" + text999.substr(1)));
}

// Mutated grammar texts: only client errors, parsed grammars always valid,
// and the recognizer runs on them. (fuzz/grammar_fuzzer.cc does this without
// bound under libFuzzer and sanitizers.)
TEST(BnfParser, MutatedTextsFailCleanly) {
  std::vector<std::string> seeds;
  for (const char* name : {"json.gbnf", "arithmetic.gbnf", "list.gbnf", "chess.gbnf", "c.gbnf"}) {
    seeds.push_back(ReadGrammar(name));
  }
  seeds.push_back("root ::= a b.c_d* Regex(\"[0-9]{2}\")\na ::= \"\\x41\\e\" | ()\nb.c_d ::= [\\-\\]x]\n");
  static const std::vector<std::string> kSnippets = {
      "(", ")", "|", "\n", "\"", "[", "]", "^", "-", "\\", "\\x", "\\u12", "*", "+", "?",
      "{", "}", "{2,1}", "{3}", ",", "::=", "root", " ::= ", "#", ".", "(=", "<", "\xC3", "\xFF",
      "\\U0010FFFF", "\\uD800", "a-b", "Regex(", "x ::= x\n"};
  std::mt19937 rng(2024);
  GrammarLimits limits;
  limits.max_rules = 500;
  limits.max_nesting = 32;
  limits.max_repeat = 16;
  EarleyOptions options;
  options.max_items_per_position = 4096;
  int parsed = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = seeds[rng() % seeds.size()];
    for (int e = 1 + rng() % 4; e > 0; --e) {
      size_t at = rng() % (text.size() + 1);
      switch (rng() % 3) {
        case 0:
          text.erase(at, 1 + rng() % 3);
          break;
        case 1:
          text.insert(at, kSnippets[rng() % kSnippets.size()]);
          break;
        default:
          text.insert(at, text.substr(rng() % text.size(), rng() % 12));
          break;
      }
    }
    const bool gbnf = i % 2 == 0;
    auto g = gbnf ? ParseGbnf(text, limits) : ParseXgrammarEbnf(text, limits);
    if (!g.ok()) {
      ++refused;
      absl::StatusCode c = g.status().code();
      ASSERT_TRUE(c == absl::StatusCode::kInvalidArgument ||
                  c == absl::StatusCode::kResourceExhausted)
          << g.status() << "\n" << text;
      ASSERT_LT(g.status().message().size(), 4096u);
      continue;
    }
    ++parsed;
    ASSERT_TRUE(Validate(*g).ok()) << Validate(*g) << "\n" << text;
    auto r = EarleyRecognizer::Create(*g, options);
    ASSERT_TRUE(r.ok() || r.status().code() == absl::StatusCode::kResourceExhausted) << r.status();
    if (!r.ok()) continue;
    for (std::string_view probe : {"", "a", "{\"a\": 1}", "1. e4 e5\n"}) {
      auto a = r->Accepts(probe);
      ASSERT_TRUE(a.ok() || a.status().code() == absl::StatusCode::kResourceExhausted);
    }
  }
  EXPECT_GT(parsed, 300);
  EXPECT_GT(refused, 300);
}

// --- Differential: random regular expressions written as GBNF and as regex.

struct Expr {
  std::string gbnf;
  std::string regex;
};

// A random expression over the alphabet {a, b, c}: literals, classes,
// groups with alternatives, and every operator.
Expr RandomExpr(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  int kind = depth <= 0 ? pick(2) : pick(5);
  Expr e;
  switch (kind) {
    case 0: {
      static const char* kLits[] = {"a", "b", "c", "ab", "ca", "abc", ""};
      std::string lit = kLits[pick(7)];
      e.gbnf = "\"" + lit + "\"";
      e.regex = lit.empty() ? "(?:)" : "(?:" + lit + ")";
      break;
    }
    case 1: {
      static const char* kClasses[] = {"[ab]", "[^a]", "[a-c]", "[b-c]", "[c]"};
      std::string cls = kClasses[pick(5)];
      e.gbnf = cls;
      // [^a] means any character but a; the strings tested are over {a,b,c}.
      e.regex = cls;
      break;
    }
    case 2: {
      int n = 2 + pick(2);
      e.gbnf = "(";
      e.regex = "(?:";
      for (int i = 0; i < n; ++i) {
        Expr c = RandomExpr(rng, depth - 1);
        e.gbnf += (i ? " | " : "") + c.gbnf;
        e.regex += (i ? "|" : "") + c.regex;
      }
      e.gbnf += ")";
      e.regex += ")";
      break;
    }
    case 3: {
      int n = 2 + pick(2);
      e.gbnf = "(";
      e.regex = "(?:";
      for (int i = 0; i < n; ++i) {
        Expr c = RandomExpr(rng, depth - 1);
        e.gbnf += (i ? " " : "") + c.gbnf;
        e.regex += c.regex;
      }
      e.gbnf += ")";
      e.regex += ")";
      break;
    }
    default: {
      Expr c = RandomExpr(rng, depth - 1);
      static const char* kOps[] = {"*", "+", "?", "{2}", "{0,2}", "{1,}", "{2,3}", "{0}"};
      std::string op = kOps[pick(8)];
      e.gbnf = "(" + c.gbnf + ")" + op;
      e.regex = "(?:" + c.regex + ")" + op;
      break;
    }
  }
  return e;
}

TEST(BnfParser, LoweringMatchesRegexEngine) {
  std::mt19937 rng(15);
  std::vector<std::string> strings = {""};
  for (size_t i = 0; strings[i].size() < 6; ++i) {
    for (char c : std::string("abc")) strings.push_back(strings[i] + c);
  }
  int compared = 0, accepted = 0;
  for (int trial = 0; trial < 150; ++trial) {
    Expr e = RandomExpr(rng, 3);
    std::string gbnf = "root ::= " + e.gbnf;
    auto dfa = Dfa::FromPattern(e.regex);
    ASSERT_TRUE(dfa.ok()) << e.regex << ": " << dfa.status();
    auto g = ParseGbnf(gbnf);
    if (!g.ok()) {
      // Only a language with no string at all may fail (Normalize).
      EXPECT_THAT(std::string(g.status().message()), HasSubstr("derives no string")) << gbnf;
      continue;
    }
    auto r = EarleyRecognizer::Create(*g);
    ASSERT_TRUE(r.ok()) << gbnf << ": " << r.status();
    for (const std::string& s : strings) {
      auto a = r->Accepts(s);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_EQ(*a, (*dfa)->Matches(s)) << gbnf << "\nregex: " << e.regex << "\ntext: \"" << s
                                        << "\"\n" << ToText(*g);
      ++compared;
      accepted += *a;
    }
  }
  EXPECT_GT(compared, 100000);
  EXPECT_GT(accepted, 5000);
}

}  // namespace
}  // namespace maskd::grammar
