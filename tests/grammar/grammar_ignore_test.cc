// The grammar token-mask engine inside terminals that may end at every byte
// (ignored line and block comments that overlap real terminals, long names,
// strings, whitespace runs), where most tokens cross terminal ends: each mask
// must equal the brute-force mask (every token's bytes pushed one by one on a
// copy of the parser; grammar_test_util.h) on the bundled Qwen3 vocabulary,
// for every look-ahead depth (GrammarIndex::Options::dfa_levels).
#include <memory>
#include <string>
#include <vector>

#include "grammar/earley_parser.h"
#include "grammar/grammar_index.h"
#include "gtest/gtest.h"
#include "tests/grammar/grammar_test_util.h"
#include "tests/index/test_util.h"

namespace maskd::grammar {
namespace {

using ::maskd::testing::Allowed;
using ::maskd::testing::BruteForceMask;

struct IgnoreCase {
  std::string grammar;                // tests/data/grammars/<grammar>
  std::vector<std::string> prefixes;  // texts whose masks are checked
};

std::string Name(const ::testing::TestParamInfo<IgnoreCase>& info) {
  std::string name = info.param.grammar;
  for (char& c : name) {
    if (c == '.') c = '_';
  }
  return name;
}

// `n` bytes of JSON whitespace in a fixed irregular mix (a long run of
// ignored text, where Earley sets once grew with the run: issue #26).
std::string LongRun(size_t n) {
  std::string run;
  for (size_t k = 0; k < n; ++k) run += " \n  \t\r "[(k * 7 + k / 5) % 7];
  return run;
}

class IgnoredTerminalMaskTest : public ::testing::TestWithParam<IgnoreCase> {};

TEST_P(IgnoredTerminalMaskTest, MasksEqualBruteForceAtEveryLookAheadDepth) {
  absl::StatusOr<Grammar> g = testing::ParseGrammarFile(GetParam().grammar);
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<std::shared_ptr<const GrammarIndex>> indexes;
  for (size_t levels : {1, 2, 3, 5}) {
    GrammarIndex::Options options;
    options.dfa_levels = levels;
    auto index = GrammarIndex::Create(*g, testing::BundledTokenizer(), options);
    ASSERT_TRUE(index.ok()) << index.status();
    indexes.push_back(*index);
  }
  const std::vector<uint32_t> order = testing::TextTokensByBytes(indexes[0]->vocab());
  for (const std::string& prefix : GetParam().prefixes) {
    auto parser = indexes[0]->NewParser();
    ASSERT_TRUE(parser.ok()) << parser.status();
    for (char c : prefix) {
      absl::StatusOr<bool> live = parser->Push(static_cast<uint8_t>(c));
      ASSERT_TRUE(live.ok()) << live.status();
      ASSERT_TRUE(*live) << "\"" << prefix << "\" is not a viable prefix";
    }
    const std::vector<uint32_t> expected = BruteForceMask(*indexes[0], *parser, order);
    // States that allow next to nothing would test nothing.
    ASSERT_GT(Allowed(expected).size(), 10u) << "\"" << prefix << "\"";
    for (const auto& index : indexes) {
      MaskScratch scratch;
      std::vector<uint32_t> mask(index->num_words());
      // Twice: the first call fills the memo, the second reads it.
      for (int pass = 0; pass < 2; ++pass) {
        absl::Status s = index->FillMask(*parser, scratch, mask.data());
        ASSERT_TRUE(s.ok()) << s;
        ASSERT_EQ(Allowed(mask), Allowed(expected))
            << GetParam().grammar << " after \"" << prefix << "\", dfa_levels "
            << index->options().dfa_levels << ", pass " << pass;
      }
      EXPECT_EQ(parser->num_sets(), prefix.size() + 1) << "FillMask left the parser changed";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Grammars, IgnoredTerminalMaskTest,
    ::testing::Values(
        // "//" comments overlapping the "/" separator; a name may follow a
        // comment's end at any byte.
        IgnoreCase{"slash_paths.lark",
                   {"foo//", "foo// hello world /bar", "foo///", "a/b//c/d",
                    "foo/some_rather_long_identifier_name"}},
        // Whitespace, "//" and "/* */" comments and "/" division.
        IgnoreCase{"settings.lark",
                   {"x = 1;\n// see the notes below", "x = 1; /* see the notes",
                    "x = 1; /* a **", "x = a / b //c", "x = abc", "some_long_setting_name",
                    "x = \"a string with // and /* inside"}},
        // An ignored "#" comment that matches what TAG matches up to a space.
        IgnoreCase{"hashtags.lark",
                   {"word #tag # a comment", "#tagwithalongname", "a # b\n#c", "word #"}},
        // JSON with %ignore WS: inside strings, numbers and whitespace runs.
        IgnoreCase{"outlines_json.lark",
                   {"{\"key\": \"a long string value with spaces", "[1, 2,   ",
                    "{\"abc\": 12345678", "{\"k\": [true, \"x\"]  \n  ",
                    "[1," + LongRun(4000) + "2," + LongRun(3000)}}),
    Name);

}  // namespace
}  // namespace maskd::grammar
