// RegexAvoiding against brute force: over random texts of a small alphabet
// (ASCII and multi-byte code points), the regex's DFA accepts a text iff it
// contains none of the strings.
#include "grammar/avoid_strings.h"

#include <random>
#include <string>
#include <vector>

#include "automaton/dfa.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace maskd::grammar {
namespace {

using ::testing::HasSubstr;

bool ContainsAny(const std::string& text, const std::vector<std::string>& strings) {
  for (const std::string& s : strings) {
    if (text.find(s) != std::string::npos) return true;
  }
  return false;
}

void CheckAgainstBruteForce(const std::vector<std::string>& strings, std::mt19937& rng) {
  auto regex = RegexAvoiding(strings);
  ASSERT_TRUE(regex.ok()) << regex.status();
  auto dfa = Dfa::FromPattern(*regex);
  ASSERT_TRUE(dfa.ok()) << dfa.status() << " for " << *regex;
  const std::vector<std::string> pieces = {"a", "b", "<", "t", "/", "\xC3\xA9", "\xE2\x82\xAC"};
  for (int n = 0; n < 400; ++n) {
    std::string text;
    const int len = static_cast<int>(rng() % 14);
    for (int i = 0; i < len; ++i) text += pieces[rng() % pieces.size()];
    // Plant a string now and then.
    if (!strings.empty() && rng() % 3 == 0) {
      text.insert(rng() % (text.size() + 1), strings[rng() % strings.size()]);
    }
    EXPECT_EQ((*dfa)->Matches(text), !ContainsAny(text, strings))
        << "text '" << text << "' regex " << *regex;
  }
}

TEST(RegexAvoiding, MatchesBruteForce) {
  std::mt19937 rng(5);
  const std::vector<std::vector<std::string>> cases = {
      {"<tool_call>"}, {"aa"}, {"aba"}, {"abab", "bab"}, {"<", "t/"},
      {"a\xC3\xA9", "\xE2\x82\xAC\xE2\x82\xAC"}, {"ab", "b"}, {"<t", "</t", "<a"}, {}};
  for (const auto& c : cases) CheckAgainstBruteForce(c, rng);
  // Random sets over the alphabet.
  const std::string letters = "ab<t/";
  for (int k = 0; k < 30; ++k) {
    std::vector<std::string> strings;
    const int m = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < m; ++i) {
      std::string s;
      const int len = 1 + static_cast<int>(rng() % 4);
      for (int j = 0; j < len; ++j) s += letters[rng() % letters.size()];
      strings.push_back(s);
    }
    CheckAgainstBruteForce(strings, rng);
  }
}

TEST(RegexAvoiding, ErrorsAndLimits) {
  EXPECT_THAT(RegexAvoiding({"ok", ""}).status().message(), HasSubstr("string 1"));
  EXPECT_EQ(RegexAvoiding({"\xFF"}).status().code(), absl::StatusCode::kInvalidArgument);
  AvoidLimits small;
  small.max_code_points = 4;
  EXPECT_EQ(RegexAvoiding({"<tool_call>"}, small).status().code(),
            absl::StatusCode::kResourceExhausted);
  AvoidLimits tiny_regex;
  tiny_regex.max_regex_bytes = 20;
  auto r = RegexAvoiding({"<tool_call>"}, tiny_regex);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("max_regex_bytes"));
  // A realistic trigger stays small.
  auto tool = RegexAvoiding({"<tool_call>", "<function="});
  ASSERT_TRUE(tool.ok());
  EXPECT_LT(tool->size(), size_t{8192});
}

}  // namespace
}  // namespace maskd::grammar
