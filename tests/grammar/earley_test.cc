// The reference Earley recognizer, against independent oracles:
//   - nlohmann::json on random and mutated JSON texts (json.gbnf);
//   - a span-table recognizer written here (a fixpoint over "rule derives
//     text[i:j]", CYK-style, with %ignore) on random grammars with left and
//     right recursion, empty rules, nullable terminals and %ignore;
//   - brute-force enumeration for IsViablePrefix;
//   - a search over byte extensions for EarleyParser::MinBytesToFinish;
// plus accept/reject cases for the five example grammars, and the item cap.
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

namespace maskd::grammar {
namespace {

using ::maskd::testing::ReadGrammar;
using ::testing::HasSubstr;


EarleyRecognizer MustCreate(const Grammar& g, const EarleyOptions& options = {}) {
  auto r = EarleyRecognizer::Create(g, options);
  EXPECT_TRUE(r.ok()) << r.status() << "\n" << ToText(g);
  return std::move(*r);
}

EarleyRecognizer FromGbnfFile(const std::string& name) {
  auto g = ParseGbnf(ReadGrammar(name));
  EXPECT_TRUE(g.ok()) << name << ": " << g.status();
  return MustCreate(*g);
}

bool Accepts(const EarleyRecognizer& r, std::string_view text) {
  auto a = r.Accepts(text);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() && *a;
}

bool Viable(const EarleyRecognizer& r, std::string_view text) {
  auto a = r.IsViablePrefix(text);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() && *a;
}

std::string Quoted(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out + "\"";
}

// A grammar written by hand in tests.
struct Builder {
  Grammar g;
  uint32_t T(std::string regex) {
    g.terminals.push_back({regex, regex, std::nullopt, 0, {}});
    return static_cast<uint32_t>(g.terminals.size() - 1);
  }
  uint32_t R(std::string name) {
    g.rules.push_back({std::move(name), {}, {}});
    return static_cast<uint32_t>(g.rules.size() - 1);
  }
  void Alt(uint32_t rule, std::vector<Symbol> syms) {
    g.rules[rule].alternatives.push_back(std::move(syms));
  }
};
Symbol T(uint32_t id) { return Symbol::Terminal(id); }
Symbol R(uint32_t id) { return Symbol::Rule(id); }

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

class SpanOracle {
 public:
  explicit SpanOracle(const Grammar& g) : g_(g) {
    for (const Terminal& t : g.terminals) {
      auto dfa = Dfa::FromPattern(t.regex);
      EXPECT_TRUE(dfa.ok()) << dfa.status();
      dfas_.push_back(*dfa);
    }
  }

  bool Accepts(const std::string& s) {
    const size_t n = s.size();
    auto idx = [n](size_t i, size_t j) { return i * (n + 1) + j; };
    // term[t][i,j]: terminal t matches s[i:j].
    std::vector<std::vector<bool>> term(g_.terminals.size(), std::vector<bool>((n + 1) * (n + 1)));
    for (size_t t = 0; t < g_.terminals.size(); ++t) {
      for (size_t i = 0; i <= n; ++i) {
        for (size_t j = i; j <= n; ++j) term[t][idx(i, j)] = dfas_[t]->Matches(s.substr(i, j - i));
      }
    }
    // ign[i,j]: s[i:j] is a run of ignored strings.
    std::vector<bool> ign((n + 1) * (n + 1));
    for (size_t i = 0; i <= n; ++i) {
      ign[idx(i, i)] = true;
      for (size_t j = i + 1; j <= n; ++j) {
        for (size_t k = i; k < j && !ign[idx(i, j)]; ++k) {
          if (!ign[idx(i, k)]) continue;
          for (uint32_t t : g_.ignore) {
            if (term[t][idx(k, j)]) ign[idx(i, j)] = true;
          }
        }
      }
    }
    std::vector<std::vector<bool>> derives(g_.rules.size(), std::vector<bool>((n + 1) * (n + 1)));
    auto matches = [&](const Symbol& x, size_t i, size_t j) {
      return x.is_terminal() ? term[x.id][idx(i, j)] : derives[x.id][idx(i, j)];
    };
    // ign* X1 ign* X2 ... Xk ign* over s[i:j].
    auto seq_derives = [&](const std::vector<Symbol>& alt, size_t i, size_t j) {
      std::vector<bool> reach(n + 1);
      for (size_t p = i; p <= j; ++p) reach[p] = ign[idx(i, p)];
      for (const Symbol& x : alt) {
        std::vector<bool> next(n + 1);
        for (size_t p = i; p <= j; ++p) {
          if (!reach[p]) continue;
          for (size_t m = p; m <= j; ++m) {
            if (!matches(x, p, m)) continue;
            for (size_t q = m; q <= j; ++q) {
              if (ign[idx(m, q)]) next[q] = true;
            }
          }
        }
        reach = std::move(next);
      }
      return static_cast<bool>(reach[j]);
    };
    bool changed = true;
    while (changed) {
      changed = false;
      for (size_t r = 0; r < g_.rules.size(); ++r) {
        for (size_t i = 0; i <= n; ++i) {
          for (size_t j = i; j <= n; ++j) {
            if (derives[r][idx(i, j)]) continue;
            for (const auto& alt : g_.rules[r].alternatives) {
              if (seq_derives(alt, i, j)) {
                derives[r][idx(i, j)] = true;
                changed = true;
                break;
              }
            }
          }
        }
      }
    }
    return derives[g_.start][idx(0, n)];
  }

 private:
  const Grammar& g_;
  std::vector<std::shared_ptr<const Dfa>> dfas_;
};

std::vector<std::string> AllStrings(const std::string& alphabet, size_t max_len) {
  std::vector<std::string> out = {""};
  for (size_t i = 0; out[i].size() < max_len; ++i) {
    for (char c : alphabet) out.push_back(out[i] + c);
  }
  return out;
}

// A random grammar over {a, b, c}: recursion of every kind, empty
// alternatives, a nullable terminal, sometimes %ignore "c".
Grammar RandomGrammar(std::mt19937& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  static const char* kPool[] = {"a", "b", "ab", "[ab]", "a+", "b(?:a|b)?", "a*", "c", "(?:ba)+"};
  Builder b;
  int terminals = 2 + pick(3);
  for (int i = 0; i < terminals; ++i) b.T(kPool[pick(9)]);
  if (pick(3) == 0) b.g.ignore.push_back(b.T("c"));
  int rules = 2 + pick(3);
  for (int r = 0; r < rules; ++r) b.R(absl::StrCat("r", r));
  for (int r = 0; r < rules; ++r) {
    int alts = 1 + pick(3);
    for (int a = 0; a < alts; ++a) {
      std::vector<Symbol> seq;
      int len = pick(4);
      for (int k = 0; k < len; ++k) {
        seq.push_back(pick(2) ? T(pick(terminals)) : R(pick(rules)));
      }
      b.Alt(r, seq);
    }
  }
  return b.g;
}

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
