#include "tokenizer/tokenizer_context.h"

#include <utility>

namespace maskd {

TokenizerContext::TokenizerContext(std::shared_ptr<const Vocabulary> vocab)
    : vocab_(std::move(vocab)),
      trie_(TokenTrie::Build(*vocab_)),
      loop_masks_(std::make_unique<LoopMasks>(*vocab_, *trie_)) {}

TokenizerContext::~TokenizerContext() = default;

std::shared_ptr<const TokenizerContext> TokenizerContext::Create(
    std::shared_ptr<const Vocabulary> vocab, const Options& options) {
  auto context = std::shared_ptr<TokenizerContext>(new TokenizerContext(std::move(vocab)));
  context->loop_masks_->set_max_bytes(options.loop_mask_bytes);
  return context;
}

}  // namespace maskd
