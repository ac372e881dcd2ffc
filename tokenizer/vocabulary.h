// Vocabulary: the exact bytes of every token id of a Hugging Face tokenizer.
//
// Plain data: immutable once loaded and safe to share between threads; it
// knows nothing of automata or masks (tokenizer/tokenizer_context.h adds the
// token trie and the loop-mask memo). Token ids run from 0 to size() - 1,
// where size() is the logits (mask) width: ids without a token (gaps in the
// tokenizer's id space, or padding ids past the tokenizer's highest id) exist
// but have no bytes, and are always masked.
//
// A token's bytes are what HF `tokenizers` decode gives for it alone (BPE and
// Unigram models; byte-level and SentencePiece decoders); the rules, added
// and special tokens, EOS and the id bounds are in docs/design.md
// ("Tokenizers"). scripts/tokenizer_digests.py checks every token of the
// shared tokenizers against HF.
#ifndef MASKD_TOKENIZER_VOCABULARY_H_
#define MASKD_TOKENIZER_VOCABULARY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace maskd {

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
  // tokenizer_config.json ("eos_token"). Each must be < size() (InvalidArgument
  // otherwise); any order, duplicates allowed.
  std::vector<uint32_t> eos_ids;
};

class Vocabulary {
 public:
  // Loads `path`: a tokenizer.json, a tokenizer.json.gz, or a folder holding
  // one of them (tokenizer.json first). tokenizer_config.json (or .json.gz)
  // beside it is read when present and options.eos_ids is empty (EOS is all
  // it contributes). Gzip is recognised by its magic bytes, whatever the
  // name. Errors name the file and the problem, no partial object: NotFound
  // for a missing file or folder entry, InvalidArgument for bad content
  // (malformed JSON, bad gzip, unsupported model or decoder, duplicate or
  // out-of-range ids, a vocab_size or EOS id that does not fit).
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
  // The hashed serialization (integers are little-endian uint32 unless said):
  //   "maskd-vocab-v1\n" (15 ASCII bytes), size(),
  //   for each id in [0, size()): flags (one byte: 1 = has a token,
  //     2 = special), byte length, the bytes;
  //   number of EOS ids, then each EOS id in ascending order.
  // Kind is not hashed: two tokenizers with equal bytes, flags, EOS and size
  // produce equal masks. scripts/tokenizer_digests.py recomputes it.
  const std::string& content_hash() const { return content_hash_; }

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

  friend class VocabularyBuilder;
};

}  // namespace maskd

#endif  // MASKD_TOKENIZER_VOCABULARY_H_
