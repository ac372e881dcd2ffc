// The offline maskctl subcommands' output contracts (scripts depend on them):
// compile, walk, sample, schema-to-regex, maskbench. Runs the built binary on
// the bundled tokenizer.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "re2/re2.h"

namespace {

using nlohmann::json;
using ::testing::HasSubstr;

struct CmdResult {
  int status;
  std::vector<json> lines;  // stdout lines that are JSON
  std::string out;          // stdout as printed
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
    json j = json::parse(std::string(line), nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded()) r.lines.push_back(std::move(j));
  }
  r.out = out;
  FILE* e = fopen(errfile.c_str(), "r");
  while ((n = fread(buf, 1, sizeof(buf), e)) > 0) r.err.append(buf, n);
  fclose(e);
  return r;
}

const std::string kTok = std::string("--tokenizer ") + MASKD_SOURCE_DIR + "/data/tokenizers/qwen3";

TEST(MaskctlCompile, PrintsOneObjectWithTheContractKeys) {
  // --eager-dfa: the whole DFA (by default its states are built as walks
  // reach them, and dfa_states counts those built by the first mask).
  CmdResult r = Maskctl("compile " + kTok + " --regex " + Quote("[0-9]{3}-[0-9]{4}") + " --eager-dfa");
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

// A TLS flag without its file is an error, never a silent plaintext connection.
TEST(MaskctlOnline, TlsFlagWithoutAFileIsAnError) {
  for (const char* flags : {"--tls_ca", "--tls-cert=", "--tls_key= health"}) {
    CmdResult r = Maskctl(std::string("--addr unix:///nonexistent.sock ") + flags);
    EXPECT_EQ(r.status, 2) << flags;
    EXPECT_THAT(r.err, HasSubstr("needs a file")) << flags;
  }
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

// Writes `text` to a file in the test's temporary directory; returns its path.
std::string TempFile(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "/" + name;
  FILE* f = fopen(path.c_str(), "w");
  fwrite(text.data(), 1, text.size(), f);
  fclose(f);
  return path;
}

TEST(MaskctlSchemaToRegex, PrintsOneRegexAndWarningsOnStderr) {
  std::string schema = TempFile("schema.json", R"({"type": "object",
      "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 12},
                     "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}},
      "required": ["n", "tags"], "additionalProperties": false})");
  CmdResult r = Maskctl("schema-to-regex " + schema);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  RE2 re(r.out.substr(0, r.out.size() - 1));
  ASSERT_TRUE(re.ok()) << re.error();
  EXPECT_TRUE(RE2::FullMatch(R"({"n": 7, "tags": ["a", "b"]})", re));
  EXPECT_FALSE(RE2::FullMatch(R"({"n": 13, "tags": []})", re));
  EXPECT_FALSE(RE2::FullMatch(R"({"tags": [], "n": 7})", re));
  EXPECT_THAT(r.err, HasSubstr("uniqueItems at /properties/tags"));

  // --closed-objects changes what a schema without additionalProperties means.
  std::string open = TempFile("open.json", R"({"type": "object", "properties": {"a": {"type": "null"}}})");
  auto regex_of = [](const std::string& args) {
    std::string out = Maskctl("schema-to-regex " + args).out;
    return out.substr(0, out.find('\n'));
  };
  RE2 open_re(regex_of(open));
  RE2 closed_re(regex_of("--closed-objects " + open));
  EXPECT_TRUE(RE2::FullMatch(R"({"a": null, "b": 1})", open_re));
  EXPECT_FALSE(RE2::FullMatch(R"({"a": null, "b": 1})", closed_re));

  r = Maskctl("schema-to-regex " + TempFile("bad.json", R"({"type": )"));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(r.out.empty());
  EXPECT_FALSE(r.err.empty());
  r = Maskctl("schema-to-regex --max-regex-bytes 10 " + schema);
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("max_regex_bytes"));
  r = Maskctl("schema-to-regex --max-regex-bytes 0 " + schema);
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("--max-regex-bytes"));
}

TEST(MaskctlGrammar, CompileSampleAndWalkAGbnfGrammar) {
  const std::string file = TempFile("answer.gbnf", "root ::= (\"yes\" | \"no\") \".\"\n");
  CmdResult r = Maskctl("compile " + kTok + " --grammar " + Quote(file));
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), 1u);
  EXPECT_GT(r.lines[0]["allowed"].get<int>(), 2);  // y, ye, yes, n, no, ...
  EXPECT_GE(r.lines[0]["first_mask_ms"].get<double>(), r.lines[0]["compile_ms"].get<double>());

  for (int seed = 0; seed < 5; ++seed) {
    r = Maskctl("sample " + kTok + " --grammar " + Quote(file) + " --seed " +
                std::to_string(seed) + " --max-tokens 20");
    ASSERT_EQ(r.status, 0) << r.err;
    const json s = r.lines.at(0);  // a copy: r is reused below
    const std::string hex = s["text_hex"].get<std::string>();
    EXPECT_TRUE(hex == "7965732e" || hex == "6e6f2e") << hex;  // "yes." or "no."
    EXPECT_TRUE(s["finished"].get<bool>());
    // Walking the sample's tokens: every step allowed, accepting before EOS.
    std::string ids;
    for (const auto& t : s["tokens"]) absl::StrAppend(&ids, ids.empty() ? "" : ",", t.get<int>());
    r = Maskctl("walk " + kTok + " --grammar " + Quote(file) + " --tokens " + ids);
    ASSERT_EQ(r.status, 0) << r.err;
    ASSERT_EQ(r.lines.size(), s["tokens"].size() + 1);
    EXPECT_TRUE(r.lines[r.lines.size() - 2]["accepting"].get<bool>());
    EXPECT_TRUE(r.lines.back()["finished"].get<bool>());
  }
}

TEST(MaskctlGrammar, ErrorsNameTheFileLineAndColumn) {
  const std::string file = TempFile("bad.lark", "start: \"a\" missing\n");
  CmdResult r = Maskctl("compile " + kTok + " --grammar " + Quote(file));
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("bad.lark"));
  EXPECT_THAT(r.err, HasSubstr("line 1"));
  r = Maskctl("compile " + kTok + " --grammar " + Quote(file) + " --format yacc");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("expected lark, gbnf or ebnf"));
  r = Maskctl("compile " + kTok + " --grammar " + Quote(file) + " --regex a");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("exactly one of"));
}

TEST(MaskctlMaskbench, OneLinePerFileThenAllWithTheContractKeys) {
  std::string bench = TempFile("bench.jsonl",
      R"({"schema": {"type": "integer", "minimum": 1, "maximum": 12}, "tests": [{"valid": true, "text": "12"}, {"valid": false, "text": "13"}]})"
      "\n"
      R"({"schema": {"type": "array", "unevaluatedItems": false}, "tests": [{"valid": true, "text": "[]"}]})"
      "\n"
      R"({"schema": {"type": "boolean"}})"
      "\n");
  CmdResult r = Maskctl("maskbench " + kTok + " --verbose " + bench + " " + bench);
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<std::string> printed;
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
    printed.emplace_back(line);
  }
  ASSERT_EQ(printed.size(), 3u) << r.out;  // two files, then "all"
  const std::vector<std::string> keys = {
      "file", "schemas", "compiled", "passing", "valid", "valid_accepted", "invalid",
      "invalid_rejected", "ttfm_p50_us", "ttfm_p99_us", "ttfm_max_us", "tbm_p50_us", "tbm_avg_us",
      "tbm_p99_us"};
  for (const std::string& line : printed) {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(line);
    std::vector<std::string> got;
    for (auto& [k, v] : j.items()) got.push_back(k);
    EXPECT_EQ(got, keys) << line;
  }
  const json& one = r.lines[0];
  EXPECT_EQ(one["file"], bench);
  EXPECT_EQ(one["schemas"], 3);
  EXPECT_EQ(one["compiled"], 2);
  EXPECT_EQ(one["passing"], 2);  // the integer range, and the boolean (no tests)
  EXPECT_EQ(one["valid"], 2);
  EXPECT_EQ(one["valid_accepted"], 1);
  EXPECT_EQ(one["invalid"], 1);
  EXPECT_EQ(one["invalid_rejected"], 1);
  EXPECT_GT(one["tbm_avg_us"].get<double>(), 0);
  const json& all = r.lines[2];
  EXPECT_EQ(all["file"], "all");
  EXPECT_EQ(all["schemas"], 6);
  EXPECT_EQ(all["passing"], 4);
  EXPECT_THAT(r.err, HasSubstr("top failure reasons"));
  EXPECT_THAT(r.err, HasSubstr("unevaluatedItems"));

  // A regex bound below what the schemas need: nothing compiles, nothing passes.
  r = Maskctl("maskbench " + kTok + " --max-regex-bytes 4 " + bench);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.lines.back()["compiled"], 0);
  EXPECT_EQ(r.lines.back()["passing"], 0);
  // The baseline flag and the DFA mode change timings only.
  r = Maskctl("maskbench " + kTok + " --no-share-loops " + bench);
  EXPECT_EQ(r.lines.back()["passing"], 2);
  r = Maskctl("maskbench " + kTok + " --eager-terminal-dfa-states 0 --route grammar " + bench);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.lines.back()["passing"], 2);
  r = Maskctl("maskbench " + kTok + " --eager-dfa-states 4294967296 " + bench);
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("--eager-dfa-states"));
  r = Maskctl("maskbench " + kTok + " --eager-terminal-dfa-states -1 " + bench);
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("eager-terminal-dfa-states"));
  // --slowest N: the N compiled schemas of the longest TTFM, one line each.
  r = Maskctl("maskbench " + kTok + " --slowest 5 " + bench);
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<std::string> slowest;
  for (absl::string_view line : absl::StrSplit(r.err, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "slowest: ")) slowest.emplace_back(line);
  }
  ASSERT_EQ(slowest.size(), 2u) << r.err;  // two of the three compile
  EXPECT_THAT(slowest[0], ::testing::MatchesRegex("slowest: [0-9.]+ ms regex .*bench.jsonl line [0-9]"));
  r = Maskctl("maskbench " + kTok + " /nonexistent.jsonl");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent.jsonl"));
  // Valid JSON of the wrong shape is refused with the line, never a crash.
  const std::pair<const char*, const char*> misshapen[] = {
      {"[1, 2]", ":1: not a JSON object"},
      {R"({"tests": []})", ":1: no \"schema\""},
      {R"({"schema": {}, "file": 7})", ":1: \"file\" is not a string"},
      {R"({"schema": {}, "tests": {}})", ":1: \"tests\" is not an array"},
      {R"({"schema": {}, "tests": [3]})", ":1: test 0 is not an object"},
      {R"({"schema": {}, "tests": [{"valid": "yes"}]})", ":1: test 0: \"valid\" is not a boolean"},
      {R"({"schema": {}, "tests": [{"valid": true, "text": 1}]})", ":1: test 0: \"text\" is not a string"},
  };
  for (const auto& [line, message] : misshapen) {
    const std::string file = TempFile("misshapen.jsonl", std::string(line) + "\n");
    r = Maskctl("maskbench " + kTok + " " + file);
    EXPECT_EQ(r.status, 2) << line << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(file + message)) << line;
  }
}

// --fresh empties the tokenizer's loop memo before each schema: of two
// identical schemas whose pattern is a wide loop that is no self-loop, the
// second finds the loops the first kept only without it.
// --require-text refuses a test without "text" instead of walking "".
TEST(MaskctlMaskbench, FreshClearsTheMemoAndRequireTextRefusesTestsWithoutText) {
  const std::string schema =
      R"({"schema": {"type": "string", "pattern": "^([a-z][a-z0-9])*$"}, "tests": [{"valid": true, "text": "\"a1b2c3\""}, {"valid": false, "text": "\"a1b\""}]})";
  std::string bench = TempFile("fresh.jsonl", schema + "\n" + schema + "\n");
  // (hits, misses) from --verbose's "loop memo" line.
  auto memo = [](const std::string& err) {
    const size_t at = err.find("hits ");
    if (at == std::string::npos) return std::make_pair(-1, -1);
    int hits = -1, misses = -1;
    std::sscanf(err.c_str() + at, "hits %d, misses %d", &hits, &misses);
    return std::make_pair(hits, misses);
  };
  CmdResult warm = Maskctl("maskbench " + kTok + " --verbose " + bench);
  ASSERT_EQ(warm.status, 0) << warm.err;
  EXPECT_EQ(warm.lines.back()["passing"], 2);
  CmdResult fresh = Maskctl("maskbench " + kTok + " --verbose --fresh " + bench);
  ASSERT_EQ(fresh.status, 0) << fresh.err;
  EXPECT_EQ(fresh.lines.back()["passing"], 2);  // verdicts unchanged
  EXPECT_THAT(fresh.err, HasSubstr("loop memo (last schema): "));
  const auto [warm_hits, warm_misses] = memo(warm.err);
  const auto [fresh_hits, fresh_misses] = memo(fresh.err);
  EXPECT_GE(fresh_misses, 1) << fresh.err;          // the last schema's own loops
  EXPECT_EQ(warm_misses, fresh_misses) << warm.err;  // warm: only the first schema missed
  EXPECT_GT(warm_hits, fresh_hits) << warm.err << fresh.err;  // the second one hit them

  std::string untexted = TempFile(
      "untexted.jsonl",
      schema + "\n" + R"({"schema": {"type": "string"}, "tests": [{"valid": true, "text": "\"x\""}, {"valid": false, "data": 1}]})" + "\n");
  CmdResult lax = Maskctl("maskbench " + kTok + " " + untexted);
  EXPECT_EQ(lax.status, 0) << lax.err;  // without the flag: walked as ""
  CmdResult strict = Maskctl("maskbench " + kTok + " --require-text " + untexted);
  EXPECT_EQ(strict.status, 2);
  EXPECT_THAT(strict.err, HasSubstr(untexted + ":2: test 1 has no string \"text\""));
  EXPECT_TRUE(strict.lines.empty()) << strict.out;
}

}  // namespace
