// Vocabulary: the exact bytes of every token id of a Hugging Face tokenizer.
//
// A Vocabulary is immutable once loaded and safe to share between threads.
// Token ids run from 0 to size() - 1, where size() is the logits (mask) width:
// ids without a token (gaps in the tokenizer's id space, or padding ids past
// the tokenizer's highest id) exist but have no bytes, and are always masked.
#ifndef MASKD_INDEX_VOCABULARY_H_
#define MASKD_INDEX_VOCABULARY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace maskd {

class TokenTrie;

// How a tokenizer maps token strings to bytes.
enum class TokenizerKind {
  kByteLevel,      // GPT-2 byte<->unicode table (llama3, qwen3, gpt-oss).
  kSentencePiece,  // "▁" is a space, "<0xXX>" is one raw byte (llama2, gemma).
};

// "byte_level" or "sentencepiece": the names maskctl prints.
std::string_view TokenizerKindName(TokenizerKind kind);

struct VocabularyOptions {
  // Logits width. When set it must be > the highest token id; the extra ids
  // are padding and always masked. When unset: highest id + 1.
  std::optional<uint32_t> vocab_size;
  // EOS ids. When non-empty they replace the EOS found in
  // tokenizer_config.json ("eos_token"). Each must be a token id < size().
  std::vector<uint32_t> eos_ids;
};

class Vocabulary {
 public:
  // Loads `path`: a tokenizer.json, a tokenizer.json.gz, or a folder holding
  // one of them. tokenizer_config.json (or .json.gz) beside it is read when
  // present. Errors name the file and the problem; no partial object.
  static absl::StatusOr<std::shared_ptr<const Vocabulary>> Load(
      const std::string& path, const VocabularyOptions& options = {});

  // Same from in-memory documents. `config_json` may be empty. `source` names
  // the documents in error messages.
  static absl::StatusOr<std::shared_ptr<const Vocabulary>> FromJson(
      std::string_view tokenizer_json, std::string_view config_json,
      const VocabularyOptions& options, std::string_view source);

  Vocabulary(const Vocabulary&) = delete;
  Vocabulary& operator=(const Vocabulary&) = delete;
  ~Vocabulary();

  // Mask width: every id is < size().
  uint32_t size() const { return size_; }
  // Number of ids that have a token (excludes gaps and padding).
  uint32_t num_tokens() const { return num_tokens_; }
  uint32_t num_special() const { return num_special_; }
  TokenizerKind kind() const { return kind_; }

  bool has_token(uint32_t id) const {
    return id < size_ && ((present_[id >> 6] >> (id & 63)) & 1) != 0;
  }
  // The token's exact bytes; empty for an id without a token.
  std::string_view bytes(uint32_t id) const {
    if (id >= size_) return {};
    return std::string_view(blob_.data() + offsets_[id],
                            offsets_[id + 1] - offsets_[id]);
  }
  // Special tokens are never text: no constraint produces them, only EOS is
  // ever allowed (where the constraint may end).
  bool is_special(uint32_t id) const {
    return id < size_ && ((special_[id >> 6] >> (id & 63)) & 1) != 0;
  }
  bool is_eos(uint32_t id) const;
  const std::vector<uint32_t>& eos_ids() const { return eos_ids_; }

  // Lowercase hex SHA-256 over every id's bytes, special flag, the EOS ids and
  // size(). Stable across runs and machines: the tokenizer half of cache keys.
  const std::string& content_hash() const { return content_hash_; }

  // Trie of the text tokens' bytes, built once at load, shared by all indexes.
  const TokenTrie& trie() const { return *trie_; }

 private:
  Vocabulary();

  uint32_t size_ = 0;
  uint32_t num_tokens_ = 0;
  uint32_t num_special_ = 0;
  TokenizerKind kind_ = TokenizerKind::kByteLevel;
  // Token bytes concatenated in id order: id's bytes are
  // blob_[offsets_[id], offsets_[id + 1]). offsets_ has size_ + 1 entries; an
  // id without a token has an empty range and a clear bit in present_.
  std::string blob_;
  std::vector<uint32_t> offsets_;
  std::vector<uint64_t> present_;  // bitset over ids: has a token
  std::vector<uint64_t> special_;  // bitset over ids: special token
  std::vector<uint32_t> eos_ids_;  // sorted, unique
  std::string content_hash_;
  std::unique_ptr<const TokenTrie> trie_;

  friend class VocabularyBuilder;
};

}  // namespace maskd

#endif  // MASKD_INDEX_VOCABULARY_H_
