// Shared helpers for the grammar tests: the example grammars of
// tests/data/grammars, mask words, and the brute-force mask of a parser state.
#ifndef MASKD_TESTS_GRAMMAR_GRAMMAR_TEST_UTIL_H_
#define MASKD_TESTS_GRAMMAR_GRAMMAR_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/earley_parser.h"
#include "grammar/grammar.h"
#include "grammar/grammar_index.h"
#include "tokenizer/vocabulary.h"

namespace maskd::testing {

// The text of tests/data/grammars/<name> ("" when it cannot be read).
std::string ReadGrammar(const std::string& name);
// tests/data/grammars/<name> through the front end its extension names:
// ParseLark for ".lark", ParseGbnf otherwise.
absl::StatusOr<grammar::Grammar> ParseGrammarFile(const std::string& name);

// Bit t of packed mask words (bit t & 31 of word t >> 5).
inline bool Bit(const std::vector<uint32_t>& words, uint32_t t) {
  return (words[t >> 5] >> (t & 31)) & 1;
}
// The ids of the set bits of `words`, ascending (bits past the vocabulary
// included: a mask must leave them clear).
std::vector<uint32_t> Allowed(const std::vector<uint32_t>& words);

// The text tokens of `vocab` (present, not special, non-empty bytes) sorted
// by their bytes, so that consecutive ids share their longest prefixes.
std::vector<uint32_t> TextTokensByBytes(const Vocabulary& vocab);

// Whether `parser` takes every byte of `bytes` (non-empty) in turn; the
// parser ends as it began. Records a test failure on a parser error.
bool TakesBytes(grammar::EarleyParser& parser, std::string_view bytes);

// The mask of `parser`'s state by definition, without the engine's memo,
// look-ahead or trie: every text token in `order` (TextTokensByBytes of the
// index's vocabulary) whose bytes a copy of the parser takes one by one, plus
// the EOS ids when the parser accepts; no other special token. A token
// reuses the Earley sets its predecessor in `order` pushed for their common
// prefix, and a refused prefix refuses the tokens that share it, so the cost
// is one Push per live prefix of the vocabulary plus one per refused byte.
std::vector<uint32_t> BruteForceMask(const grammar::GrammarIndex& index,
                                     const grammar::EarleyParser& parser,
                                     const std::vector<uint32_t>& order);
// The same, ordering the vocabulary itself (for one-off calls).
std::vector<uint32_t> BruteForceMask(const grammar::GrammarIndex& index,
                                     const grammar::EarleyParser& parser);

}  // namespace maskd::testing

#endif  // MASKD_TESTS_GRAMMAR_GRAMMAR_TEST_UTIL_H_
