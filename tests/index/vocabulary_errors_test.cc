// Vocabulary loader, malformed input: every error names the file and the
// problem; blanking "merges" before the parse (tokenizer/json_blank.h).
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
using ::maskd::vocab_test::LoadError;

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

}  // namespace
}  // namespace maskd
