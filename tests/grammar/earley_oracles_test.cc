// The reference Earley recognizer, against independent oracles:
//   - nlohmann::json on random and mutated JSON texts (json.gbnf);
//   - a span-table recognizer (SpanOracle: a fixpoint over "rule derives
//     text[i:j]", CYK-style, with %ignore) on random grammars with left and
//     right recursion, empty rules, nullable terminals and %ignore;
//   - brute-force enumeration for IsViablePrefix.
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
using ::maskd::grammar::earley_test::RandomGrammar;

// --- JSON against nlohmann::json.

class JsonGen {
 public:
  explicit JsonGen(uint32_t seed) : rng_(seed) {}

  std::string Value(int depth) {
    int kind = Pick(depth >= 4 ? 5 : 7);
    switch (kind) {
      case 0: return String();
      case 1: return Number();
      case 2: return "true";
      case 3: return "false";
      case 4: return "null";
      case 5: {
        std::string out = "[";  // (not "[" + Ws(): GCC 12 warns -Wrestrict)
        out += Ws();
        int n = Pick(4);
        for (int i = 0; i < n; ++i) out += (i ? Ws() + "," + Ws() : "") + Value(depth + 1);
        return out + Ws() + "]";
      }
      default: {
        std::string out = "{";
        out += Ws();
        int n = Pick(4);
        for (int i = 0; i < n; ++i) {
          out += (i ? Ws() + "," + Ws() : "") + String() + Ws() + ":" + Ws() + Value(depth + 1);
        }
        return out + Ws() + "}";
      }
    }
  }

  std::string Text() { return Ws() + Value(0) + Ws(); }

  // 1-3 random edits.
  std::string Mutate(std::string s) {
    static const std::vector<std::string> kSnippets = {
        "{", "}", "[", "]", ":", ",", "\"", "\\", "0", "1", "9", ".", "e", "E", "+", "-",
        "t", "f", "n", "u", "l", " ", "\n", "x", std::string(1, '\0'), "\x1F", "\x7F", "\xC3",
        "\xA9", "\xFF", "\x80", "\\u", "\\uD800", "\\uDC00", "\\ud83d\\ude00", "true", "[]",
        "{}", "\"\":", "1e5", "-0", "00", "\xED\xA0\x80", "\xE2\x82", "\xF0\x9F\x98"};
    int edits = 1 + Pick(3);
    for (int e = 0; e < edits; ++e) {
      size_t at = s.empty() ? 0 : rng_() % (s.size() + 1);
      switch (Pick(5)) {
        case 0:
          if (at < s.size()) s.erase(at, 1);
          break;
        case 1:
          s.insert(at, kSnippets[Pick(static_cast<int>(kSnippets.size()))]);
          break;
        case 2:
          if (at < s.size()) s.replace(at, 1, kSnippets[Pick(static_cast<int>(kSnippets.size()))]);
          break;
        case 3: {
          size_t len = 1 + Pick(6);
          if (at < s.size()) s.insert(at, s.substr(at, len));
          break;
        }
        default:
          s.resize(at);
          break;
      }
    }
    return s;
  }

 private:
  int Pick(int n) { return static_cast<int>(rng_() % n); }
  std::string Ws() {
    static const char* kWs[] = {"", "", "", " ", "\n", "\t ", "\r\n  "};
    return kWs[Pick(7)];
  }
  std::string String() {
    static const char* kPieces[] = {"a", "Z", " ", "0", "\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n",
                                    "\\r", "\\t", "\\u00e9", "\\uD83D\\uDE00", "\\uFFFF",
                                    "\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80", "\x7F", "'"};
    std::string out = "\"";
    int n = Pick(6);
    for (int i = 0; i < n; ++i) out += kPieces[Pick(20)];
    return out + "\"";
  }
  std::string Number() {
    std::string out = Pick(3) == 0 ? "-" : "";
    if (Pick(3) == 0) {
      out += "0";
    } else {
      out += static_cast<char>('1' + Pick(9));
      for (int n = Pick(5); n > 0; --n) out += static_cast<char>('0' + Pick(10));
    }
    if (Pick(3) == 0) {
      out += ".";
      for (int n = 1 + Pick(3); n > 0; --n) out += static_cast<char>('0' + Pick(10));
    }
    if (Pick(3) == 0) {
      out += "eE"[Pick(2)];
      if (Pick(2)) out += "+-"[Pick(2)];
      for (int n = 1 + Pick(2); n > 0; --n) out += static_cast<char>('0' + Pick(10));
    }
    return out;
  }
  std::mt19937 rng_;
};

// nlohmann's verdict on the text; nullopt when it stops at a number that
// overflows a double ("number overflow", out_of_range 406), a limit RFC 8259
// leaves to implementations, before it has read the rest.
std::optional<bool> NlohmannAccepts(const std::string& text) {
  try {
    nlohmann::json parsed = nlohmann::json::parse(text.begin(), text.end());
    return !parsed.is_discarded();
  } catch (const nlohmann::json::parse_error&) {
    return false;
  } catch (const nlohmann::json::out_of_range& e) {
    if (e.id == 406) return std::nullopt;
    throw;
  }
}

TEST(Earley, JsonAgreesWithNlohmann) {
  auto r = FromGbnfFile("json.gbnf");
  JsonGen gen(8259);
  int both_yes = 0, both_no = 0, skipped = 0;
  std::vector<std::string> disagreements;
  for (int i = 0; i < 4000; ++i) {
    std::string text = gen.Text();
    if (i % 3 != 0) text = gen.Mutate(text);
    std::optional<bool> verdict = NlohmannAccepts(text);
    // nlohmann also skips a leading UTF-8 byte order mark and takes a NUL
    // byte outside strings as the end of the input; RFC 8259 does neither.
    if (text.rfind("\xEF\xBB\xBF", 0) == 0 || !verdict ||
        (*verdict && text.find('\0') != std::string::npos)) {
      ++skipped;
      continue;
    }
    bool want = *verdict;
    bool got = Accepts(r, text);
    if (want != got) {
      disagreements.push_back(absl::StrCat("nlohmann ", want, ", grammar ", got, ": ", Quoted(text)));
    } else {
      (want ? both_yes : both_no) += 1;
    }
    // Every prefix of an accepted text is viable; a rejected text that is a
    // viable prefix must not be a complete value for nlohmann either.
    if (got && i % 25 == 0) {
      for (size_t n = 0; n <= text.size(); ++n) {
        ASSERT_TRUE(Viable(r, std::string_view(text).substr(0, n))) << Quoted(text) << " at " << n;
      }
    }
  }
  std::cout << "json.gbnf vs nlohmann: " << both_yes << " accepted by both, " << both_no
            << " rejected by both, " << disagreements.size() << " disagreements, " << skipped
            << " skipped\n";
  for (size_t k = 0; k < disagreements.size() && k < 10; ++k) ADD_FAILURE() << disagreements[k];
  EXPECT_TRUE(disagreements.empty()) << disagreements.size() << " disagreements";
  EXPECT_GT(both_yes, 1500);
  EXPECT_GT(both_no, 1500);
  EXPECT_LT(skipped, 40);
}

// --- An independent recognizer: which rules derive which spans.

TEST(Earley, AgreesWithSpanOracleOnRandomGrammars) {
  std::mt19937 rng(1515);
  const auto strings = AllStrings("abc", 5);
  int grammars = 0, accepted = 0, compared = 0, with_ignore = 0;
  while (grammars < 120) {
    Grammar g = RandomGrammar(rng);
    if (!Normalize(&g).ok()) continue;
    ASSERT_TRUE(Validate(g).ok()) << Validate(g);
    ++grammars;
    with_ignore += !g.ignore.empty();
    auto r = MustCreate(g);
    SpanOracle oracle(g);
    for (const std::string& s : strings) {
      bool want = oracle.Accepts(s);
      ASSERT_EQ(Accepts(r, s), want) << "text " << Quoted(s) << "\n" << ToText(g);
      accepted += want;
      ++compared;
    }
  }
  EXPECT_GT(accepted, compared / 20);
  EXPECT_LT(accepted, compared / 2);
  EXPECT_GT(with_ignore, 20);
}

// --- IsViablePrefix by brute force.

// Finite languages (rules only use later rules; terminals are fixed sets of
// strings): the language is computed by set algebra, and a prefix is viable
// iff some string of it extends the prefix.
TEST(Earley, ViablePrefixMatchesEnumerationOnFiniteGrammars) {
  struct PoolTerminal {
    const char* regex;
    std::set<std::string> strings;
  };
  const std::vector<PoolTerminal> pool = {
      {"a", {"a"}}, {"b", {"b"}}, {"ab", {"ab"}}, {"[ab]", {"a", "b"}}, {"b(?:a|b)?", {"b", "ba", "bb"}}};
  std::mt19937 rng(77);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  const auto prefixes = AllStrings("abc", 5);
  int grammars = 0, viable = 0, checked = 0;
  while (grammars < 80) {
    Builder b;
    std::vector<std::set<std::string>> term_lang;
    int terminals = 2 + pick(3);
    for (int i = 0; i < terminals; ++i) {
      const PoolTerminal& t = pool[pick(static_cast<int>(pool.size()))];
      b.T(t.regex);
      term_lang.push_back(t.strings);
    }
    const int rules = 3;
    for (int r = 0; r < rules; ++r) b.R(absl::StrCat("r", r));
    for (int r = 0; r < rules; ++r) {
      for (int a = 1 + pick(2); a > 0; --a) {
        std::vector<Symbol> seq;
        for (int k = pick(3); k > 0; --k) {
          int later = rules - r - 1;
          seq.push_back(later > 0 && pick(2) ? R(r + 1 + pick(later)) : T(pick(terminals)));
        }
        b.Alt(r, seq);
      }
    }
    // Languages bottom-up: rule r uses only rules after it.
    std::vector<std::set<std::string>> lang(rules);
    for (int r = rules - 1; r >= 0; --r) {
      for (const auto& alt : b.g.rules[r].alternatives) {
        std::set<std::string> cur = {""};
        for (const Symbol& x : alt) {
          const auto& part = x.is_terminal() ? term_lang[x.id] : lang[x.id];
          std::set<std::string> next;
          for (const auto& u : cur) {
            for (const auto& v : part) next.insert(u + v);
          }
          cur = std::move(next);
        }
        lang[r].insert(cur.begin(), cur.end());
      }
    }
    Grammar g = b.g;
    if (!Normalize(&g).ok()) continue;
    ++grammars;
    auto rec = MustCreate(g);
    std::set<std::string> candidates(prefixes.begin(), prefixes.end());
    for (const auto& s : lang[0]) {
      for (size_t n = 0; n <= s.size(); ++n) candidates.insert(s.substr(0, n));
    }
    for (const auto& p : candidates) {
      bool want = false;
      for (const auto& s : lang[0]) want = want || s.compare(0, p.size(), p) == 0;
      ASSERT_EQ(Viable(rec, p), want) << "prefix " << Quoted(p) << "\n" << ToText(g);
      ASSERT_EQ(Accepts(rec, p), lang[0].count(p) == 1) << "text " << Quoted(p) << "\n" << ToText(g);
      // NextBytes is the set of viable one-byte extensions.
      auto next = rec.NextBytes(p);
      ASSERT_TRUE(next.ok());
      for (char c : std::string("abc")) {
        bool ext = false;
        for (const auto& s : lang[0]) ext = ext || s.compare(0, p.size() + 1, p + c) == 0;
        ASSERT_EQ((*next)[static_cast<uint8_t>(c)], ext) << Quoted(p) << " + " << c;
      }
      viable += want;
      ++checked;
    }
  }
  EXPECT_GT(viable, 300);
  EXPECT_GT(checked, 20000);
}

// A recursive grammar with %ignore, whose every viable prefix of length n is
// completed within n more bytes: S ::= S "(" S ")" | "" with ignored " ".
// Accepted strings come from the span oracle, enumerated up to length 2n.
TEST(Earley, ViablePrefixMatchesEnumerationOnDyck) {
  Builder b;
  uint32_t open = b.T("\\("), close = b.T("\\)");
  b.g.ignore.push_back(b.T(" "));
  uint32_t s = b.R("S");
  b.Alt(s, {R(s), T(open), R(s), T(close)});
  b.Alt(s, {});
  auto rec = MustCreate(b.g);
  SpanOracle oracle(b.g);
  const size_t n = 4;
  std::vector<std::string> accepted;
  for (const auto& t : AllStrings("() ", 2 * n)) {
    if (oracle.Accepts(t)) accepted.push_back(t);
  }
  ASSERT_GT(accepted.size(), 100u);
  int viable = 0;
  for (const auto& p : AllStrings("() x", n)) {
    bool want = false;
    for (const auto& t : accepted) want = want || t.compare(0, p.size(), p) == 0;
    ASSERT_EQ(Viable(rec, p), want) << Quoted(p);
    viable += want;
  }
  EXPECT_GT(viable, 30);
}

}  // namespace
}  // namespace maskd::grammar
