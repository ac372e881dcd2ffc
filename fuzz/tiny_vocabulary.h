// A byte-level BPE tokenizer.json of 256 byte tokens, ten merges and an EOS
// ("<|end|>", id 270): masks of 9 words, so that fuzzers can compare a mask
// with brute force on every input.
#ifndef MASKD_FUZZ_TINY_VOCABULARY_H_
#define MASKD_FUZZ_TINY_VOCABULARY_H_

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"

namespace maskd::fuzz {

// The GPT-2 byte-level alphabet: byte b as the UTF-8 of its stand-in code point.
inline std::string ByteLevelChar(int b) {
  int cp = b;
  if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
    int n = 0;  // the stand-ins of the non-printable bytes are 256, 257, ... in byte order
    for (int c = 0; c < b; ++c) {
      if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) ++n;
    }
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

inline std::string JsonQuote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

// The tokenizer_config.json that goes with TinyTokenizerJson().
inline constexpr char kTinyTokenizerConfig[] = R"({"eos_token":"<|end|>"})";

// The tokenizer.json; its tokenizer_config.json is kTinyTokenizerConfig.
inline std::string TinyTokenizerJson() {
  std::string vocab;
  for (int b = 0; b < 256; ++b) {
    vocab += (b ? "," : "") + JsonQuote(ByteLevelChar(b)) + ":" + std::to_string(b);
  }
  const char* merges[] = {"ab", "{\"", "\":", "\",", "true", "false", "null", "12", "00", "\u0120a"};
  int id = 256;
  for (const char* m : merges) vocab += "," + JsonQuote(m) + ":" + std::to_string(id++);
  return "{\"model\":{\"type\":\"BPE\",\"vocab\":{" + vocab +
         "}},\"added_tokens\":[{\"id\":270,\"content\":\"<|end|>\",\"special\":true}],"
         "\"decoder\":{\"type\":\"ByteLevel\"}}";
}

// The tiny tokenizer loaded as "tiny", once per process (never freed); aborts
// if it does not load.
inline const std::shared_ptr<const TokenizerContext>& TinyTokenizer() {
  static const auto* context = [] {
    auto v = Vocabulary::FromJson(TinyTokenizerJson(), kTinyTokenizerConfig, {}, "tiny");
    if (!v.ok()) {
      std::fprintf(stderr, "tiny vocabulary: %s\n", v.status().ToString().c_str());
      std::abort();
    }
    return new std::shared_ptr<const TokenizerContext>(TokenizerContext::Create(*std::move(v)));
  }();
  return *context;
}

}  // namespace maskd::fuzz

#endif  // MASKD_FUZZ_TINY_VOCABULARY_H_
