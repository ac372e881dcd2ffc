// Vocabulary: the exact bytes of every token id of a Hugging Face tokenizer.
//
// A Vocabulary is immutable once loaded and safe to share between threads.
// Token ids run from 0 to size() - 1, where size() is the logits (mask) width:
// ids without a token (gaps in the tokenizer's id space, or padding ids past
// the tokenizer's highest id) exist but have no bytes, and are always masked.
//
// What a token's bytes are (the bytes HF `tokenizers` decode gives for the
// token, token by token; scripts/tokenizer_digests.py checks every token of
// the shared tokenizers against HF):
//  - Supported models: BPE (model.vocab is {token: id}) and Unigram
//    (model.vocab is [[piece, score], ...], id = index). WordPiece and
//    WordLevel are refused: their decoders join tokens with context-dependent
//    spaces / "##" prefixes, so a token has no bytes of its own.
//  - The kind comes from the decoder (or, when it has none, the
//    pre_tokenizer): ByteLevel -> byte-level; Metaspace, Replace "▁" -> " ",
//    ByteFallback -> SentencePiece. Other decoders that change bytes are
//    refused. Fuse, Strip (llama2's "drop the first space of the whole
//    text") and Metaspace's first-token space removal act on a decoded
//    sequence's start, not on a token's bytes, and are ignored.
//  - Byte-level: each character maps back through GPT-2's byte<->unicode
//    table; a string with a character outside the table keeps its UTF-8
//    (HF's own fallback). SentencePiece: "▁" is ' '; a whole token "<0xXX>"
//    is the byte 0xXX when the decoder has ByteFallback. Tokens whose bytes
//    are not valid UTF-8 on their own are normal.
//  - added_tokens: ids as written in the file (HF re-derives them and agrees
//    for well-formed files). An added token replaces a model.vocab entry with
//    the same id (HF's id_to_token looks at added tokens first). Special ones
//    keep their content's UTF-8 (for display) and are never text. Non-special
//    ones are text and go through the decoder like any token, as HF decode
//    does: gemma3's "▁▁" is two spaces, qwen3's "<think>" is itself.
//  - EOS: tokenizer_config.json's "eos_token" (a string or {"content": ...}),
//    looked up among added tokens, then model.vocab; an eos_token that is no
//    token is an error. No config (or a null eos_token) and no override: no
//    EOS ids. Multi-EOS models (generation_config.json) pass an override.
//  - Ids must be < 2^24 (a bound on what a hostile file can make us allocate).
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

class LoopMasks;
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

  // Trie of the text tokens' bytes, built once at load, shared by all indexes.
  const TokenTrie& trie() const { return *trie_; }
  // Mask parts shared by the loops of every index over this vocabulary
  // (index/loop_masks.h): a thread-safe memo that changes no answer above.
  LoopMasks& loop_masks() const { return *loop_masks_; }

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
  std::unique_ptr<LoopMasks> loop_masks_;

  friend class VocabularyBuilder;
};

}  // namespace maskd

#endif  // MASKD_INDEX_VOCABULARY_H_
