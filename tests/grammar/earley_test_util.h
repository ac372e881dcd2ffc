// Shared by the tests of the reference Earley recognizer
// (tests/grammar/earley_*_test.cc): recognizers that must build, grammars
// written by hand (Builder) or at random, and the span-table recognizer
// (SpanOracle), an independent oracle.
#ifndef MASKD_TESTS_GRAMMAR_EARLEY_TEST_UTIL_H_
#define MASKD_TESTS_GRAMMAR_EARLEY_TEST_UTIL_H_

#include <bitset>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grammar/bnf_parser.h"
#include "grammar/earley.h"
#include "grammar/grammar.h"
#include "gtest/gtest.h"
#include "tests/grammar/grammar_test_util.h"

namespace maskd::grammar::earley_test {

using ::maskd::testing::ReadGrammar;

inline EarleyRecognizer MustCreate(const Grammar& g, const EarleyOptions& options = {}) {
  auto r = EarleyRecognizer::Create(g, options);
  EXPECT_TRUE(r.ok()) << r.status() << "\n" << ToText(g);
  return std::move(*r);
}

inline EarleyRecognizer FromGbnfFile(const std::string& name) {
  auto g = ParseGbnf(ReadGrammar(name));
  EXPECT_TRUE(g.ok()) << name << ": " << g.status();
  return MustCreate(*g);
}

inline bool Accepts(const EarleyRecognizer& r, std::string_view text) {
  auto a = r.Accepts(text);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() && *a;
}

inline bool Viable(const EarleyRecognizer& r, std::string_view text) {
  auto a = r.IsViablePrefix(text);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() && *a;
}

inline std::string Quoted(std::string_view s) {
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
inline Symbol T(uint32_t id) { return Symbol::Terminal(id); }
inline Symbol R(uint32_t id) { return Symbol::Rule(id); }

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

inline std::vector<std::string> AllStrings(const std::string& alphabet, size_t max_len) {
  std::vector<std::string> out = {""};
  for (size_t i = 0; out[i].size() < max_len; ++i) {
    for (char c : alphabet) out.push_back(out[i] + c);
  }
  return out;
}

// A random grammar over {a, b, c}: recursion of every kind, empty
// alternatives, a nullable terminal, sometimes %ignore "c".
inline Grammar RandomGrammar(std::mt19937& rng) {
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

}  // namespace maskd::grammar::earley_test

#endif  // MASKD_TESTS_GRAMMAR_EARLEY_TEST_UTIL_H_
