// The incremental Earley parser under %ignore (issue #26, item 4):
//   - its chart stays flat on long whitespace-heavy output: over 8 KB of
//     seeded random spaces, tabs and newlines between the tokens of a valid
//     expression, no Earley set holds more than a few items over the
//     largest set of the first 256 bytes (before, ignored text re-opened
//     every rule item at each byte, so sets grew with the run);
//   - it recognizes the same language as the reference recognizer (earley.h,
//     which absorbs ignored strings at every dot position): the same next
//     bytes and acceptance at every prefix of whitespace-heavy texts and
//     their mutations, and of every short text under random grammars with
//     %ignore.
#include <algorithm>
#include <bitset>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/earley.h"
#include "grammar/earley_parser.h"
#include "grammar/grammar.h"
#include "grammar/lark_parser.h"
#include "gtest/gtest.h"
#include "tests/grammar/earley_test_util.h"

namespace maskd::grammar {
namespace {

using ::maskd::grammar::earley_test::AllStrings;
using ::maskd::grammar::earley_test::MustCreate;
using ::maskd::grammar::earley_test::Quoted;
using ::maskd::grammar::earley_test::RandomGrammar;

constexpr char kArithmetic[] = R"lark(
?start: sum
?sum: product | sum "+" product | sum "-" product
?product: atom | product "*" atom | product "/" atom
?atom: NUMBER | NAME | "-" atom | "(" sum ")"
%import common.CNAME -> NAME
%import common.NUMBER
)lark";

struct IgnoreCase {
  const char* name;
  const char* ignore;      // the %ignore lines appended to kArithmetic
  const char* whitespace;  // the bytes the generator puts between tokens
};

const IgnoreCase kCases[] = {
    {"common_ws", "%import common.WS\n%ignore WS\n", " \t\n\r"},
    {"ws_inline", "%import common.WS_INLINE\n%ignore WS_INLINE\n", " \t"},
    // Single bytes, none closed under concatenation: runs are sequences.
    {"single_bytes", "%ignore \" \"\n%ignore \"\\t\"\n%ignore \"\\n\"\n", " \t\n"},
    // Whitespace and comments, overlapping on nothing.
    {"ws_and_comments", "%import common.WS\n%ignore WS\n%ignore /#[^\\n]*\\n/\n", " \t\n#"},
};

Grammar MustParse(const IgnoreCase& c) {
  absl::StatusOr<Grammar> g = ParseLark(std::string(kArithmetic) + c.ignore);
  EXPECT_TRUE(g.ok()) << c.name << ": " << g.status();
  return g.ok() ? *g : Grammar();
}

// A valid expression with random ignored text between its tokens, at least
// `target` bytes: runs of up to 11 bytes, and with `long_runs` one in 8 of
// 100-399 bytes.
class ExpressionGen {
 public:
  ExpressionGen(uint32_t seed, const IgnoreCase& c, bool long_runs)
      : rng_(seed), ws_(c.whitespace), long_runs_(long_runs) {}

  std::string Text(size_t target) {
    std::string out = Gap();
    int depth = 0;
    for (;;) {
      // An operand, then an operator or a closing parenthesis.
      while (out.size() < target && depth < 3 && Pick(4) == 0) {
        out += Pick(3) == 0 ? "-" : "(";
        depth += out.back() == '(';
        out += Gap();
      }
      if (Pick(2) == 0) out += 'x';  // a name, else a number
      out += std::to_string(Pick(100000));
      out += Gap();
      while (depth > 0 && (out.size() >= target || Pick(3) == 0)) {
        out += ")";
        --depth;
        out += Gap();
      }
      if (out.size() >= target) break;
      out += "+-*/"[Pick(4)];
      out += Gap();
    }
    return out;
  }

 private:
  int Pick(int n) { return static_cast<int>(rng_() % n); }

  std::string Gap() {
    const size_t len = long_runs_ && Pick(8) == 0 ? 100 + Pick(300) : Pick(12);
    std::string gap;
    for (size_t k = 0; k < len; ++k) {
      char c = ws_[Pick(static_cast<int>(ws_.size()))];
      if (c == '#') {
        gap += "# comment " + std::to_string(Pick(1000)) + "\n";
      } else {
        gap += c;
      }
    }
    return gap;
  }

  std::mt19937 rng_;
  std::string ws_;
  bool long_runs_;
};

EarleyParser MustParser(const Grammar& g) {
  auto compiled = CompiledGrammar::Create(g);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  auto parser = EarleyParser::Create(*compiled);
  EXPECT_TRUE(parser.ok()) << parser.status();
  return std::move(*parser);
}

TEST(EarleyIgnoreChart, ItemsPerSetStayFlatOver8KBOfWhitespaceHeavyOutput) {
  for (const IgnoreCase& c : kCases) {
    const Grammar g = MustParse(c);
    for (uint32_t seed : {1u, 2u, 3u, 4u}) {
      const std::string text = ExpressionGen(seed, c, /*long_runs=*/true).Text(8192);
      ASSERT_GE(text.size(), 8192u);
      EarleyParser parser = MustParser(g);
      size_t max_first = parser.last_set().size(), max_all = max_first;
      for (size_t i = 0; i < text.size(); ++i) {
        absl::StatusOr<bool> live = parser.Push(static_cast<uint8_t>(text[i]));
        ASSERT_TRUE(live.ok()) << c.name << " seed " << seed << " byte " << i << ": "
                               << live.status();
        ASSERT_TRUE(*live) << c.name << " seed " << seed << " refuses byte " << i << " after "
                           << Quoted(text.substr(i < 40 ? 0 : i - 40, i < 40 ? i + 1 : 41));
        max_all = std::max(max_all, parser.last_set().size());
        if (i < 256) max_first = max_all;
      }
      EXPECT_TRUE(parser.IsAccepting()) << c.name << " seed " << seed << " ends "
                                        << Quoted(text.substr(text.size() - 60));
      // Sets differ by what is open at each byte (parentheses, a prefix
      // minus), never by how much was read or ignored before.
      EXPECT_LE(max_all, max_first + 8)
          << c.name << " seed " << seed << ": the largest Earley set holds " << max_all
          << " items after " << text.size() << " bytes, " << max_first
          << " after 256; chart " << parser.num_items() << " items";
      EXPECT_LT(parser.num_items(), 64 * text.size()) << c.name << " seed " << seed;
      std::printf("%s seed %u: %zu bytes, largest set %zu items (%zu in the first 256 bytes), "
                  "%.1f items per byte\n",
                  c.name, seed, text.size(), max_all, max_first,
                  static_cast<double>(parser.num_items()) / static_cast<double>(text.size()));
    }
  }
}

// Next bytes and acceptance of the parser and the reference recognizer at
// every prefix of `text` (up to where the text stops being viable).
void ExpectSameAtEveryPrefix(const EarleyRecognizer& reference, const Grammar& g,
                             const std::string& text, const std::string& what) {
  EarleyParser parser = MustParser(g);
  for (size_t i = 0;; ++i) {
    const std::string prefix = text.substr(0, i);
    absl::StatusOr<std::bitset<256>> next = reference.NextBytes(prefix);
    absl::StatusOr<bool> accepts = reference.Accepts(prefix);
    ASSERT_TRUE(next.ok() && accepts.ok()) << what;
    ASSERT_EQ(parser.NextBytes(), *next) << what << " after " << Quoted(prefix);
    ASSERT_EQ(parser.IsAccepting(), *accepts) << what << " after " << Quoted(prefix);
    if (i == text.size()) return;
    absl::StatusOr<bool> live = parser.Push(static_cast<uint8_t>(text[i]));
    ASSERT_TRUE(live.ok()) << what << ": " << live.status();
    ASSERT_EQ(*live, (*next)[static_cast<uint8_t>(text[i])]) << what << " at " << Quoted(prefix);
    if (!*live) return;
  }
}

TEST(EarleyIgnoreChart, SameLanguageAsTheReferenceOnWhitespaceHeavyTexts) {
  for (const IgnoreCase& c : kCases) {
    const Grammar g = MustParse(c);
    const EarleyRecognizer reference = MustCreate(g);
    std::mt19937 rng(77);
    for (uint32_t seed = 0; seed < 8; ++seed) {
      // Short: the reference's sets grow with each run.
      const std::string text = ExpressionGen(seed + 100, c, /*long_runs=*/false).Text(40);
      ExpectSameAtEveryPrefix(reference, g, text, std::string(c.name) + " text");
      // Mutations: a byte dropped, doubled or replaced by one of the text's.
      for (int m = 0; m < 4 && !text.empty(); ++m) {
        std::string bad = text;
        const size_t at = rng() % bad.size();
        switch (rng() % 3) {
          case 0: bad.erase(at, 1); break;
          case 1: bad.insert(at, 1, bad[at]); break;
          default: bad[at] = text[rng() % text.size()]; break;
        }
        ExpectSameAtEveryPrefix(reference, g, bad, std::string(c.name) + " mutation");
      }
    }
  }
}

TEST(EarleyIgnoreChart, SameLanguageAsTheReferenceOnRandomGrammarsWithIgnore) {
  std::mt19937 rng(2626);
  const std::vector<std::string> strings = AllStrings("abc", 5);
  int grammars = 0;
  while (grammars < 60) {
    Grammar g = RandomGrammar(rng);
    if (g.ignore.empty() || !Normalize(&g).ok()) continue;
    ++grammars;
    const EarleyRecognizer reference = MustCreate(g);
    for (const std::string& s : strings) {
      ExpectSameAtEveryPrefix(reference, g, s, ToText(g) + "text " + Quoted(s));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace maskd::grammar
