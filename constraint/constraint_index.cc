#include "constraint/constraint_index.h"

#include <utility>

namespace maskd {

std::string_view ConstraintRouteName(ConstraintRoute route) {
  return route == ConstraintRoute::kRegex ? "regex" : "grammar";
}

ConstraintIndex::ConstraintIndex(std::shared_ptr<const TokenIndex> index)
    : token_index_(std::move(index)),
      vocab_(&token_index_->vocabulary()),
      num_words_(token_index_->num_words()) {}

ConstraintIndex::ConstraintIndex(std::shared_ptr<const grammar::GrammarIndex> index)
    : grammar_index_(std::move(index)),
      vocab_(&grammar_index_->vocab()),
      num_words_(grammar_index_->num_words()) {}

uint32_t ConstraintIndex::num_dfa_states() const {
  return token_index_ != nullptr ? token_index_->dfa().num_states()
                                 : grammar_index_->num_dfa_states();
}

size_t ConstraintIndex::MemoryBytes() const {
  return token_index_ != nullptr ? token_index_->MemoryBytes() : grammar_index_->MemoryBytes();
}

}  // namespace maskd
