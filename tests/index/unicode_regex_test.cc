// Unicode property classes (\p{..}) and inline flags ((?i) (?s) (?x) ...) in
// maskd's regex syntax: error messages, DFA sizes, and differential tests
// against RE2's full match on sampled codepoints and random regexes.
//
// RE2 (Debian's 20220601) has its own Unicode tables, whose version need not
// be the UCD's that maskd's tables come from: property membership is compared
// only on codepoints assigned in both (maskd: not \p{Cn}; RE2: in one of its
// L M N P S Z C groups); the codepoints assigned in one only are counted and
// printed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "automaton/dfa.h"
#include "automaton/regex.h"
#include "automaton/unicode_property.h"
#include "automaton/unicode_tables.h"
#include "re2/re2.h"
#include "tests/index/test_util.h"

namespace maskd {
namespace {

using ::testing::HasSubstr;

std::string Utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

bool IsSurrogate(uint32_t cp) { return cp >= 0xD800 && cp <= 0xDFFF; }

std::shared_ptr<const Dfa> MustCompile(const std::string& pattern) {
  auto dfa = Dfa::FromPattern(pattern);
  EXPECT_TRUE(dfa.ok()) << pattern << ": " << dfa.status();
  return dfa.ok() ? *dfa : nullptr;
}

TEST(UnicodeRegex, UppercaseThenLowercase) {
  auto dfa = MustCompile("\\p{Lu}\\p{Ll}+");
  ASSERT_NE(dfa, nullptr);
  EXPECT_TRUE(dfa->Matches("Hello"));
  EXPECT_TRUE(dfa->Matches("Ωμέγα"));
  EXPECT_TRUE(dfa->Matches("Ärger"));
  EXPECT_FALSE(dfa->Matches("hello"));
  EXPECT_FALSE(dfa->Matches("HELLO"));
  EXPECT_FALSE(dfa->Matches("H"));
}

TEST(UnicodeRegex, PropertySyntax) {
  struct Case {
    const char* pattern;
    const char* yes;
    const char* no;
  } cases[] = {
      {"\\p{L}+", "añoΩ中", "a1"},
      {"\\pL+", "añoΩ中", "a1"},
      {"\\PL+", "1 !", "a"},
      {"\\p{^L}+", "1 !", "a"},
      {"\\P{^L}+", "abc", "1"},
      {"\\p{Letter}", "ß", "1"},
      {"\\p{ uppercase-letter }", "Q", "q"},
      {"\\p{gc=Lu}", "Q", "q"},
      {"\\p{General_Category=Nd}+", "٣4", "x"},
      {"\\p{digit}", "٣", "x"},
      {"\\p{Greek}+", "Ωμέγα", "Omega"},
      {"\\p{Grek}+", "Ωμέγα", "Omega"},
      {"\\p{sc=Cyrillic}+", "Жук", "Zuk"},
      {"\\p{Script=Han}+", "中文", "日本ご"},
      {"\\p{Latin}+", "Ärger", "Жук"},
      {"\\p{Common}+", "1 !", "a"},
      {"\\p{Zyyy}+", "1 !", "a"},
      {"\\p{L&}", "a", "中"},
      {"\\p{LC}", "a", "中"},
      {"\\p{Any}", "\n", ""},
      {"\\p{ASCII}+", "abc~\x7f", "é"},
      {"\\p{Assigned}", "a", "\xf3\xa0\x80\x80"},  // U+E0000 is unassigned
      {"\\p{Cn}", "\xf3\xa0\x80\x80", "a"},
      {"\\p{Co}", "\xee\x80\x80", "a"},  // U+E000: private use
      {"[\\p{L}\\d_]+", "a_1ß", "-"},
      {"[^\\p{Lu}]+", "abc1", "aBc"},
      {"[\\P{L}a]+", "a1!", "ab"},
      {"[\\p{Greek}\\p{Nd}]+", "α1", "a"},
  };
  for (const Case& c : cases) {
    auto dfa = MustCompile(c.pattern);
    ASSERT_NE(dfa, nullptr);
    EXPECT_TRUE(dfa->Matches(c.yes)) << c.pattern << " on " << c.yes;
    EXPECT_FALSE(dfa->Matches(c.no)) << c.pattern << " on " << c.no;
  }
  // Surrogates are Cs but never UTF-8: \p{Cs} matches nothing.
  auto cs = MustCompile("\\p{Cs}");
  EXPECT_EQ(cs->num_states(), 1u);  // the dead state only
  EXPECT_FALSE(MustCompile("\\P{Cs}")->Matches("\xed\xa0\x80"));
}

TEST(UnicodeRegex, Errors) {
  struct Case {
    const char* pattern;
    const char* message;
  } cases[] = {
      {"ab\\p{Foo}", "unknown Unicode property 'Foo' at byte offset 2"},
      {"\\p{gc=Xx}", "unknown General_Category value 'Xx' at byte offset 0"},
      {"a\\p{sc=Klingon}", "unknown Script value 'Klingon' at byte offset 1"},
      {"\\p{scx=Greek}", "Script_Extensions is not supported at byte offset 0"},
      {"\\p{Alphabetic}", "unknown Unicode property 'Alphabetic'"},
      {"\\p{blk=Greek}", "unknown Unicode property 'blk'"},
      {"\\p{L", "missing '}' after \\p{ at byte offset 0"},
      {"\\p", "\\p needs a property name at byte offset 0"},
      {"\\p1", "\\p needs a property name"},
      {"[\\p{L}-z]", "bad character range"},
      {"[a-\\p{L}]", "bad character range"},
      {"x(?z)", "unknown inline flag 'z' at byte offset 1"},
      {"(?-u)a", "inline flag -u (byte-oriented matching) is not supported at byte offset 0"},
      {"(?a)a", "inline flag a (ASCII-only case folding) is not supported"},
      {"(?L)a", "inline flag L (locale) is not supported"},
      {"(?i", "missing ')' after inline flags at byte offset 0"},
      {"(?i-)a", "'-' with no flag after it"},
      {"(?i-s-x)a", "'-' twice"},
      {"(?)a", "empty inline flags"},
      {"(?|a)", "unsupported group syntax '(?|'"},
      {"a(?i)^b", "'^' is only supported at the start"},
      {"(?x)a $ b", "'$' is only supported at the end"},
  };
  for (const Case& c : cases) {
    auto re = Regex::Parse(c.pattern);
    ASSERT_FALSE(re.ok()) << c.pattern;
    EXPECT_EQ(re.status().code(), absl::StatusCode::kInvalidArgument) << c.pattern;
    EXPECT_THAT(std::string(re.status().message()), HasSubstr(c.message)) << c.pattern;
  }
}

// Patterns and the texts each must (yes) and must not (no) match in full.
struct FlagCase {
  const char* pattern;
  std::vector<const char*> yes, no;
};

TEST(UnicodeRegex, InlineFlags) {
  const FlagCase cases[] = {
      {"(?i)straße", {"STRAßE", "straße", "ſtraße"}, {"STRASSE"}},
      {"(?i)k", {"k", "K", "\u212a"}, {"x"}},
      {"(?i)[^k]", {"x", "\n"}, {"k", "K", "\u212a"}},
      {"(?i)[a-c]+", {"aBc", "CAB"}, {"abd"}},
      {"(?i)σ", {"σ", "Σ", "ς"}, {"s"}},
      {"(?i)\\p{Lu}", {"A", "a", "ω"}, {"中", "1"}},
      {"(?i)\\P{Lu}", {"中", "1"}, {"A", "a"}},
      {"a(?i)b", {"aB", "ab"}, {"AB"}},
      {"a(?i:b)c", {"aBc"}, {"aBC", "ABc"}},
      {"(?i)a(?-i)b", {"Ab"}, {"AB"}},
      {"(?i)a(?-i:b)c", {"AbC"}, {"ABC"}},
      {"(a(?i)b|c)d", {"aBd", "Cd"}, {"aBD", "AbD"}},
      {"(?i)(?i:a)|b", {"A", "B"}, {"c"}},
      {".", {"a"}, {"\n"}},
      {"(?s).", {"a", "\n"}, {""}},
      {"(?s:.)\\.", {"\n."}, {"\nx"}},
      {"(?is)A.", {"a\n"}, {"a"}},
      {"(?x) a b  c # comment\n d", {"abcd"}, {"a b c d", "abc"}},
      {"(?x)a\\ b[ ]c", {"a b c"}, {"abc"}},
      {"(?x)a +", {"aaa"}, {"a +"}},
      {"(?x)(?: a | b ) {2}", {"ab", "ba"}, {"a"}},
      {"(?x)a#b", {"a"}, {"a#b"}},
      {"(?x:a b)c d", {"abc d"}, {"abcd"}},
      {"(?m)^ab$", {"ab"}, {"a"}},
      {"(?i)^ab$", {"AB"}, {"a"}},
      {"(?x) ^ a $ # end", {"a"}, {"b"}},
      {"(?U)a+", {"aa"}, {""}},
      {"(?u)a", {"a"}, {"A"}},
  };
  for (const FlagCase& c : cases) {
    auto dfa = MustCompile(c.pattern);
    ASSERT_NE(dfa, nullptr);
    for (const char* t : c.yes) EXPECT_TRUE(dfa->Matches(t)) << c.pattern << " on \"" << t << "\"";
    for (const char* t : c.no) EXPECT_FALSE(dfa->Matches(t)) << c.pattern << " on \"" << t << "\"";
  }
}

// Sampled codepoints: every one below U+3000, every 37th above, and both ends
// (and their neighbours) of every range of every property value.
std::vector<uint32_t> SampleCodepoints() {
  std::vector<uint32_t> cps;
  for (uint32_t cp = 0; cp < 0x3000; ++cp) cps.push_back(cp);
  for (uint32_t cp = 0x3000; cp <= kMaxCodepoint; cp += 37) cps.push_back(cp);
  for (size_t i = 0; i < unicode::kRangesSize; ++i) {
    const auto& r = unicode::kRanges[i];
    for (uint32_t cp : {r.lo - 1, r.lo, r.hi, r.hi + 1}) cps.push_back(cp);
  }
  std::sort(cps.begin(), cps.end());
  cps.erase(std::unique(cps.begin(), cps.end()), cps.end());
  cps.erase(std::remove_if(cps.begin(), cps.end(),
                           [](uint32_t cp) { return cp > kMaxCodepoint || IsSurrogate(cp); }),
            cps.end());
  return cps;
}

// The codepoints of `sample` assigned both in maskd's UCD and in RE2's tables.
std::vector<uint32_t> AssignedInBoth(const std::vector<uint32_t>& sample) {
  RE2 re2_assigned("[\\p{L}\\p{M}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}]");
  auto cn = MustCompile("\\p{Cn}");
  std::vector<uint32_t> out;
  int only_maskd = 0, only_re2 = 0;
  for (uint32_t cp : sample) {
    std::string s = Utf8(cp);
    bool maskd = !cn->Matches(s), re2 = RE2::FullMatch(s, re2_assigned);
    only_maskd += maskd && !re2;
    only_re2 += re2 && !maskd;
    if (maskd && re2) out.push_back(cp);
  }
  std::printf(
      "%zu sampled codepoints: %zu assigned in both, %d only in maskd's UCD, %d only in RE2's\n",
      sample.size(), out.size(), only_maskd, only_re2);
  return out;
}

TEST(UnicodeRegex, PropertiesAgreeWithRe2) {
  const std::vector<uint32_t> cps = AssignedInBoth(SampleCodepoints());
  ASSERT_GT(cps.size(), 15000u);
  // Every General_Category value RE2 knows (it has no Cn, LC or long names),
  // and every Script value RE2 knows by its long name.
  std::vector<std::string> names = {"C",  "Cc", "Cf", "Co", "L",  "Ll", "Lm", "Lo", "Lt",
                                    "Lu", "M",  "Mc", "Me", "Mn", "N",  "Nd", "Nl", "No",
                                    "P",  "Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps", "S",
                                    "Sc", "Sk", "Sm", "So", "Z",  "Zl", "Zp", "Zs", "Any"};
  int scripts = 0;
  std::vector<std::string> re2_lacks;
  for (size_t i = 0; i < unicode::kScriptSize; ++i) {
    std::string name = unicode::kScript[i].name;
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    if (!RE2(absl::StrCat("\\p{", name, "}"), RE2::Quiet).ok()) {
      if (std::find(re2_lacks.begin(), re2_lacks.end(), name) == re2_lacks.end())
        re2_lacks.push_back(name);
      continue;
    }
    names.push_back(name);
    ++scripts;
  }
  EXPECT_GT(scripts, 150);
  for (const std::string& name : re2_lacks)
    std::printf("  RE2 has no script %s: not compared\n", name.c_str());
  std::map<std::string, int> mismatches;
  int64_t compared = 0;
  for (const std::string& name : names) {
    for (const char* form : {"\\p{%s}", "\\P{%s}", "[^\\p{%s}]", "(?i)\\p{%s}"}) {
      std::string pattern = form;
      pattern.replace(pattern.find("%s"), 2, name);
      RE2 re2(pattern);
      ASSERT_TRUE(re2.ok()) << pattern << ": " << re2.error();
      auto dfa = MustCompile(pattern);
      ASSERT_NE(dfa, nullptr);
      for (uint32_t cp : cps) {
        std::string s = Utf8(cp);
        ++compared;
        if (dfa->Matches(s) != RE2::FullMatch(s, re2)) {
          if (++mismatches[pattern] <= 3) {
            std::printf("  %s differs on U+%04X (maskd %d)\n", pattern.c_str(), cp,
                        dfa->Matches(s));
          }
        }
      }
    }
  }
  std::printf("%zu properties x 4 forms on %zu codepoints: %lld comparisons, UCD %s\n",
              names.size(), cps.size(), static_cast<long long>(compared),
              std::string(unicode::UcdVersion()).c_str());
  for (const auto& [pattern, n] : mismatches)
    std::printf("  MISMATCH %s: %d codepoints\n", pattern.c_str(), n);
  EXPECT_TRUE(mismatches.empty());
}

// Every codepoint (assigned in both) under (?i) alone and in a class.
TEST(UnicodeRegex, CaseFoldingAgreesWithRe2) {
  const std::vector<uint32_t> cps = AssignedInBoth(SampleCodepoints());
  // Codepoints with case variants, and a few without.
  std::vector<uint32_t> probes;
  for (size_t i = 0; i < unicode::kCaseOrbitSize; ++i) probes.push_back(unicode::kCaseOrbit[i].cp);
  for (uint32_t cp : {0x30u, 0x5Fu, 0x4E2Du, 0x1F600u}) probes.push_back(cp);
  std::sort(probes.begin(), probes.end());
  std::vector<uint32_t> assigned_probes;
  std::set_intersection(probes.begin(), probes.end(), cps.begin(), cps.end(),
                        std::back_inserter(assigned_probes));
  ASSERT_GT(assigned_probes.size(), 2000u);
  // Texts: every probe (a text outside its orbit is rejected by both).
  int mismatches = 0;
  int64_t compared = 0;
  for (uint32_t cp : assigned_probes) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "%X", cp);
    for (const std::string& pattern :
         {absl::StrCat("(?i)\\x{", hex, "}"), absl::StrCat("(?i)[^\\x{", hex, "}]")}) {
      RE2 re2(pattern);
      ASSERT_TRUE(re2.ok()) << pattern;
      auto dfa = MustCompile(pattern);
      ASSERT_NE(dfa, nullptr);
      for (uint32_t other : assigned_probes) {
        std::string s = Utf8(other);
        ++compared;
        if (dfa->Matches(s) != RE2::FullMatch(s, re2) && ++mismatches <= 10) {
          std::printf("  %s differs on U+%04X\n", pattern.c_str(), other);
        }
      }
      if (compared > testing::Scaled(20000000, 2000000)) break;
    }
    if (compared > testing::Scaled(20000000, 2000000)) break;
  }
  std::printf("case folding: %lld comparisons over %zu codepoints\n",
              static_cast<long long>(compared), assigned_probes.size());
  EXPECT_EQ(mismatches, 0);
}

// Random regexes mixing properties, classes and flags, on random texts.
class FlagRegexGen {
 public:
  explicit FlagRegexGen(uint32_t seed) : rng_(seed) {}

  std::string Regex(int depth = 0) {
    std::string out;
    if (Uniform(0, 3) == 0) out += Flags();
    int n = Uniform(1, 3);
    for (int i = 0; i < n; ++i) out += Piece(depth);
    if (depth < 2 && Uniform(0, 4) == 0) absl::StrAppend(&out, "|", Regex(depth + 1));
    return out;
  }

  std::string Text() {
    static const char* kChars[] = {"a", "A", "k",  "K", "\u212a", "s", "S", "\u017f",
                                   "σ", "Σ", "ς",  "ω", "Ω",      "ж", "Ж", "1",
                                   "٣", "_", "\n", " ", "中",     "é", "É", "ß"};
    constexpr int kNum = sizeof(kChars) / sizeof(kChars[0]);
    int n = Uniform(0, 5);
    std::string out;
    for (int i = 0; i < n; ++i) out += kChars[Uniform(0, kNum - 1)];
    return out;
  }

 private:
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  std::string Flags() {
    static const char* kFlags[] = {"(?i)", "(?s)", "(?-i)", "(?is)", "(?-s)", "(?i-s)", "(?s-i)"};
    return kFlags[Uniform(0, 6)];
  }

  std::string Atom(int depth) {
    static const char* kAtoms[] = {"a",           "k",           "s",
                                   "σ",           "Ж",           "ß",
                                   ".",           "\\w",         "\\W",
                                   "\\d",         "\\p{L}",      "\\P{L}",
                                   "\\p{Lu}",     "\\p{Ll}",     "\\p{Greek}",
                                   "\\P{Greek}",  "\\p{N}",      "[^k]",
                                   "[a-z]",       "[^\\p{Lu}s]", "[\\p{Cyrillic}\\d_]",
                                   "\\p{^Latin}", "[K-k]",       "\\x{212A}"};
    constexpr int kNum = sizeof(kAtoms) / sizeof(kAtoms[0]);
    if (depth < 3 && Uniform(0, 5) == 0) return absl::StrCat("(", Regex(depth + 1), ")");
    if (depth < 3 && Uniform(0, 6) == 0) {
      static const char* kScoped[] = {"(?i:", "(?s:", "(?-i:", "(?is:", "(?:"};
      return absl::StrCat(kScoped[Uniform(0, 4)], Regex(depth + 1), ")");
    }
    return kAtoms[Uniform(0, kNum - 1)];
  }

  std::string Piece(int depth) {
    std::string a = Atom(depth);
    switch (Uniform(0, 6)) {
      case 0:
        return absl::StrCat(a, "*");
      case 1:
        return absl::StrCat(a, "+");
      case 2:
        return absl::StrCat(a, "?");
      case 3:
        return absl::StrCat(a, "{1,2}");
      default:
        return a;
    }
  }

  std::mt19937 rng_;
};

TEST(UnicodeRegex, RandomFlagRegexesAgreeWithRe2) {
  FlagRegexGen gen(20261201);
  DfaOptions options;
  options.max_states = 20000;
  const int num_regexes = testing::Scaled(1000, 200);
  int checks = 0, too_big = 0;
  for (int i = 0; i < num_regexes; ++i) {
    std::string pattern = gen.Regex();
    RE2 re2(pattern);
    ASSERT_TRUE(re2.ok()) << pattern << ": " << re2.error();
    auto dfa = Dfa::FromPattern(pattern, RegexLimits{}, options);
    if (!dfa.ok() && dfa.status().code() == absl::StatusCode::kResourceExhausted) {
      ++too_big;
      continue;
    }
    ASSERT_TRUE(dfa.ok()) << pattern << ": " << dfa.status();
    for (int j = 0; j < 40; ++j) {
      std::string text = gen.Text();
      ASSERT_EQ((*dfa)->Matches(text), RE2::FullMatch(text, re2))
          << "regex /" << pattern << "/ text \"" << text << "\"";
      ++checks;
    }
  }
  EXPECT_LT(too_big, num_regexes / 100);
  EXPECT_GT(checks, num_regexes * 39);
}

// Extended mode is the same language as the pattern with its whitespace and
// comments removed by hand (RE2 has no x flag).
TEST(UnicodeRegex, ExtendedModeEqualsStrippedPattern) {
  const std::pair<const char*, const char*> cases[] = {
      {"(?x) \\p{Lu} \\p{Ll} +   # a capitalised word\n", "\\p{Lu}\\p{Ll}+"},
      {"(?x)[ a-c]+ | \\  x", "[ a-c]+|\\ x"},
      {"(?x)( a\tb\n| c ) *", "(ab|c)*"},
      {"(?x)a{2} b?", "a{2}b?"},
  };
  FlagRegexGen gen(7);
  for (const auto& [extended, plain] : cases) {
    auto a = MustCompile(extended);
    auto b = MustCompile(plain);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(a->num_states(), b->num_states()) << extended;
    for (const char* t : {"Ab", "Abc", "aa", "aab", "ab", "abc", " x", "  x", "cab", "ababc"}) {
      EXPECT_EQ(a->Matches(t), b->Matches(t)) << extended << " on " << t;
    }
  }
}

// Big classes stay within the default limits and build small automata.
TEST(UnicodeRegex, BigClassesBuildSmallDfas) {
  struct Case {
    const char* pattern;
    uint32_t max_states;
  } cases[] = {
      {"\\p{L}+", 400},
      {"\\P{L}+", 400},
      {"(?i)\\p{L}+", 400},
      {"[\\p{L}\\p{N}_]+", 400},
      {"(?i)[a-z\\x{e0}-\\x{ff}]+", 20},
      {"\\p{Greek}+", 50},
      {"\\p{Han}+", 50},
      {"\\p{Any}*", 20},
  };
  for (const Case& c : cases) {
    auto dfa = MustCompile(c.pattern);
    ASSERT_NE(dfa, nullptr);
    std::printf("%-28s %5u states %3u classes\n", c.pattern, dfa->num_states(), dfa->num_classes());
    EXPECT_LE(dfa->num_states(), c.max_states) << c.pattern;
  }
  // A counted repeat of a big class: it builds, or fails on the state cap.
  auto many = Dfa::FromPattern("\\p{L}{1000}");
  EXPECT_TRUE(many.ok() || many.status().code() == absl::StatusCode::kResourceExhausted)
      << many.status();
  if (many.ok()) {
    std::printf("\\p{L}{1000}: %u states\n", (*many)->num_states());
  } else {
    std::printf("\\p{L}{1000}: %s\n", std::string(many.status().message()).c_str());
  }
}

// Repeated big classes share their ranges (one copy of \p{L}'s ~660 ranges
// however often it is written; folding each copy anew made a 1 MiB pattern
// take 50 s): the sets of repeated classes are one storage. Long patterns of
// them parse (their parse time is printed, not asserted); distinct big
// classes stop at max_set_ranges.
TEST(UnicodeRegex, LongPatternsOfBigClasses) {
  for (const char* pattern : {"\\p{L}\\p{L}\\p{L}", "(?i)\\p{L}(?i)\\p{L}", "\\P{L}\\P{L}"}) {
    auto re = Regex::Parse(pattern);
    ASSERT_TRUE(re.ok()) << re.status();
    const RegexNode& root = re->root();
    ASSERT_EQ(root.kind, RegexNode::Kind::kConcat) << pattern;
    std::vector<const RegexNode*> sets;
    for (const auto& child : root.children) {
      if (child->kind == RegexNode::Kind::kSet) sets.push_back(child.get());
    }
    ASSERT_GE(sets.size(), 2u) << pattern;
    for (const RegexNode* n : sets) {
      EXPECT_EQ(n->set.storage(), sets[0]->set.storage()) << pattern << ": a copy of the ranges";
    }
  }
  const size_t size = testing::Scaled(1 << 20, 1 << 16);
  auto repeat = [size](const std::string& unit, const std::string& open, const std::string& close) {
    std::string p = open;
    while (p.size() + unit.size() + close.size() <= size) p += unit;
    return p + close;
  };
  for (const std::string& p :
       {repeat("\\P{L}", "", ""), repeat("(?i)\\p{L}", "", ""), repeat("[\\p{L}\\p{N}]", "", ""),
        repeat("(?i)[^\\p{Greek}k]", "", ""), repeat("\\p{L}\\p{N}", "[", "]")}) {
    auto t0 = std::chrono::steady_clock::now();
    auto re = Regex::Parse(p);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%.20s... (%zu bytes): parsed in %.2f s\n", p.c_str(), p.size(), seconds);
    EXPECT_TRUE(re.ok()) << re.status();
  }
  RegexLimits limits;
  limits.max_set_ranges = 1000;
  EXPECT_TRUE(Regex::Parse("\\p{L}\\p{L}+[\\p{L}]", limits).ok());  // one set of ~660 ranges
  auto two = Regex::Parse("\\p{L}\\P{L}", limits);
  EXPECT_EQ(two.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(two.status().message()),
              HasSubstr("more than 1000 codepoint ranges (max_set_ranges) at byte offset 5"));
}

TEST(UnicodeRegex, UcdVersionIsNamed) {
  EXPECT_EQ(unicode::UcdVersion(), "15.0.0");
  bool negated = true;
  auto ranges = unicode::PropertyRanges("Lu", &negated);
  ASSERT_TRUE(ranges.ok());
  EXPECT_FALSE(negated);
  EXPECT_EQ(ranges->front(), std::make_pair(uint32_t{'A'}, uint32_t{'Z'}));
  ranges = unicode::PropertyRanges("^sc = greek", &negated);
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  EXPECT_TRUE(negated);
  for (const auto& [lo, hi] : *ranges) EXPECT_FALSE(lo <= 0xDFFF && hi >= 0xD800);
}

}  // namespace
}  // namespace maskd
