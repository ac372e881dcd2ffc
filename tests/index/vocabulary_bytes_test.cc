// Vocabulary loader, what a document means: byte-level and SentencePiece
// bytes, id gaps and padding, added tokens, EOS, the content hash.
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
using ::maskd::vocab_test::kSentencePieceDecoder;
using ::maskd::vocab_test::Doc;
using ::maskd::vocab_test::Added;
using ::maskd::vocab_test::List;
using ::maskd::vocab_test::FromJson;
using ::maskd::vocab_test::MustLoad;
using ::maskd::vocab_test::LoadError;

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

// TokenTrie's links: a token's node spells its bytes up the parents to the
// root; a special token has no node.
TEST(VocabularyTest, TrieNodesOfTokensAndTheirParents) {
  std::string added = List({Added(5, R"("<|end|>")", true)});
  auto v = MustLoad(Doc(R"({"a": 0, "ab": 1, "abc": 2, "b": 3, "ac": 4})", added));
  ASSERT_NE(v, nullptr);
  const std::unique_ptr<const TokenTrie> trie = TokenTrie::Build(*v);
  for (uint32_t id = 0; id < 5; ++id) {
    std::string spelled;
    uint32_t node = trie->node_of(id);
    ASSERT_NE(node, 0u) << id;
    for (; node != 0; node = trie->parent(node)) {
      spelled.insert(spelled.begin(), static_cast<char>(trie->nodes()[node].byte));
    }
    EXPECT_EQ(spelled, v->bytes(id));
  }
  EXPECT_EQ(trie->node_of(5), 0u);
  EXPECT_EQ(trie->node_of(1000), 0u);
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

}  // namespace
}  // namespace maskd
