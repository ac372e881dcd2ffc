// The offline maskctl subcommands' output contracts (scripts depend on them):
// compile, walk, sample. Runs the built binary on the bundled tokenizer.
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "re2/re2.h"

namespace {

using nlohmann::json;
using ::testing::HasSubstr;

struct CmdResult {
  int status;
  std::vector<json> lines;
  std::string err;
};

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

CmdResult Maskctl(const std::string& args) {
  std::string errfile = ::testing::TempDir() + "/maskctl_err.txt";
  std::string cmd = std::string(MASKD_BIN_DIR) + "/maskctl " + args + " 2>" + errfile;
  FILE* p = popen(cmd.c_str(), "r");
  CmdResult r;
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  r.status = WEXITSTATUS(pclose(p));
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    r.lines.push_back(json::parse(std::string(line)));
  }
  FILE* e = fopen(errfile.c_str(), "r");
  while ((n = fread(buf, 1, sizeof(buf), e)) > 0) r.err.append(buf, n);
  fclose(e);
  return r;
}

const std::string kTok = std::string("--tokenizer ") + MASKD_SOURCE_DIR + "/data/tokenizers/qwen3";

TEST(MaskctlCompile, PrintsOneObjectWithTheContractKeys) {
  CmdResult r = Maskctl("compile " + kTok + " --regex " + Quote("[0-9]{3}-[0-9]{4}"));
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), 1u);
  const json& j = r.lines[0];
  EXPECT_EQ(j["dfa_states"].get<int>(), 10);  // 9 live states + dead
  EXPECT_GE(j["first_mask_ms"].get<double>(), j["compile_ms"].get<double>());
  EXPECT_GT(j["index_bytes"].get<int64_t>(), 0);
  EXPECT_FALSE(j.contains("ready_ms"));

  r = Maskctl("compile " + kTok + " --regex " + Quote("[0-9]{3}-[0-9]{4}") + " --eager");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_GE(r.lines[0]["ready_ms"].get<double>(), r.lines[0]["first_mask_ms"].get<double>());
}

TEST(MaskctlCompile, ErrorsGoToStderrWithStatus2) {
  CmdResult r = Maskctl("compile " + kTok + " --regex " + Quote("ab(c)\\1"));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(r.lines.empty());
  EXPECT_THAT(r.err, HasSubstr("backreference is not supported at byte offset 5"));
  r = Maskctl("compile --tokenizer /nonexistent --regex a");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent"));
  r = Maskctl("compile " + kTok);
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("--regex"));
}

TEST(MaskctlWalk, OneLinePerStepAndExit3OnADisallowedToken) {
  // Qwen3: id 15 is "0", id 12 is "-".
  CmdResult r = Maskctl("walk " + kTok + " --regex " + Quote("[0-9]{2}-?") + " --tokens 15,15,12 --full");
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), 4u);
  for (size_t i = 0; i < r.lines.size(); ++i) {
    const json& j = r.lines[i];
    EXPECT_EQ(j["step"].get<size_t>(), i);
    std::string raw;
    ASSERT_TRUE(absl::Base64Unescape(j["mask_b64"].get<std::string>(), &raw));
    EXPECT_EQ(raw.size() % 4, 0u);
    // allowed == popcount of the packed mask.
    int bits = 0;
    for (unsigned char c : raw) bits += __builtin_popcount(c);
    EXPECT_EQ(j["allowed"].get<int>(), bits);
    EXPECT_EQ(j["mask_sha256"].get<std::string>().size(), 64u);
  }
  EXPECT_EQ(r.lines[0]["allowed"].get<int>(), 10);  // Qwen3 spells numbers digit by digit
  EXPECT_FALSE(r.lines[0]["accepting"].get<bool>());
  EXPECT_TRUE(r.lines[2]["accepting"].get<bool>());
  EXPECT_TRUE(r.lines[3]["accepting"].get<bool>());

  r = Maskctl("walk " + kTok + " --regex " + Quote("[0-9]") + " --tokens 15,15");
  EXPECT_EQ(r.status, 3);
  ASSERT_EQ(r.lines.size(), 3u);
  EXPECT_EQ(r.lines[2]["step"].get<int>(), 2);
  EXPECT_THAT(r.lines[2]["error"].get<std::string>(), HasSubstr("not allowed"));
}

TEST(MaskctlSample, TextMatchesTheRegexUnderRe2) {
  const std::string regex = "(cat|dog)s? [0-9]{2}";
  RE2 oracle(regex);
  int finished = 0;
  for (int seed = 0; seed < 20; ++seed) {
    CmdResult r = Maskctl("sample " + kTok + " --regex " + Quote(regex) + " --seed " + std::to_string(seed) +
                    " --max-tokens 12");
    ASSERT_EQ(r.status, 0) << r.err;
    ASSERT_EQ(r.lines.size(), 1u);
    const json& j = r.lines[0];
    std::string text = absl::HexStringToBytes(j["text_hex"].get<std::string>());
    if (j["finished"].get<bool>()) {
      ++finished;
      EXPECT_TRUE(RE2::FullMatch(text, oracle)) << text;
      EXPECT_EQ(j["tokens"].back().get<int>(), 151645);  // <|im_end|>, Qwen3's EOS
    }
  }
  EXPECT_GE(finished, 15);
}

}  // namespace
