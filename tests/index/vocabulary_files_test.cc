// Vocabulary loader, files and real tokenizers: folders, .gz and configs beside
// the tokenizer, file errors; the bundled Qwen3 tokenizer, the shared
// tokenizers against tests/data/tokenizer_digests.json (written by
// scripts/tokenizer_digests.py after a token-by-token check against HF
// tokenizers), and the `maskctl vocab` output contract.
#include "tokenizer/vocabulary.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/index/test_util.h"
#include "tokenizer/json_blank.h"
#include "tokenizer/token_trie.h"
#include "tests/index/vocabulary_test_util.h"

namespace maskd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using ::maskd::vocab_test::Doc;
using ::maskd::vocab_test::Added;
using ::maskd::vocab_test::List;
using ::maskd::vocab_test::MustLoad;

std::string TempDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/maskd_vocab_" + name + "_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary);
  f << content;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// gzip member with one deflate "stored" block: valid gzip without zlib.
std::string GzipStored(const std::string& data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1)));
  }
  crc ^= 0xFFFFFFFFu;
  auto u32 = [](uint32_t v) {
    return std::string{static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16),
                       static_cast<char>(v >> 24)};
  };
  std::string out("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", 10);
  size_t pos = 0;
  do {
    size_t n = std::min<size_t>(data.size() - pos, 65535);
    bool last = pos + n == data.size();
    out.push_back(last ? 1 : 0);
    out.push_back(static_cast<char>(n & 0xFF));
    out.push_back(static_cast<char>(n >> 8));
    out.push_back(static_cast<char>(~n & 0xFF));
    out.push_back(static_cast<char>((~n >> 8) & 0xFF));
    out.append(data, pos, n);
    pos += n;
  } while (pos < data.size());
  return out + u32(crc) + u32(static_cast<uint32_t>(data.size()));
}

// ---------------------------------------------------------------------------
// Files: folders, .gz, configs beside the tokenizer, file errors.

TEST(VocabularyFileTest, LoadsFolderFileAndGzip) {
  const std::string doc = Doc(R"({"a": 0, "b": 1})", List({Added(2, R"("<eos>")", true)}));
  const std::string config = R"({"eos_token": "<eos>"})";
  std::string dir = TempDir("plain");
  WriteFile(dir + "/tokenizer.json", doc);
  WriteFile(dir + "/tokenizer_config.json", config);
  auto expected = MustLoad(doc, config);
  ASSERT_NE(expected, nullptr);
  for (const std::string& path : {dir, dir + "/tokenizer.json"}) {
    auto v = Vocabulary::Load(path);
    ASSERT_TRUE(v.ok()) << path << ": " << v.status();
    EXPECT_EQ((*v)->content_hash(), expected->content_hash()) << path;
    EXPECT_THAT((*v)->eos_ids(), ElementsAre(2u)) << path;
  }

  // Both files gzipped; the tokenizer in two gzip members; a large document
  // (several stored blocks and more than the first output buffer).
  std::string gz = TempDir("gz");
  WriteFile(gz + "/tokenizer.json.gz", GzipStored(doc.substr(0, 10)) + GzipStored(doc.substr(10)));
  WriteFile(gz + "/tokenizer_config.json.gz", GzipStored(config));
  for (const std::string& path : {gz, gz + "/tokenizer.json.gz"}) {
    auto v = Vocabulary::Load(path);
    ASSERT_TRUE(v.ok()) << path << ": " << v.status();
    EXPECT_EQ((*v)->content_hash(), expected->content_hash()) << path;
  }
  std::string big_vocab = "{";
  for (int i = 0; i < 20000; ++i) absl::StrAppend(&big_vocab, i ? ", " : "", "\"t", i, "\": ", i);
  big_vocab += "}";
  std::string big_dir = TempDir("gzbig");
  WriteFile(big_dir + "/big.json", GzipStored(Doc(big_vocab)));
  auto big = Vocabulary::Load(big_dir + "/big.json");  // gzip is told by content, not name
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ((*big)->size(), 20000u);
  EXPECT_EQ((*big)->bytes(19999), "t19999");
  EXPECT_THAT((*big)->eos_ids(), IsEmpty());  // no config beside it
}

TEST(VocabularyFileTest, ConfigErrorsNameTheConfigFile) {
  std::string dir = TempDir("badconfig");
  WriteFile(dir + "/tokenizer.json", Doc(R"({"a": 0})"));
  WriteFile(dir + "/tokenizer_config.json", R"({"eos_token": "<nope>"})");
  auto v = Vocabulary::Load(dir);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(), dir + "/tokenizer_config.json: eos_token \"<nope>\" is not a " +
                                      "token of " + dir + "/tokenizer.json");
  VocabularyOptions options;
  options.eos_ids = {0};
  EXPECT_TRUE(Vocabulary::Load(dir, options).ok());
}

TEST(VocabularyFileTest, FileErrors) {
  auto v = Vocabulary::Load("/nonexistent/maskd/tokenizer.json");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(v.status().message(), "/nonexistent/maskd/tokenizer.json: no such file");

  v = Vocabulary::Load("/dev/null");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(), "/dev/null: not a regular file");

  std::string empty = TempDir("empty");
  v = Vocabulary::Load(empty);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(v.status().message(),
            empty + ": no tokenizer.json or tokenizer.json.gz in this folder");

  std::string dir = TempDir("badfiles");
  WriteFile(dir + "/garbage.json.gz", std::string("\x1f\x8b\x08\x00garbage-garbage-garbage", 27));
  v = Vocabulary::Load(dir + "/garbage.json.gz");
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(std::string(v.status().message()),
              StartsWith(dir + "/garbage.json.gz: bad gzip data: "));

  std::string good = GzipStored(Doc(R"({"a": 0})"));
  WriteFile(dir + "/truncated.json.gz", good.substr(0, good.size() - 30));
  v = Vocabulary::Load(dir + "/truncated.json.gz");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(), dir + "/truncated.json.gz: bad gzip data: truncated");

  WriteFile(dir + "/trailing.json.gz", good + "junk");
  v = Vocabulary::Load(dir + "/trailing.json.gz");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(),
            dir + "/trailing.json.gz: bad gzip data: trailing bytes after the gzip stream");

  WriteFile(dir + "/malformed.json", "{\"model\": ");
  v = Vocabulary::Load(dir + "/malformed.json");
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(std::string(v.status().message()),
              StartsWith(dir + "/malformed.json: malformed JSON: "));

  std::filesystem::create_directories(dir + "/sub/tokenizer.json");
  v = Vocabulary::Load(dir + "/sub/tokenizer.json");
  ASSERT_FALSE(v.ok());
}

// ---------------------------------------------------------------------------
// Real tokenizers.

// tests/data/tokenizer_digests.json's "tokenizers" object ({} when unreadable).
const nlohmann::json& Digests() {
  static const nlohmann::json* digests = [] {
    std::string path = std::string(MASKD_SOURCE_DIR) + "/tests/data/tokenizer_digests.json";
    nlohmann::json j = nlohmann::json::parse(ReadFile(path), nullptr, false);
    bool ok = j.is_object() && j.contains("tokenizers") && j["tokenizers"].is_object();
    return new nlohmann::json(ok ? j["tokenizers"] : nlohmann::json::object());
  }();
  return *digests;
}

void ExpectMatchesDigest(const Vocabulary& v, const std::string& name) {
  ASSERT_TRUE(Digests().contains(name)) << "tests/data/tokenizer_digests.json lacks " << name;
  const nlohmann::json& d = Digests().at(name);
  EXPECT_EQ(v.content_hash(), d["sha256"].get<std::string>());
  EXPECT_EQ(v.num_tokens(), d["tokens"].get<uint32_t>());
  EXPECT_EQ(v.size(), d["vocab_size"].get<uint32_t>());
  EXPECT_EQ(v.num_special(), d["special"].get<uint32_t>());
  EXPECT_EQ(TokenizerKindName(v.kind()), d["kind"].get<std::string>());
  EXPECT_EQ(v.eos_ids(), d["eos"].get<std::vector<uint32_t>>());
}

TEST(BundledTokenizerTest, Qwen3) {
  auto v = testing::BundledVocabulary();
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->kind(), TokenizerKind::kByteLevel);
  EXPECT_EQ(v->size(), 151669u);
  EXPECT_EQ(v->num_tokens(), 151669u);
  EXPECT_EQ(v->num_special(), 14u);
  EXPECT_THAT(v->eos_ids(), ElementsAre(151645u));  // <|im_end|>
  // Bytes as HF tokenizers 0.23 gives them (vocab string + byte-level table,
  // cross-checked with decode).
  EXPECT_EQ(v->bytes(0), "!");
  EXPECT_EQ(v->bytes(198), "\n");
  EXPECT_EQ(v->bytes(220), " ");
  EXPECT_EQ(v->bytes(271), "\n\n");
  EXPECT_EQ(v->bytes(1879), " world");
  EXPECT_EQ(v->bytes(9707), "Hello");
  EXPECT_EQ(v->bytes(108386), "\xE4\xBD\xA0\xE5\xA5\xBD");  // 你好
  EXPECT_EQ(v->bytes(378), "\xE2\x80");                     // partial UTF-8
  EXPECT_EQ(v->bytes(636), " \xE2\x80");
  EXPECT_EQ(v->bytes(151643), "<|endoftext|>");
  EXPECT_TRUE(v->is_special(151643));
  EXPECT_TRUE(v->is_special(151645));
  EXPECT_EQ(v->bytes(151667), "<think>");  // non-special added tokens are text
  EXPECT_FALSE(v->is_special(151667));
  EXPECT_FALSE(v->is_special(151657));
  EXPECT_EQ(v->bytes(151657), "<tool_call>");
  ExpectMatchesDigest(*v, "qwen3");

  // Qwen models' logits are 151,936 wide.
  VocabularyOptions options;
  options.vocab_size = 151936;
  auto padded = Vocabulary::Load(testing::BundledTokenizerPath(), options);
  ASSERT_TRUE(padded.ok()) << padded.status();
  EXPECT_EQ((*padded)->size(), 151936u);
  EXPECT_EQ((*padded)->num_tokens(), 151669u);
  EXPECT_FALSE((*padded)->has_token(151900));
  EXPECT_NE((*padded)->content_hash(), v->content_hash());
}

class SharedTokenizerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SharedTokenizerTest, MatchesCommittedDigest) {
  const std::string& name = GetParam();
  if (testing::SharedTokenizerPath(name).empty()) {
    GTEST_SKIP() << MASKD_SHARED_DIR << "/tokenizers/" << name
                 << " is absent: shared-tokenizer digest check skipped";
  }
  auto v = testing::SharedVocabulary(name);
  ASSERT_NE(v, nullptr);
  ExpectMatchesDigest(*v, name);
  if (name == "llama2") {
    EXPECT_EQ(v->bytes(13), "\n");    // <0x0A>
    EXPECT_EQ(v->bytes(231), "\xE4");  // <0xE4>
    EXPECT_TRUE(v->is_special(2));
  } else if (name == "gemma3") {
    EXPECT_EQ(v->bytes(138), "  ");  // non-special added "▁▁"
    EXPECT_FALSE(v->is_special(138));
    EXPECT_EQ(v->bytes(248), "\n");  // <0x0A>
    EXPECT_TRUE(v->is_special(262144));
    EXPECT_EQ(v->bytes(262144), "<image_soft_token>");
  } else if (name == "gptoss") {
    EXPECT_TRUE(v->is_special(200002));
    EXPECT_EQ(v->bytes(200002), "<|return|>");
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, SharedTokenizerTest,
                         ::testing::ValuesIn(testing::SharedTokenizerNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// ---------------------------------------------------------------------------
// maskctl vocab: the output contract scripts depend on.

struct RunResult {
  int status = -1;
  std::string out;
  std::string err;
};

RunResult RunMaskctl(const std::string& args) {
  std::string maskctl = std::string(MASKD_BIN_DIR) + "/maskctl";
  RunResult r;
  if (!std::filesystem::exists(maskctl)) {
    ADD_FAILURE() << maskctl << " is missing: build the maskctl target first";
    return r;
  }
  std::string err_path = TempDir("maskctl_err") + "/stderr";
  FILE* p = popen((maskctl + " " + args + " 2>" + err_path).c_str(), "r");
  if (p == nullptr) {
    ADD_FAILURE() << "popen failed";
    return r;
  }
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = ReadFile(err_path);
  return r;
}

TEST(MaskctlVocabTest, SummaryLine) {
  RunResult r = RunMaskctl("vocab --tokenizer " + testing::BundledTokenizerPath());
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.back(), '\n');
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line";
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.size(), 7u) << r.out;
  ASSERT_TRUE(Digests().contains("qwen3"));
  const nlohmann::json& d = Digests().at("qwen3");
  EXPECT_EQ(j["tokens"], 151669);
  EXPECT_EQ(j["vocab_size"], 151669);
  EXPECT_EQ(j["eos"], nlohmann::json::array({151645}));
  EXPECT_EQ(j["special"], 14);
  EXPECT_EQ(j["kind"], "byte_level");
  EXPECT_EQ(j["sha256"], d["sha256"]);
  ASSERT_TRUE(j["load_ms"].is_number_float()) << r.out;
  EXPECT_GT(j["load_ms"].get<double>(), 0.0);

  r = RunMaskctl("vocab --tokenizer " + testing::BundledTokenizerPath() +
                 " --vocab-size 151936 --eos 151643,151645");
  ASSERT_EQ(r.status, 0) << r.err;
  j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_EQ(j["vocab_size"], 151936);
  EXPECT_EQ(j["eos"], nlohmann::json::array({151643, 151645}));
}

TEST(MaskctlVocabTest, Dump) {
  std::string dir = TempDir("dump");
  WriteFile(dir + "/tokenizer.json",
            Doc(R"({"a": 0, "\u0120\u00e4": 1, "c": 3})", List({Added(4, R"("<eos>")", true)})));
  RunResult r = RunMaskctl("vocab --dump --tokenizer " + dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "{\"id\": 0, \"hex\": \"61\", \"special\": false}\n"
            "{\"id\": 1, \"hex\": \"20e4\", \"special\": false}\n"
            "{\"id\": 3, \"hex\": \"63\", \"special\": false}\n"
            "{\"id\": 4, \"hex\": \"3c656f733e\", \"special\": true}\n");
}

TEST(MaskctlVocabTest, ErrorsExitWithStatus2) {
  RunResult r = RunMaskctl("vocab --tokenizer /nonexistent/maskd/tokenizer.json");
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(r.out.empty());
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/maskd/tokenizer.json: no such file"));
  EXPECT_EQ(RunMaskctl("vocab").status, 2);                    // --tokenizer missing
  EXPECT_EQ(RunMaskctl("vocab --tokenizer").status, 2);        // no value
  EXPECT_EQ(RunMaskctl("vocab --bogus 1").status, 2);          // unknown flag
  r = RunMaskctl("vocab --tokenizer " + testing::BundledTokenizerPath() + " --vocab-size 100");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("vocab_size 100 is smaller than the highest token id 151668 + 1"));
  EXPECT_EQ(RunMaskctl("vocab --tokenizer " + testing::BundledTokenizerPath() + " --eos x").status,
            2);
}

}  // namespace
}  // namespace maskd
