// Vocabulary loader: hand-written tokenizer.json documents (every rule and
// every error path), the bundled Qwen3 tokenizer, the shared tokenizers
// against tests/data/tokenizer_digests.json (written by
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

namespace maskd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

constexpr char kSource[] = "t.json";

const char kByteLevelDecoder[] =
    R"({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true})";
const char kSentencePieceDecoder[] =
    R"({"type": "Sequence", "decoders": [
         {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
         {"type": "ByteFallback"}, {"type": "Fuse"},
         {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})";

// A tokenizer.json with the given BPE vocab object, added_tokens array and
// decoder (all JSON text).
std::string Doc(const std::string& vocab, const std::string& added = "[]",
                const std::string& decoder = kByteLevelDecoder) {
  return absl::StrCat(
      R"({"version": "1.0", "truncation": null, "padding": null, "added_tokens": )", added,
      R"(, "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": )",
      decoder, R"(, "model": {"type": "BPE", "dropout": null, "unk_token": null,
      "byte_fallback": false, "vocab": )", vocab,
      R"(, "merges": ["a b", "ab c", ["x", "y"]]}})");
}

std::string Added(int id, const std::string& content_json, bool special) {
  return absl::StrCat(R"({"id": )", id, R"(, "content": )", content_json,
                      R"(, "single_word": false, "lstrip": false, "rstrip": false, )",
                      R"("normalized": false, "special": )", special ? "true" : "false", "}");
}

// A JSON array of the given JSON values.
std::string List(std::initializer_list<std::string> items) {
  std::string out = "[";
  for (const std::string& item : items) {
    if (out.size() > 1) out += ", ";
    out += item;
  }
  return out + "]";
}

absl::StatusOr<std::shared_ptr<const Vocabulary>> FromJson(const std::string& doc,
                                                           const std::string& config = "",
                                                           const VocabularyOptions& options = {}) {
  return Vocabulary::FromJson(doc, config, options, kSource);
}

std::shared_ptr<const Vocabulary> MustLoad(const std::string& doc, const std::string& config = "",
                                           const VocabularyOptions& options = {}) {
  auto v = FromJson(doc, config, options);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : nullptr;
}

// The error message of loading `doc`, "" when it loads.
std::string LoadError(const std::string& doc, const std::string& config = "",
                      const VocabularyOptions& options = {}) {
  auto v = FromJson(doc, config, options);
  return v.ok() ? "" : std::string(v.status().message());
}

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

std::vector<uint32_t> TrieTokenIds(const Vocabulary& v) {
  const std::unique_ptr<const TokenTrie> trie = TokenTrie::Build(v);
  const TokenTrie& t = *trie;
  return std::vector<uint32_t>(t.token_ids(), t.token_ids() + t.token_begin()[t.num_nodes()]);
}

// ---------------------------------------------------------------------------
// Byte-level and SentencePiece bytes.

TEST(VocabularyTest, ByteLevelBytes) {
  // "ä¸" is bytes E4 B8: half of a UTF-8 character, a normal token. "q r"
  // has a character outside GPT-2's table (the space): HF's ByteLevel
  // decoder keeps such a string's UTF-8.
  auto v = MustLoad(Doc(R"({"a": 0, "\u0120b": 1, "\u010a": 2, "\u00c3": 3, "\u00e4\u00b8": 4,
                            "q r": 5, "\u0100\u0121": 6, "\u00ff": 7})"));
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->kind(), TokenizerKind::kByteLevel);
  EXPECT_EQ(TokenizerKindName(v->kind()), "byte_level");
  EXPECT_EQ(v->size(), 8u);
  EXPECT_EQ(v->num_tokens(), 8u);
  EXPECT_EQ(v->num_special(), 0u);
  EXPECT_EQ(v->bytes(0), "a");
  EXPECT_EQ(v->bytes(1), " b");
  EXPECT_EQ(v->bytes(2), "\n");
  EXPECT_EQ(v->bytes(3), "\xC3");
  EXPECT_EQ(v->bytes(4), "\xE4\xB8");
  EXPECT_EQ(v->bytes(5), "q r");
  EXPECT_EQ(v->bytes(6), std::string("\x00\x7F", 2));  // U+0100 is byte 0, U+0121 byte 0x7F
  EXPECT_EQ(v->bytes(7), "\xFF");
  EXPECT_EQ(v->bytes(8), "");  // out of range
  for (uint32_t id = 0; id < 8; ++id) {
    EXPECT_TRUE(v->has_token(id));
    EXPECT_FALSE(v->is_special(id));
  }
  EXPECT_FALSE(v->has_token(8));
  EXPECT_THAT(v->eos_ids(), IsEmpty());
  EXPECT_EQ(TrieTokenIds(*v).size(), 8u);
}

TEST(VocabularyTest, SentencePieceBytes) {
  auto v = MustLoad(Doc(R"({"<unk>": 0, "<0x0A>": 1, "<0xE4>": 2, "\u2581hello": 3, "a\u2581b": 4,
                            "<0x4G>": 5, "<0x+F>": 6, "\u2581\u2581": 7, "<0xff>": 8,
                            "<0x41>\u2581": 9})",
                        "[]", kSentencePieceDecoder));
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->kind(), TokenizerKind::kSentencePiece);
  EXPECT_EQ(TokenizerKindName(v->kind()), "sentencepiece");
  EXPECT_EQ(v->bytes(0), "<unk>");  // not special unless added_tokens says so
  EXPECT_EQ(v->bytes(1), "\n");
  EXPECT_EQ(v->bytes(2), "\xE4");
  EXPECT_EQ(v->bytes(3), " hello");
  EXPECT_EQ(v->bytes(4), "a b");
  EXPECT_EQ(v->bytes(5), "<0x4G>");  // not hex: literal, as HF's ByteFallback
  EXPECT_EQ(v->bytes(6), "\x0F");    // Rust's from_str_radix accepts "+F"
  EXPECT_EQ(v->bytes(7), "  ");
  EXPECT_EQ(v->bytes(8), "\xFF");  // lowercase hex is fine
  EXPECT_EQ(v->bytes(9), "<0x41> ");
}

TEST(VocabularyTest, MetaspaceWithoutByteFallbackKeepsByteTokensLiteral) {
  auto v = MustLoad(Doc(R"({"<0x41>": 0, "\u2581a": 1, "x_y": 2})", "[]",
                        R"({"type": "Metaspace", "replacement": "\u2581",
                            "prepend_scheme": "always"})"));
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->kind(), TokenizerKind::kSentencePiece);
  EXPECT_EQ(v->bytes(0), "<0x41>");
  EXPECT_EQ(v->bytes(1), " a");
  // A custom replacement character.
  v = MustLoad(Doc(R"({"x_y": 0})", "[]", R"({"type": "Metaspace", "replacement": "_"})"));
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->bytes(0), "x y");
}

TEST(VocabularyTest, KindFromPreTokenizerWhenNoDecoder) {
  std::string doc = Doc(R"({"\u0120a": 0})", "[]", "null");
  size_t at = doc.find(R"("pre_tokenizer": null)");
  ASSERT_NE(at, std::string::npos);
  doc.replace(at, 21, R"("pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false}]})");
  auto v = MustLoad(doc);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->kind(), TokenizerKind::kByteLevel);
  EXPECT_EQ(v->bytes(0), " a");
}

TEST(VocabularyTest, UnigramVocabulary) {
  std::string doc = R"({"added_tokens": [], "decoder": {"type": "Sequence", "decoders": [
      {"type": "Metaspace", "replacement": "\u2581"}, {"type": "ByteFallback"}]},
      "model": {"type": "Unigram", "unk_id": 0,
                "vocab": [["<unk>", 0.0], ["\u2581a", -1.5], ["<0x41>", -2], ["b", -3.25]]}})";
  auto v = MustLoad(doc);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->size(), 4u);
  EXPECT_EQ(v->bytes(1), " a");
  EXPECT_EQ(v->bytes(2), "A");
  EXPECT_EQ(v->bytes(3), "b");
}

// ---------------------------------------------------------------------------
// Ids: gaps and padding.

TEST(VocabularyTest, GapsHaveNoToken) {
  auto v = MustLoad(Doc(R"({"a": 0, "b": 2, "c": 5})"));
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->size(), 6u);
  EXPECT_EQ(v->num_tokens(), 3u);
  for (uint32_t id : {1u, 3u, 4u}) {
    EXPECT_FALSE(v->has_token(id)) << id;
    EXPECT_EQ(v->bytes(id), "") << id;
    EXPECT_FALSE(v->is_special(id)) << id;
  }
  EXPECT_EQ(v->bytes(5), "c");
  EXPECT_THAT(TrieTokenIds(*v), ::testing::UnorderedElementsAre(0u, 2u, 5u));
}

TEST(VocabularyTest, VocabSizePadsAndMustCoverEveryId) {
  VocabularyOptions options;
  options.vocab_size = 10;
  auto v = MustLoad(Doc(R"({"a": 0, "b": 5})"), "", options);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->size(), 10u);
  EXPECT_EQ(v->num_tokens(), 2u);
  EXPECT_FALSE(v->has_token(9));
  EXPECT_EQ(v->bytes(9), "");
  options.vocab_size = 6;  // exactly highest id + 1
  EXPECT_EQ(LoadError(Doc(R"({"a": 0, "b": 5})"), "", options), "");
  options.vocab_size = 5;
  auto bad = FromJson(Doc(R"({"a": 0, "b": 5})"), "", options);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "t.json: vocab_size 5 is smaller than the highest token id 5 + 1");
  options.vocab_size = 1u << 30;
  EXPECT_EQ(LoadError(Doc(R"({"a": 0})"), "", options),
            "t.json: vocab_size 1073741824 is out of range (at most 16777216)");
}

// ---------------------------------------------------------------------------
// Added tokens.

TEST(VocabularyTest, SpecialAddedTokensAreFlaggedAndKeptOutOfTheTrie) {
  std::string added = List({Added(3, R"("<|end|>")", true), Added(4, R"("<\u0120x>")", true)});
  auto v = MustLoad(Doc(R"({"a": 0, "b": 1})", added));
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->size(), 5u);
  EXPECT_EQ(v->num_tokens(), 4u);
  EXPECT_EQ(v->num_special(), 2u);
  EXPECT_TRUE(v->is_special(3));
  EXPECT_TRUE(v->has_token(3));
  EXPECT_EQ(v->bytes(3), "<|end|>");
  EXPECT_EQ(v->bytes(4), "<\xC4\xA0x>");  // a special token's name is kept as UTF-8
  EXPECT_FALSE(v->is_special(0));
  EXPECT_FALSE(v->is_special(2));
  EXPECT_THAT(TrieTokenIds(*v), ::testing::UnorderedElementsAre(0u, 1u));
}

TEST(VocabularyTest, NonSpecialAddedTokensDecodeLikeHuggingFace) {
  // HF decode runs added tokens through the decoder too: byte-level maps
  // "Ġx" to " x", keeps " a" (a character outside the table) as is, and
  // ASCII such as "<think>" is itself.
  std::string added = List({Added(2, R"("<think>")", false), Added(3, R"("\u0120x")", false),
                            Added(4, R"(" a")", false)});
  auto v = MustLoad(Doc(R"({"a": 0, "b": 1})", added));
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->bytes(2), "<think>");
  EXPECT_EQ(v->bytes(3), " x");
  EXPECT_EQ(v->bytes(4), " a");
  EXPECT_EQ(v->num_special(), 0u);
  EXPECT_EQ(TrieTokenIds(*v).size(), 5u);
  // SentencePiece: gemma3's "▁▁" added tokens are spaces; "<0x42>" is a byte.
  added = List({Added(2, R"("\u2581\u2581")", false), Added(3, R"("<0x42>")", false)});
  v = MustLoad(Doc(R"({"a": 0, "b": 1})", added, kSentencePieceDecoder));
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->bytes(2), "  ");
  EXPECT_EQ(v->bytes(3), "B");
}

TEST(VocabularyTest, AddedTokenWinsOverVocabEntryWithTheSameId) {
  // As HF's id_to_token and decode: the added vocabulary is consulted first.
  auto v = MustLoad(Doc(R"({"a": 0, "b": 1})", List({Added(1, R"("OVR")", false)})));
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->size(), 2u);
  EXPECT_EQ(v->num_tokens(), 2u);
  EXPECT_EQ(v->bytes(1), "OVR");
  v = MustLoad(Doc(R"({"a": 0, "b": 1})", List({Added(1, R"("b")", true)})));
  ASSERT_NE(v, nullptr);
  EXPECT_TRUE(v->is_special(1));
  EXPECT_EQ(v->num_special(), 1u);
}

// ---------------------------------------------------------------------------
// EOS.

TEST(VocabularyTest, EosFromConfig) {
  std::string doc = Doc(R"({"a": 0, "</s>": 1})", List({Added(2, R"("<eos>")", true)}));
  // simdjson refuses this integer; the config must load anyway.
  auto v = MustLoad(doc, R"({"eos_token": "<eos>",
                             "model_max_length": 1000000000000000019884624838656})");
  ASSERT_NE(v, nullptr);
  EXPECT_THAT(v->eos_ids(), ElementsAre(2u));
  EXPECT_TRUE(v->is_eos(2));
  EXPECT_FALSE(v->is_eos(1));
  // The object form, and a vocab (not added) token.
  v = MustLoad(doc, R"({"eos_token": {"content": "</s>", "lstrip": false,
                                       "__type": "AddedToken"}})");
  ASSERT_NE(v, nullptr);
  EXPECT_THAT(v->eos_ids(), ElementsAre(1u));
  // Null, absent, or no config at all: no EOS.
  for (const char* config : {R"({"eos_token": null})", R"({"bos_token": "<s>"})", ""}) {
    v = MustLoad(doc, config);
    ASSERT_NE(v, nullptr);
    EXPECT_THAT(v->eos_ids(), IsEmpty()) << config;
  }
}

TEST(VocabularyTest, EosLookupPrefersAddedTokens) {
  // "x" is both a vocab token (id 0) and an added token (id 3).
  auto v = MustLoad(Doc(R"({"x": 0, "y": 1})", List({Added(3, R"("x")", true)})),
                    R"({"eos_token": "x"})");
  ASSERT_NE(v, nullptr);
  EXPECT_THAT(v->eos_ids(), ElementsAre(3u));
}

TEST(VocabularyTest, EosOverrideReplacesConfig) {
  std::string doc = Doc(R"({"a": 0, "b": 1, "c": 2})", List({Added(4, R"("<eos>")", true)}));
  VocabularyOptions options;
  options.eos_ids = {4, 1, 4};
  options.vocab_size = 8;
  auto v = MustLoad(doc, R"({"eos_token": "<eos>"})", options);
  ASSERT_NE(v, nullptr);
  EXPECT_THAT(v->eos_ids(), ElementsAre(1u, 4u));  // sorted, unique
  EXPECT_TRUE(v->is_eos(1));
  EXPECT_FALSE(v->is_eos(2));
  // With an override the config is not consulted (even a broken one).
  EXPECT_EQ(LoadError(doc, "{not json", options), "");
  options.eos_ids = {8};
  EXPECT_EQ(LoadError(doc, "", options), "t.json: EOS id 8 is out of range (vocab size 8)");
  options.eos_ids = {7};  // a padding id: < size(), allowed
  EXPECT_EQ(LoadError(doc, "", options), "");
}

TEST(VocabularyTest, EosErrors) {
  std::string doc = Doc(R"({"a": 0})");
  EXPECT_EQ(LoadError(doc, R"({"eos_token": "<nope>"})"),
            "t.json (tokenizer_config): eos_token \"<nope>\" is not a token of t.json");
  EXPECT_EQ(LoadError(doc, R"({"eos_token": 5})"),
            "t.json (tokenizer_config): eos_token is neither a string nor an object with "
            "\"content\"");
  EXPECT_EQ(LoadError(doc, R"({"eos_token": {"lstrip": true}})"),
            "t.json (tokenizer_config): eos_token object has no string \"content\"");
  EXPECT_EQ(LoadError(doc, "[1, 2]"), "t.json (tokenizer_config): not a JSON object");
  EXPECT_THAT(LoadError(doc, R"({"eos_token": )"),
              StartsWith("t.json (tokenizer_config): malformed JSON: "));
}

// ---------------------------------------------------------------------------
// Content hash.

TEST(VocabularyTest, ContentHashFollowsTheDocumentedSerialization) {
  // Computed with Python's hashlib from the serialization in vocabulary.h:
  // "maskd-vocab-v1\n", u32 size 5, (1,1,"a") (1,2," b") (0,0) (3,5,"<eos>")
  // (0,0), u32 1, u32 3.
  VocabularyOptions options;
  options.vocab_size = 5;
  auto v = MustLoad(Doc(R"({"a": 0, "\u0120b": 1})", List({Added(3, R"("<eos>")", true)})),
                    R"({"eos_token": "<eos>"})", options);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->content_hash(), "952a0b788bbbc3d8dad56653d4f7a79d9a6296792361231fc9359e8b34a48d88");
}

TEST(VocabularyTest, ContentHashCoversBytesFlagsEosAndSize) {
  const std::string base_vocab = R"({"a": 0, "b": 1, "c": 2})";
  auto hash = [&](const std::string& doc, const VocabularyOptions& options = {}) {
    auto v = MustLoad(doc, "", options);
    return v ? v->content_hash() : std::string();
  };
  std::string h = hash(Doc(base_vocab));
  EXPECT_EQ(h.size(), 64u);
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(h, hash(Doc(base_vocab)));                                    // stable
  EXPECT_EQ(h, hash(Doc(R"({"c": 2, "b": 1, "a": 0})")));                 // order-free
  EXPECT_NE(h, hash(Doc(R"({"a": 0, "b": 1, "d": 2})")));                 // bytes
  EXPECT_NE(h, hash(Doc(R"({"a": 0, "bc": 1, "": 2})")));                 // boundaries
  EXPECT_NE(h, hash(Doc(R"({"a": 0, "b": 1})", List({Added(2, R"("c")", true)}))));  // flag
  VocabularyOptions options;
  options.vocab_size = 4;
  EXPECT_NE(h, hash(Doc(base_vocab), options));  // size
  options = {};
  options.eos_ids = {2};
  EXPECT_NE(h, hash(Doc(base_vocab), options));  // EOS
}

// ---------------------------------------------------------------------------
// Errors: every one names the file and the problem.

TEST(VocabularyErrorTest, MalformedDocuments) {
  EXPECT_THAT(LoadError("{"), StartsWith("t.json: malformed JSON: "));
  EXPECT_THAT(LoadError(""), StartsWith("t.json: malformed JSON: "));
  EXPECT_THAT(LoadError(Doc(R"({"a": 0})") + " x"), StartsWith("t.json: malformed JSON: "));
  EXPECT_THAT(LoadError(R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "normalizer": [1,,2]})"),
              StartsWith("t.json: malformed JSON: "));
  EXPECT_THAT(LoadError("{\"model\": \"\xFF\"}"), StartsWith("t.json: malformed JSON: "));
  EXPECT_EQ(LoadError("[1, 2]"), "t.json: not a JSON object");
  EXPECT_EQ(LoadError(R"({"decoder": null})"), "t.json: no \"model\"");
  EXPECT_EQ(LoadError(R"({"model": []})"), "t.json: \"model\" is not an object");
  EXPECT_EQ(LoadError(R"({"model": {"vocab": {}}})"), "t.json: model.type is missing");
  EXPECT_EQ(LoadError(R"({"model": {"type": "BPE", "vocab": []}})"),
            "t.json: model.vocab (an object of token -> id) is missing");
  EXPECT_EQ(LoadError(R"({"model": {"type": "Unigram", "vocab": [["a", 0], 5]}})"),
            "t.json: model.vocab[1] is not a [piece, score] pair");
  EXPECT_EQ(LoadError(R"({"model": {"type": "BPE", "vocab": {}},
                          "decoder": {"type": "ByteLevel"}})"),
            "t.json: the tokenizer has no tokens");
}

TEST(VocabularyErrorTest, UnsupportedTokenizers) {
  EXPECT_EQ(LoadError(R"({"model": {"type": "WordPiece", "vocab": {"a": 0}},
                          "decoder": {"type": "WordPiece", "prefix": "##"}})"),
            "t.json: unsupported model type WordPiece (supported: BPE, Unigram)");
  EXPECT_EQ(LoadError(R"({"model": {"type": "WordLevel", "vocab": {"a": 0}}})"),
            "t.json: unsupported model type WordLevel (supported: BPE, Unigram)");
  EXPECT_EQ(LoadError(Doc(R"({"a": 0})", "[]", R"({"type": "WordPiece", "prefix": "##"})")),
            "t.json: unsupported decoder type WordPiece");
  EXPECT_THAT(LoadError(Doc(R"({"a": 0})", "[]",
                            R"({"type": "Replace", "pattern": {"Regex": "x"}, "content": " "})")),
              StartsWith("t.json: unsupported decoder Replace"));
  EXPECT_THAT(LoadError(Doc(R"({"a": 0})", "[]", "null")),
              StartsWith("t.json: cannot tell how token strings map to bytes"));
  EXPECT_EQ(LoadError(Doc(R"({"a": 0})", "[]",
                          R"({"type": "Sequence", "decoders": [{"type": "ByteLevel"},
                                                               {"type": "ByteFallback"}]})")),
            "t.json: decoder mixes ByteLevel and SentencePiece-style steps");
}

TEST(VocabularyErrorTest, MalformedDecoders) {
  auto decoder_error = [](const std::string& decoder) {
    return LoadError(Doc(R"({"a": 0})", "[]", decoder));
  };
  EXPECT_EQ(decoder_error("[]"), "t.json: decoder is not an object");
  EXPECT_EQ(decoder_error(R"({"add_prefix_space": true})"), "t.json: decoder has no type");
  EXPECT_EQ(decoder_error(R"({"type": "Sequence"})"), "t.json: decoder: Sequence without a list");
  std::string deep = R"({"type": "ByteLevel"})";
  for (int i = 0; i < 20; ++i) deep = R"({"type": "Sequence", "decoders": [)" + deep + "]}";
  EXPECT_EQ(decoder_error(deep), "t.json: decoder is nested too deeply");
  EXPECT_EQ(LoadError(R"({"model": {"type": 3, "vocab": {}}})"),
            "t.json: model.type is not a string");
  EXPECT_EQ(LoadError(R"({"model": {"type": "Unigram", "vocab": {"a": 0}}})"),
            "t.json: model.vocab (an array of [piece, score]) is missing");
  std::string doc = Doc(R"({"a": 0})", "[]", "null");
  doc.replace(doc.find(R"("pre_tokenizer": null)"), 21,
              R"("pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                  {"type": "ByteLevel"}, {"type": "Metaspace"}]})");
  EXPECT_EQ(LoadError(doc), "t.json: pre_tokenizer mixes ByteLevel and Metaspace");
}

TEST(VocabularyErrorTest, SparseIdSpaceIsRefused) {
  // Found by tokenizer_json_fuzzer: one id of 12,000,049 in a 2 KB document
  // made a 12-million-id vocabulary (0.9 s and 179 MB in a Release build),
  // which RegisterTokenizer would let any client buy. Ids may span at most
  // 2 x tokens + 65,536.
  EXPECT_EQ(LoadError(Doc(R"({"a": 0, "b": 65537})")), "");  // 65,538 ids for 2 tokens: fits
  EXPECT_EQ(LoadError(Doc(R"({"a": 0, "b": 65540})")),
            "t.json: ids span 65541 (highest id or vocab_size) for 2 tokens: at most 2 x tokens + "
            "65536");
  EXPECT_EQ(LoadError(Doc(R"({"a": 0})", List({Added(12000049, R"("<x>")", true)}))),
            "t.json: ids span 12000050 (highest id or vocab_size) for 2 tokens: at most 2 x "
            "tokens + 65536");
  VocabularyOptions options;
  options.vocab_size = 1u << 20;  // padding, not ids: the same bound
  EXPECT_EQ(LoadError(Doc(R"({"a": 0})"), "", options),
            "t.json: ids span 1048576 (highest id or vocab_size) for 1 tokens: at most 2 x tokens "
            "+ 65536");
}

TEST(VocabularyErrorTest, BadIds) {
  EXPECT_EQ(LoadError(Doc(R"({"a": 0, "b": 1, "c": 1})")),
            "t.json: duplicate token id 1 in model.vocab");
  EXPECT_EQ(LoadError(Doc(R"({"a": 0})",
                          List({Added(17, R"("<x>")", true), Added(17, R"("<y>")", false)}))),
            "t.json: duplicate token id 17 in added_tokens");
  EXPECT_EQ(LoadError(Doc(R"({"a": 16777216})")),
            "t.json: token id 16777216 in model.vocab is out of range (ids must be < 16777216)");
  EXPECT_EQ(LoadError(Doc(R"({"a": 0})", List({Added(99999999, R"("<x>")", true)}))),
            "t.json: token id 99999999 in added_tokens is out of range (ids must be < 16777216)");
  EXPECT_THAT(LoadError(Doc(R"({"a": -1})")),
              StartsWith("t.json: model.vocab: the id of token \"a\" is not an unsigned integer"));
  EXPECT_THAT(LoadError(Doc(R"({"a": 1.5})")),
              StartsWith("t.json: model.vocab: the id of token \"a\" is not an unsigned integer"));
  EXPECT_EQ(LoadError(Doc(R"({"a": 0})", R"([{"id": "1", "content": "x"}])")),
            "t.json: added_tokens[0].id is not an unsigned integer");
  EXPECT_EQ(LoadError(Doc(R"({"a": 0})", R"([{"id": 1, "content": "x"}, {"content": "y"}])")),
            "t.json: added_tokens[1] has no id");
  EXPECT_EQ(LoadError(Doc(R"({"a": 0})", R"([{"id": 1}])")),
            "t.json: added_tokens[0] has no content");
  EXPECT_EQ(LoadError(Doc(R"({"a": 0})", R"([{"id": 1, "content": 7}])")),
            "t.json: added_tokens[0].content is not a string");
  EXPECT_EQ(LoadError(Doc(R"({"a": 0})", R"([{"id": 1, "content": "x", "special": "yes"}])")),
            "t.json: added_tokens[0].special is not a boolean");
  EXPECT_EQ(LoadError(Doc(R"({"a": 0})", R"({"id": 1})")), "t.json: added_tokens is not an array");
  EXPECT_EQ(LoadError(Doc(R"({"a": 0})", R"([5])")), "t.json: added_tokens[0] is not an object");
}

// ---------------------------------------------------------------------------
// Blanking "merges" before the parse (tokenizer/json_blank.h).

// A random JSON value; arrays and strings are full of brackets, quotes and
// backslashes, so the SIMD scanner's string and escape handling is exercised
// across 64-byte block boundaries.
std::string RandomJson(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  int kind = depth >= 3 ? pick(2) : pick(4);
  if (kind == 0) return std::to_string(pick(100000));
  if (kind == 1) {
    static const char* const kPieces[] = {"a", "b", "[", "]", "{", "}", R"(\\)", R"(\")", ":",
                                          ",", " ", R"(\u0041)", R"(\n)", R"(\\\")", "\xC3\xA9",
                                          "x y"};
    std::string out = "\"";
    for (int n = pick(12); n > 0; --n) out += kPieces[pick(16)];
    return out + "\"";
  }
  std::string out = kind == 2 ? "[" : "{";
  for (int n = pick(6), k = 0; k < n; ++k) {
    if (k > 0) out += pick(2) ? ", " : ",";
    if (kind == 3) out += "\"k" + std::to_string(k) + "\": ";
    out += RandomJson(rng, depth + 1);
  }
  return out + (kind == 2 ? "]" : "}");
}

TEST(JsonBlankTest, BlanksExactlyTheMergesArray) {
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string merges = "[";
    for (int n = static_cast<int>(rng() % 40), k = 0; k < n; ++k) {
      merges += (k ? ", " : "") + RandomJson(rng, 1);
    }
    merges += "]";
    // Vary the alignment against the scanner's 64-byte blocks.
    std::string head = R"({"pad": ")" + std::string(rng() % 130, 'p') +
                       R"(", "vocab": {"merges": 1, "x\"merges\": [": 2}, "list": ["merges", 3],
                          "model": {"merges" :
                          )";
    std::string tail = R"(, "after": [1, "]"]}})";
    std::string doc = head + merges + tail;
    std::string want = head + "[" + std::string(merges.size() - 2, ' ') + "]" + tail;
    ASSERT_FALSE(nlohmann::json::parse(doc, nullptr, false).is_discarded()) << doc;
    EXPECT_EQ(internal::MatchingBracket(doc.data(), doc.size(), head.size()),
              head.size() + merges.size() - 1);
    ASSERT_EQ(internal::BlankArrayValues(doc.data(), doc.size(), "merges"), 1u) << doc;
    ASSERT_EQ(doc, want);
  }
}

TEST(JsonBlankTest, LeavesMalformedInputAlone) {
  std::string doc = R"({"merges": [["a", "b"], ["c", "d"])" + std::string(200, ' ');
  std::string copy = doc;
  EXPECT_EQ(internal::BlankArrayValues(doc.data(), doc.size(), "merges"), 0u);
  EXPECT_EQ(doc, copy);
  doc = R"({"merges": [1, 2}, "x": 1})";
  EXPECT_EQ(internal::MatchingBracket(doc.data(), doc.size(), 11), std::string::npos);
  EXPECT_EQ(internal::BlankArrayValues(doc.data(), doc.size(), "merges"), 0u);
}

TEST(JsonBlankTest, MergesContentIsNotValidated) {
  // The price of skipping merges: a syntax error inside it goes unnoticed.
  EXPECT_EQ(LoadError(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [1,,2]},
                          "decoder": {"type": "ByteLevel"}})"),
            "");
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
