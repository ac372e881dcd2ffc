// TokenizerContext: a Vocabulary with what every index over it shares, its
// TokenTrie and its LoopMasks memo.
//
// Built once per tokenizer (the service's registry keeps one per name) and
// held by every TokenIndex and GrammarIndex over it. The vocabulary and the
// trie are immutable; the memo is thread-safe and changes no mask, only what
// computing one costs. Safe to share between threads.
#ifndef MASKD_TOKENIZER_TOKENIZER_CONTEXT_H_
#define MASKD_TOKENIZER_TOKENIZER_CONTEXT_H_

#include <cstddef>
#include <memory>
#include <utility>

#include "tokenizer/loop_masks.h"
#include "tokenizer/token_trie.h"
#include "tokenizer/vocabulary.h"

namespace maskd {

class TokenizerContext {
 public:
  struct Options {
    // Bound on the loop-mask memo in bytes (LoopMasks::max_bytes); loops
    // past it are computed at each use, not kept.
    size_t loop_mask_bytes = LoopMasks::kDefaultMaxBytes;
  };

  // Builds `vocab`'s trie and the memo's byte index: a few passes over the
  // text tokens' bytes (tens of ms for a 150k-token vocabulary). `vocab`
  // must not be null.
  static std::shared_ptr<const TokenizerContext> Create(std::shared_ptr<const Vocabulary> vocab,
                                                        const Options& options);
  static std::shared_ptr<const TokenizerContext> Create(std::shared_ptr<const Vocabulary> vocab) {
    return Create(std::move(vocab), Options());
  }

  TokenizerContext(const TokenizerContext&) = delete;
  TokenizerContext& operator=(const TokenizerContext&) = delete;
  ~TokenizerContext();

  const Vocabulary& vocabulary() const { return *vocab_; }
  const std::shared_ptr<const Vocabulary>& shared_vocabulary() const { return vocab_; }
  // The vocabulary's text tokens (not special, 1 to 65535 bytes) as a trie.
  const TokenTrie& trie() const { return *trie_; }
  // Mask parts shared by the loops of every index over this vocabulary
  // (tokenizer/loop_masks.h): a thread-safe memo that changes no answer above.
  LoopMasks& loop_masks() const { return *loop_masks_; }

 private:
  explicit TokenizerContext(std::shared_ptr<const Vocabulary> vocab);

  // Declared in this order: loop_masks_ points into *vocab_ and *trie_.
  const std::shared_ptr<const Vocabulary> vocab_;
  const std::unique_ptr<const TokenTrie> trie_;
  const std::unique_ptr<LoopMasks> loop_masks_;
};

}  // namespace maskd

#endif  // MASKD_TOKENIZER_TOKENIZER_CONTEXT_H_
