// Shared by the Vocabulary loader tests (tests/index/vocabulary_*_test.cc):
// hand-written tokenizer.json documents (BPE vocab, added tokens, decoders)
// and loading them as the file "t.json".
#ifndef MASKD_TESTS_INDEX_VOCABULARY_TEST_UTIL_H_
#define MASKD_TESTS_INDEX_VOCABULARY_TEST_UTIL_H_

#include <initializer_list>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tokenizer/vocabulary.h"

namespace maskd::vocab_test {

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
inline std::string Doc(const std::string& vocab, const std::string& added = "[]",
                const std::string& decoder = kByteLevelDecoder) {
  return absl::StrCat(
      R"({"version": "1.0", "truncation": null, "padding": null, "added_tokens": )", added,
      R"(, "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": )",
      decoder, R"(, "model": {"type": "BPE", "dropout": null, "unk_token": null,
      "byte_fallback": false, "vocab": )", vocab,
      R"(, "merges": ["a b", "ab c", ["x", "y"]]}})");
}

inline std::string Added(int id, const std::string& content_json, bool special) {
  return absl::StrCat(R"({"id": )", id, R"(, "content": )", content_json,
                      R"(, "single_word": false, "lstrip": false, "rstrip": false, )",
                      R"("normalized": false, "special": )", special ? "true" : "false", "}");
}

// A JSON array of the given JSON values.
inline std::string List(std::initializer_list<std::string> items) {
  std::string out = "[";
  for (const std::string& item : items) {
    if (out.size() > 1) out += ", ";
    out += item;
  }
  return out + "]";
}

inline absl::StatusOr<std::shared_ptr<const Vocabulary>> FromJson(const std::string& doc,
                                                           const std::string& config = "",
                                                           const VocabularyOptions& options = {}) {
  return Vocabulary::FromJson(doc, config, options, kSource);
}

inline std::shared_ptr<const Vocabulary> MustLoad(const std::string& doc, const std::string& config = "",
                                           const VocabularyOptions& options = {}) {
  auto v = FromJson(doc, config, options);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : nullptr;
}

// The error message of loading `doc`, "" when it loads.
inline std::string LoadError(const std::string& doc, const std::string& config = "",
                      const VocabularyOptions& options = {}) {
  auto v = FromJson(doc, config, options);
  return v.ok() ? "" : std::string(v.status().message());
}

}  // namespace maskd::vocab_test

#endif  // MASKD_TESTS_INDEX_VOCABULARY_TEST_UTIL_H_
