// ParseLark: grammar shapes accepted and checked through the reference Earley
// recognizer, errors with their positions, limits. The differential test
// against the Python lark library is tests/grammar/lark_oracle.py.
#include "grammar/lark_parser.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "grammar/earley.h"
#include "grammar/python_regex.h"

namespace maskd::grammar {
namespace {

// Parses `lark` and returns a recognizer (fails the test on error).
EarleyRecognizer Compile(const std::string& lark) {
  auto g = ParseLark(lark);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) std::abort();
  auto r = EarleyRecognizer::Create(*g);
  EXPECT_TRUE(r.ok()) << r.status() << "\n" << ToText(*g);
  if (!r.ok()) std::abort();
  return std::move(*r);
}

void ExpectAccepts(const EarleyRecognizer& r, const std::string& text, bool want) {
  auto got = r.Accepts(text);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, want) << "text: " << text;
}

std::string ErrorOf(const std::string& lark, const GrammarLimits& limits = {}) {
  auto g = ParseLark(lark, limits);
  if (g.ok()) return "OK";
  return std::string(absl::StatusCodeToString(g.status().code())) + ": " +
         std::string(g.status().message());
}

const char kJson[] = R"L(
?start: value
?value: object
      | array
      | string
      | SIGNED_NUMBER      -> number
      | "true"             -> true
      | "false"            -> false
      | "null"             -> null
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : string ":" value
string : ESCAPED_STRING

%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
)L";

TEST(LarkParser, Json) {
  auto r = Compile(kJson);
  ExpectAccepts(r, R"L({"a": [1, 2.5e3, -3], "b": {"c": null}, "d": "x\"y"})L", true);
  ExpectAccepts(r, "  [ true , false ]  ", true);
  ExpectAccepts(r, "[]", true);
  ExpectAccepts(r, "[1,]", false);
  ExpectAccepts(r, R"L({"a" 1})L", false);
  ExpectAccepts(r, R"L("unterminated)L", false);
  ExpectAccepts(r, "[1 2]", false);
}

const char kArithmetic[] = R"L(
    ?start: sum
    ?sum: product
        | sum "+" product   -> add
        | sum "-" product   -> sub
    ?product: atom
        | product "*" atom  -> mul
        | product "/" atom  -> div
    ?atom: NUMBER           -> number
         | "-" atom         -> neg
         | NAME             -> var
         | "(" sum ")"
    %import common.CNAME -> NAME
    %import common.NUMBER
    %import common.WS_INLINE
    %ignore WS_INLINE
  )L";

// Outlines' CFG samples (../shared/corpora/outlines/cfg_samples): the JSON and
// arithmetic outputs its tests expect to parse, which Python's lark accepts
// with the grammars above (arithmetic without its trailing newline); every
// prefix of the small ones is viable.
TEST(LarkParser, OutlinesCfgSamples) {
  std::filesystem::path dir = std::filesystem::path(MASKD_SHARED_DIR) / "corpora/outlines/cfg_samples";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no " << dir << " (../shared is absent)";
  int checked = 0;
  for (const char* kind : {"json", "arithmetic"}) {
    auto r = Compile(std::string(kind) == std::string("json") ? kJson : kArithmetic);
    for (const auto& entry : std::filesystem::directory_iterator(dir / kind)) {
      std::ifstream in(entry.path(), std::ios::binary);
      std::stringstream buf;
      buf << in.rdbuf();
      std::string text = buf.str();
      if (std::string(kind) == "arithmetic") {
        while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
      }
      SCOPED_TRACE(entry.path().string());
      ExpectAccepts(r, text, true);
      if (text.size() < 1000) {
        for (size_t n = 0; n < text.size(); ++n) {
          auto v = r.IsViablePrefix(text.substr(0, n));
          ASSERT_TRUE(v.ok()) << v.status();
          EXPECT_TRUE(*v) << "prefix of " << n << " bytes";
        }
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 5);
}

TEST(LarkParser, ArithmeticWithIgnore) {
  auto r = Compile(R"L(
    ?start: sum
    ?sum: product
        | sum "+" product   -> add
        | sum "-" product   -> sub
    ?product: atom
        | product "*" atom  -> mul
        | product "/" atom  -> div
    ?atom: NUMBER           -> number
         | "-" atom         -> neg
         | NAME             -> var
         | "(" sum ")"
    %import common.CNAME -> NAME
    %import common.NUMBER
    %import common.WS_INLINE
    %ignore WS_INLINE
  )L");
  ExpectAccepts(r, "1 + 2 * (x - 3.5)", true);
  ExpectAccepts(r, "--x", true);
  ExpectAccepts(r, "1 +", false);
  ExpectAccepts(r, "(1", false);
  ExpectAccepts(r, "1\n+2", false);  // WS_INLINE has no newline
}

TEST(LarkParser, SqlSubsetCaseInsensitive) {
  auto r = Compile(R"L(
    start: select_stmt
    select_stmt: SELECT columns FROM NAME [WHERE condition]
    columns: "*" | NAME ("," NAME)*
    condition: NAME OP value
    value: NUMBER | STRING
    SELECT: "select"i
    FROM: "from"i
    WHERE: "where"i
    OP: "=" | "<" | ">" | "<=" | ">=" | "!="
    NAME: /[a-z_][a-z0-9_]*/
    STRING: /'[^']*'/
    %import common.NUMBER
    %import common.WS
    %ignore WS
  )L");
  ExpectAccepts(r, "SELECT a, b FROM t WHERE a >= 3", true);
  ExpectAccepts(r, "select * from t", true);
  ExpectAccepts(r, "SeLeCt x FrOm y where z = 'q'", true);
  ExpectAccepts(r, "select from t", false);
  // Python's (?i) folds the Kelvin sign with k and the long s with s.
  ExpectAccepts(r,
                "\xC5\xBF"
                "elect x from t",
                true);
}

TEST(LarkParser, CLikeSnippet) {
  auto r = Compile(R"L(
    start: stmt*
    ?stmt: decl | assign | if_stmt | block
    decl: TYPE NAME ["=" expr] ";"
    assign: NAME "=" expr ";"
    if_stmt: "if" "(" expr ")" stmt ["else" stmt]
    block: "{" stmt* "}"
    ?expr: term (("+" | "-") term)*
    ?term: factor (("*" | "/") factor)*
    ?factor: NAME | INT | "(" expr ")"
    TYPE.2: "int" | "char"
    NAME: /[A-Za-z_]\w*/
    %import common.INT
    %import common.WS
    %import common.C_COMMENT
    %import common.CPP_COMMENT
    %ignore WS
    %ignore C_COMMENT
    %ignore CPP_COMMENT
  )L");
  ExpectAccepts(r, "int x = 1; /* c */ if (x) { x = x * 2; } else y = 3; // done", true);
  ExpectAccepts(r, "", true);
  ExpectAccepts(r, "int x = ;", false);
  ExpectAccepts(r, "int = 1;", true);  // NAME matches "int" too: every split counts
  ExpectAccepts(r, "x = 1 /* open", false);
  ExpectAccepts(r, "x\xC3\xA9t\xC3\xA9 = 1;", true);  // \w is Unicode, as in Python
}

TEST(LarkParser, OutlinesStyleAndOperators) {
  auto r = Compile(R"L(
    start: item ~ 2..3 ","? tail
    item: LETTER+ | DIGIT ~ 2
    tail: "<" sep{NUM, ";"} ">"
    sep{x, s}: x (s x)*
    NUM: /\d+/
    %import common.LETTER
    %import common.DIGIT
  )L");
  ExpectAccepts(r, "ab12c<1;22>", true);
  ExpectAccepts(r, "abc,<1>", true);
  ExpectAccepts(r, "a<1>", false);   // ~ 2..3: at least two items
  ExpectAccepts(r, "a1<1>", false);  // DIGIT ~ 2
  ExpectAccepts(r, "ab12<1;>", false);
}

TEST(LarkParser, TerminalsInlineAndKeepPriorityAndLiteral) {
  auto g = ParseLark(R"L(
    start: A B "x"
    A.3: "ab" "cd"
    B: A | /[0-9]+/
  )L");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->terminals.size(), 3u);
  EXPECT_EQ(g->terminals[0].name, "A");
  EXPECT_EQ(g->terminals[0].priority, 3);
  EXPECT_EQ(g->terminals[0].literal, std::optional<std::string>("abcd"));
  EXPECT_EQ(g->terminals[1].name, "B");
  EXPECT_FALSE(g->terminals[1].literal.has_value());
  EXPECT_EQ(g->terminals[2].literal, std::optional<std::string>("x"));
  auto r = EarleyRecognizer::Create(*g);
  ASSERT_TRUE(r.ok());
  ExpectAccepts(*r, "abcdabcdx", true);
  ExpectAccepts(*r, "abcd123x", true);
  ExpectAccepts(*r, "abcdx", false);
}

TEST(LarkParser, StringEscapesAndRegexFlags) {
  auto r = Compile(R"L(
    start: "a\"b" "\\" /x y # comment
                         z/x "\x41" /[a-c]+/i /a.b/s "\t"
  )L");
  ExpectAccepts(r, "a\"b\\xyzAbCaa\nb\t", true);
  ExpectAccepts(r, "a\"b\\xyzAdA\nb\t", false);
  ExpectAccepts(r, "a\"b\\x yzAaa\nb\t", false);
}

TEST(LarkParser, Errors) {
  EXPECT_EQ(ErrorOf("start: a\n"),
            "INVALID_ARGUMENT: line 1, column 8: rule 'a' is used but not defined");
  EXPECT_EQ(ErrorOf("start: \"a\"\nstart: \"b\"\n"),
            "INVALID_ARGUMENT: line 2, column 1: rule 'start' is defined more than once (first at "
            "line 1)");
  EXPECT_EQ(ErrorOf("start: A\nA: \"a\" A\n"),
            "INVALID_ARGUMENT: line 2, column 1: terminal 'A' is defined in terms of itself");
  EXPECT_EQ(ErrorOf("start: (\"a\"\n"),
            "INVALID_ARGUMENT: line 1, column 12: expected ')', got end of line");
  EXPECT_EQ(ErrorOf("start: A\nA: b\nb: \"x\"\n"),
            "INVALID_ARGUMENT: line 2, column 4: terminals cannot contain rules ('b')");
  EXPECT_EQ(
      ErrorOf("start: /a*/\n"),
      "INVALID_ARGUMENT: line 1, column 8: terminal /a*/ matches the empty string (Lark's Earley "
      "parser refuses zero-width terminals)");
  EXPECT_EQ(ErrorOf("start: /(?=a)a/\n"),
            "INVALID_ARGUMENT: line 1, column 8: regex /(?=a)a/: lookaround is not supported at "
            "offset 0");
  EXPECT_EQ(ErrorOf("start: /^a/\n"),
            "INVALID_ARGUMENT: line 1, column 8: regex /^a/: anchors (^, $) are not supported: a "
            "terminal "
            "is matched whole at offset 0");
  EXPECT_EQ(
      ErrorOf("%declare X\nstart: X\n"),
      "INVALID_ARGUMENT: line 1, column 1: %declare is not supported: declared terminals need an "
      "external lexer");
  EXPECT_EQ(
      ErrorOf("%import python.NAME\nstart: NAME\n"),
      "INVALID_ARGUMENT: line 1, column 9: %import from 'python' is not supported (only common)");
  EXPECT_EQ(ErrorOf("%import common.NOPE\nstart: \"a\"\n"),
            "INVALID_ARGUMENT: line 1, column 16: common defines no terminal 'NOPE'");
  EXPECT_EQ(ErrorOf("other: \"a\"\n"), "INVALID_ARGUMENT: no start rule 'start' in the grammar");
  // As in Lark, "Foo" reads as the terminal F then the rule oo.
  EXPECT_EQ(ErrorOf("start: \"a\" Foo\n"),
            "INVALID_ARGUMENT: line 1, column 12: terminal 'F' is used but not defined");
  // As in Lark, '?' before a lowercase name is a rule modifier, not an operator.
  EXPECT_EQ(ErrorOf("start: \"a\"?b\nb: \"c\"\n"),
            "INVALID_ARGUMENT: line 1, column 11: expected end of line, got '?'");
  EXPECT_EQ(ErrorOf("start: \"a\"?B\nB: \"c\"\n"), "OK");
  EXPECT_EQ(ErrorOf("?!start: \"a\"\n"), "OK");
  EXPECT_EQ(ErrorOf("??start: \"a\"\n"),
            "INVALID_ARGUMENT: line 1, column 2: expected a rule name, got '?'");
  EXPECT_EQ(ErrorOf("start: \"a\"\n%json {}\n"),
            "INVALID_ARGUMENT: line 2, column 1: unknown directive '%json'");
  EXPECT_EQ(ErrorOf("start: \"\"\n"),
            "INVALID_ARGUMENT: line 1, column 8: empty terminals are not allowed (\"\")");
  EXPECT_EQ(ErrorOf("start: \"a\" ~ 3..2\n"),
            "INVALID_ARGUMENT: line 1, column 17: bad repeat range 3..2");
  EXPECT_EQ(ErrorOf("start: \"ab\"..\"c\"\n"),
            "INVALID_ARGUMENT: line 1, column 8: a range's ends must be single characters");
  EXPECT_EQ(ErrorOf("start: s{\"a\"}\ns{x, y}: x y\n"),
            "INVALID_ARGUMENT: line 1, column 8: template 's' takes 2 arguments, got 1");
  EXPECT_EQ(ErrorOf("start: \"a\"\n%ignore b\nb: \"x\"\n"),
            "INVALID_ARGUMENT: line 2, column 9: %ignore needs terminals; 'b' is a rule");
  EXPECT_EQ(ErrorOf("start: \"a\xff\"\n"), "INVALID_ARGUMENT: line 1, column 10: invalid UTF-8");
  EXPECT_EQ(ErrorOf("start: \"a\"\n  \xC3\xA9\n"),
            "INVALID_ARGUMENT: line 2, column 3: unexpected character '\xC3\xA9'");
  EXPECT_EQ(
      ErrorOf("start: /[\\U00010400a]/i\n"),
      "INVALID_ARGUMENT: line 1, column 8: regex /[\\U00010400a]/i: case-insensitive class with a "
      "cased character beyond U+FFFF is not supported at offset 0");
}

TEST(LarkParser, LimitsAndNesting) {
  std::string deep = "start: " + std::string(300, '(') + "\"a\"" + std::string(300, ')') + "\n";
  EXPECT_EQ(
      ErrorOf(deep),
      "RESOURCE_EXHAUSTED: line 1, column 264: groups nested too deeply (more than 256 levels: "
      "max_nesting)");
  std::string very_deep =
      "start: " + std::string(100000, '[') + "\"a\"" + std::string(100000, ']') + "\n";
  EXPECT_NE(ErrorOf(very_deep).find("max_nesting"), std::string::npos);
  // max_nesting above 500 is capped at 500; 499 levels work.
  GrammarLimits wide;
  wide.max_nesting = 1u << 30;
  std::string ok_deep = "start: " + std::string(499, '(') + "\"a\"" + std::string(499, ')') + "*\n";
  EXPECT_EQ(ErrorOf(ok_deep, wide), "OK");
  EXPECT_NE(ErrorOf(very_deep, wide).find("more than 500 levels"), std::string::npos);
  // Templates that instantiate ever larger arguments stop cleanly.
  EXPECT_NE(ErrorOf("start: t{\"a\"}\nt{x}: x | t{t{x}}\n").find("RESOURCE_EXHAUSTED"),
            std::string::npos);
  GrammarLimits small;
  small.max_text_bytes = 10;
  EXPECT_EQ(ErrorOf("start: \"abc\"\n", small),
            "RESOURCE_EXHAUSTED: grammar text is 13 bytes, over max_text_bytes (10)");
  EXPECT_NE(ErrorOf("start: \"a\" ~ 1001\n").find("max_repeat (1000)"), std::string::npos);
  small = {};
  small.max_rules = 3;
  EXPECT_NE(ErrorOf("start: (\"a\" | \"b\") (\"c\" | \"d\") (\"e\" | \"f\")\n", small)
                .find("(max_rules)"),
            std::string::npos);
  small = {};
  small.max_terminals = 2;
  EXPECT_NE(ErrorOf("start: \"a\" \"b\" \"c\"\n", small).find("(max_terminals)"),
            std::string::npos);
  small = {};
  small.max_symbols = 10;
  EXPECT_NE(ErrorOf("start: \"a\" ~ 20\n", small).find("(max_symbols)"), std::string::npos);
  // A terminal chain that doubles at each step overflows the regex size, cleanly.
  std::string blowup = "start: T0\n";
  for (int i = 0; i < 40; ++i)
    blowup += "T" + std::to_string(i) + ": T" + std::to_string(i + 1) + " T" +
              std::to_string(i + 1) + "\n";
  blowup += "T40: \"x\"\n";
  EXPECT_NE(ErrorOf(blowup).find("RESOURCE_EXHAUSTED"), std::string::npos);
  // A long chain of terminals is bounded too.
  std::string chain = "start: C0\n";
  for (int i = 0; i < 3000; ++i)
    chain += "C" + std::to_string(i) + ": C" + std::to_string(i + 1) + "\n";
  chain += "C3000: \"x\"\n";
  EXPECT_NE(ErrorOf(chain).find("nested too deeply"), std::string::npos);
}

// The shape of Outlines' own JSON grammar (its common.lark adds
// UNESCAPED_STRING: no escapes) and rule priorities.
TEST(LarkParser, OutlinesJson) {
  auto r = Compile(R"L(
    ?start: value
    ?value: object
    | array
    | UNESCAPED_STRING
    | SIGNED_NUMBER      -> number
    | "true"             -> true
    | "false"            -> false
    | "null"             -> null
    array  : "[" [value ("," value)*] "]"
    object : "{" [pair ("," pair)*] "}"
    pair.2 : UNESCAPED_STRING ":" value
    %import common.UNESCAPED_STRING
    %import common.SIGNED_NUMBER
    %import common.WS
    %ignore WS
  )L");
  ExpectAccepts(r, R"L({"name": "a", "n": [1, -2.5]})L", true);
  ExpectAccepts(r, R"L({"name": "a"b"})L", false);
  ExpectAccepts(r, "[null,true]", true);
}

TEST(LarkParser, OverrideAndExtend) {
  auto r = Compile(R"L(
    start: greeting+
    greeting: HELLO NAME
    HELLO: "hello"
    NAME: /[a-z]+/
    %override HELLO: "hi" | "hey"i
    %extend greeting: "bye" NAME?
    %extend NAME: /[0-9]+/
    %ignore " "
  )L");
  ExpectAccepts(r, "HEY 12 bye", true);
  ExpectAccepts(r, "hello z", false);
  EXPECT_EQ(ErrorOf("start: \"a\"\n%extend other: \"b\"\n"),
            "INVALID_ARGUMENT: line 2, column 1: %extend of 'other', which is not defined");
  EXPECT_EQ(
      ErrorOf("start: WS\n%import common.WS\n%extend WS: \"x\"\n"),
      "INVALID_ARGUMENT: line 3, column 1: %extend of the imported terminal 'WS' is not supported");
}

TEST(LarkParser, StartParameterAndIgnoreForms) {
  auto g = ParseLark("a: \"x\" b\nb: \"y\"\n%ignore \" \"\n%ignore /\\t+/\n", {}, "a");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->ignore.size(), 2u);
  auto r = EarleyRecognizer::Create(*g);
  ASSERT_TRUE(r.ok());
  ExpectAccepts(*r, " x\t\ty ", true);
  ExpectAccepts(*r, "x\ny", false);
}

// Mutated grammar texts never crash the parser, and what it accepts passes
// Validate (run under ASan/UBSan in CI).
TEST(LarkParser, MutatedGrammarsNeverCrash) {
  const std::string seeds[] = {
      kJson,
      "start: item ~ 2..3 \",\"? tail\nitem: LETTER+ | DIGIT ~ 2\ntail: \"<\" sep{NUM, \";\"} "
      "\">\"\n"
      "sep{x, s}: x (s x)*\nNUM: /\\d+/\n%import common.LETTER\n%import common.DIGIT\n",
      "start: /[a-z]+k/i (SEP ITEM)*\nSEP: /\\s+/ | \",\"\nITEM: /x # c\n [yz]+ /x | \"a\"..\"f\"\n"
      "%ignore \" \"\n",
  };
  const std::string pieces[] = {"(",
                                ")",
                                "[",
                                "]",
                                "{",
                                "}",
                                "|",
                                "*",
                                "+",
                                "?",
                                "~",
                                "..",
                                "->",
                                ":",
                                "\"",
                                "/",
                                "\\",
                                "%ignore ",
                                "%import common.",
                                "\n",
                                "_",
                                "A",
                                "a",
                                ".",
                                ",",
                                "#",
                                "//",
                                "\n|",
                                "i",
                                "x"};
  std::mt19937 rng(12345);
  int ok = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text = seeds[iter % 3];
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % (text.size() + 1);
      switch (rng() % 3) {
        case 0:
          text.insert(at, pieces[rng() % std::size(pieces)]);
          break;
        case 1:
          text.erase(at, 1 + rng() % 3);
          break;
        default:
          text.insert(at, text.substr(rng() % (text.size() + 1), rng() % 8));
          break;
      }
    }
    auto g = ParseLark(text);
    if (!g.ok()) {
      EXPECT_TRUE(absl::IsInvalidArgument(g.status()) || absl::IsResourceExhausted(g.status()))
          << g.status();
      continue;
    }
    ++ok;
    EXPECT_TRUE(Validate(*g).ok()) << Validate(*g) << "\n" << text;
  }
  EXPECT_GT(ok, 100);
}

TEST(PythonRegex, TranslatesPythonMeaning) {
  auto tr = [](std::string_view p, PythonRegexFlags f = {}) {
    auto r = TranslatePythonRegex(p, f);
    return r.ok() ? *r : std::string("ERROR ") + std::string(r.status().message());
  };
  EXPECT_EQ(tr("a{,2}b{}"), "a{0,2}b\\x{7B}\\x{7D}");
  EXPECT_EQ(tr("(?P<n>x)|[]a]"), "(?:x)|[\\x{5D}a]");
  PythonRegexFlags i;
  i.ignore_case = true;
  EXPECT_EQ(tr("k", i), "[Kk\u212A]");
  EXPECT_EQ(tr("(?-i:k)s", i), "(?:k)[Ss\u017F]");
  PythonRegexFlags x;
  x.verbose = true;
  EXPECT_EQ(tr("a b # c\n c", x), "abc");
  EXPECT_EQ(tr("(?s).", {}), "[\\x{0}-\\x{10FFFF}]");
  EXPECT_NE(tr("\\d").find("\u0660"), std::string::npos);  // Unicode digits
  EXPECT_EQ(tr("a(?i)b"), "ERROR global flags not at the start of the expression");
  EXPECT_EQ(tr("(a)\\1"), "ERROR backreference is not supported");
  EXPECT_EQ(tr("a*+"), "ERROR possessive quantifiers are not supported");
  EXPECT_EQ(tr("a{2}+"), "ERROR possessive quantifiers are not supported");
  EXPECT_EQ(tr("a*?b+"), "a*?b+");
  EXPECT_EQ(tr("\\p{L}"), "ERROR bad escape \\p");
  EXPECT_EQ(LiteralRegex("a.b", false), "a\\x{2E}b");
}

}  // namespace
}  // namespace maskd::grammar
