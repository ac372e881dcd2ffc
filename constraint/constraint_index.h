// ConstraintIndex: a compiled constraint of any kind over one vocabulary,
// the thing sessions and caches hold.
//
// Exactly one engine backs it, named by its route:
//  - kRegex: a TokenIndex (index/token_index.h): a DFA with a mask per
//    state. Regexes and JSON Schemas that convert to a regex take it.
//  - kGrammar: a GrammarIndex (grammar/grammar_index.h): a context-free
//    grammar, masks computed per parser state.
// Immutable after construction except for what the engines memoise (masks,
// memo entries), which is thread-safe. ConstraintGuide (constraint_guide.h)
// walks one sequence over it.
#ifndef MASKD_CONSTRAINT_CONSTRAINT_INDEX_H_
#define MASKD_CONSTRAINT_CONSTRAINT_INDEX_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "grammar/grammar_index.h"
#include "index/token_index.h"
#include "tokenizer/vocabulary.h"

namespace maskd {

enum class ConstraintRoute { kRegex, kGrammar };
std::string_view ConstraintRouteName(ConstraintRoute route);  // "regex", "grammar"

class ConstraintIndex {
 public:
  // `index` must not be null.
  explicit ConstraintIndex(std::shared_ptr<const TokenIndex> index);
  explicit ConstraintIndex(std::shared_ptr<const grammar::GrammarIndex> index);

  ConstraintRoute route() const {
    return token_index_ != nullptr ? ConstraintRoute::kRegex : ConstraintRoute::kGrammar;
  }
  const Vocabulary& vocabulary() const { return *vocab_; }
  // Mask width in 32-bit words: ceil(vocabulary().size() / 32).
  uint32_t num_words() const { return num_words_; }
  // DFA states: the regex's, or all the grammar's terminals' together.
  uint32_t num_dfa_states() const;
  // Bytes held now; grows as masks and memo entries are computed.
  size_t MemoryBytes() const;

  // The engine: exactly one is non-null, the one route() names.
  const std::shared_ptr<const TokenIndex>& token_index() const { return token_index_; }
  const std::shared_ptr<const grammar::GrammarIndex>& grammar_index() const {
    return grammar_index_;
  }

 private:
  std::shared_ptr<const TokenIndex> token_index_;
  std::shared_ptr<const grammar::GrammarIndex> grammar_index_;
  const Vocabulary* vocab_;
  uint32_t num_words_;
};

}  // namespace maskd

#endif  // MASKD_CONSTRAINT_CONSTRAINT_INDEX_H_
