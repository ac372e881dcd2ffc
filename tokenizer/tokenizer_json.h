// Parsing of Hugging Face tokenizer.json / tokenizer_config.json documents
// into raw token strings, and the decoder rules that turn a token string into
// the bytes the tokenizer's decoder produces for it. Private to the tokenizer
// library: Vocabulary is the public face.
//
// Only what a vocabulary needs is read: model.type, model.vocab,
// added_tokens, decoder (and pre_tokenizer when there is no decoder). Every
// other value (merges, normalizer, post_processor, ...) is skipped
// structurally, not validated: a syntax error inside a skipped value may go
// unnoticed, which is harmless since nothing of it is used.
#ifndef MASKD_TOKENIZER_TOKENIZER_JSON_H_
#define MASKD_TOKENIZER_TOKENIZER_JSON_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/vocabulary.h"

namespace maskd::internal {

// A JSON document must be followed by this many readable bytes (any value):
// simdjson reads past the end in 64-byte blocks.
inline constexpr size_t kJsonPadding = 64;

// Token ids must be below this (16M): bounds the memory a hostile document
// can make the loader allocate (4 bytes of offsets per id).
inline constexpr uint32_t kMaxTokenIds = 1u << 24;

// How token strings map to bytes, read from the decoder.
struct DecoderRules {
  TokenizerKind kind = TokenizerKind::kByteLevel;
  // SentencePiece: this string (UTF-8, normally "▁" U+2581) is a space.
  std::string space_marker;
  // SentencePiece: a whole token "<0xXX>" is the one byte 0xXX (decoder
  // ByteFallback).
  bool byte_fallback = false;
};

struct RawToken {
  uint32_t id;
  uint32_t offset;  // into ParsedTokenizer::strings
  uint32_t length;  // bytes
  bool special;     // added tokens only; always false for model.vocab
};

// A tokenizer.json as read: token strings JSON-unescaped (UTF-8), not yet
// mapped to bytes, in document order.
struct ParsedTokenizer {
  DecoderRules rules;
  std::string strings;            // every token string, concatenated
  std::vector<RawToken> vocab;    // model.vocab
  std::vector<RawToken> added;    // added_tokens
  std::string_view str(const RawToken& t) const {
    return std::string_view(strings).substr(t.offset, t.length);
  }
};

// Parses a tokenizer.json. `json` must be followed by kJsonPadding readable
// bytes. Errors are InvalidArgument "<source>: <problem>". Does not check
// ids for duplicates (the caller does, with the id table at hand).
absl::StatusOr<ParsedTokenizer> ParseTokenizerJson(std::string_view json,
                                                   std::string_view source);

// Parses a tokenizer_config.json for its "eos_token" (a string, or an object
// with "content"). nullopt when absent or null. No padding needed. Errors are
// InvalidArgument "<source>: <problem>".
absl::StatusOr<std::optional<std::string>> ParseEosToken(
    std::string_view json, std::string_view source);

// Appends the bytes the decoder produces for token string `token` to `out`,
// exactly as Hugging Face `tokenizers` decodes a lone token:
//  - byte-level: every character maps back through GPT-2's byte<->unicode
//    table; when some character is not in the table the token's UTF-8 is
//    taken as is (the ByteLevel decoder's own fallback);
//  - SentencePiece: every space marker becomes ' ', then a token that is
//    exactly "<0x" + two hex digits + ">" becomes that one byte when
//    byte_fallback is on.
// Never appends more bytes than token.size().
void AppendTokenBytes(const DecoderRules& rules, std::string_view token,
                      std::string* out);

}  // namespace maskd::internal

#endif  // MASKD_TOKENIZER_TOKENIZER_JSON_H_
